"""Hypotheses and references of one fairseq-generate output, in corpus order.

Shared by document_bleu.py, compare_systems.py, the quickstart and the paper's analyses
(bleu_by_position.py, memory_size_sweep.py): the hypotheses are the D- (or H-) lines, the
references the T- lines or a raw reference file, and every sentence id of the split must be
present exactly once. Text still in subword pieces (fairseq-generate run without --post-process, a
segmented file given as the raw reference) is refused, naming the file and line, or undone with
the ``post_process`` the caller was given (``subword_pieces.py``).
"""
import re

from .subword_pieces import without_pieces
from .text_files import TextFileError, numbered_lines, read_lines

GENERATE_LINE = re.compile(r"([A-Z])-(\d+)\t(.*)")
SHOWN_IDS = 5
RUN_GENERATE_WITH = "run fairseq-generate with --post-process {0}"
PASS_RAW_REFERENCE = "pass the raw reference, not the segmented one"


class GenerateOutputError(TextFileError):
    """fairseq-generate output that does not cover its split: names the file and the ids."""


def read_generate_output(path, kind):
    """{sentence id: [(line number, text)]} of the ``kind`` lines (S, T, H or D) of fairseq-generate output."""
    texts = {}
    for number, line in numbered_lines(path):
        match = GENERATE_LINE.fullmatch(line)
        if match and match[1] == kind:
            text = match[3].partition("\t")[2] if kind in "HD" else match[3]
            texts.setdefault(int(match[2]), []).append((number, text))
    return texts


def in_id_order(texts, count, what):
    """The (line number, text) of ids 0..count-1 in order; an error if any id is missing, repeated or extra."""
    missing = [i for i in range(count) if i not in texts]
    repeated = sorted(i for i, found in texts.items() if len(found) > 1)
    extra = sorted(i for i in texts if i >= count)
    if missing or repeated or extra:
        problems = [
            f"{label} {', '.join(map(str, ids[:SHOWN_IDS]))}{' ...' * (len(ids) > SHOWN_IDS)} "
            f"({len(ids)} in all)"
            for label, ids in (("missing ids", missing), ("repeated ids", repeated),
                               ("ids beyond the docids file", extra))
            if ids
        ]
        raise GenerateOutputError(
            f"{what} should have ids 0..{count - 1} once each ({count} sentences in the docids "
            f"file) but has {sum(map(len, texts.values()))} lines: {'; '.join(problems)}. Score "
            "the full output of one fairseq-generate run with the docids of its split; run it with "
            "--nbest 1 and --required-batch-size-multiple 1 (by default fairseq drops a last "
            "batch whose size is not a multiple of 8)"
        )
    return [texts[i][0] for i in range(count)]


def as_words(texts, path, kind, count, post_process, fix, undo_option):
    """The ``kind`` ``texts`` (``read_generate_output``) of ids 0..count-1 as words
    (``subword_pieces.without_pieces``)."""
    numbered = in_id_order(texts, count, f"the {kind}- lines of {path}")
    return without_pieces([text for _, text in numbered], post_process,
                          lambda i: f"{path}:{numbered[i][0]}: {kind}-{i}", fix, undo_option)


def read_hypotheses(path, count, hypothesis_lines="D", post_process=None, undo_option=None, fix=RUN_GENERATE_WITH):
    """The ``hypothesis_lines`` (D or H) texts of ``path`` for sentence ids 0..count-1; if they are
    in subword pieces, undone with ``post_process`` or refused, naming ``fix`` and the tool's
    ``undo_option`` (``subword_pieces.without_pieces``)."""
    hypotheses = read_generate_output(path, hypothesis_lines)
    if not hypotheses:
        raise GenerateOutputError(
            f"{path}: no {hypothesis_lines}- lines; pass the output of fairseq-generate run "
            "without --quiet"
        )
    return as_words(hypotheses, path, hypothesis_lines, count, post_process, fix, undo_option)


def read_references(path, count, reference=None, post_process=None, undo_option=None, fix=RUN_GENERATE_WITH):
    """The T- lines of ``path`` for ids 0..count-1, or the lines of the raw ``reference`` file; in
    subword pieces, undone or refused as ``read_hypotheses`` does (``fix`` names what to do about
    the T- lines; a reference file is to be passed raw)."""
    if reference is None:
        return as_words(read_generate_output(path, "T"), path, "T", count, post_process, fix, undo_option)
    references = read_lines(reference)
    if len(references) != count:
        raise GenerateOutputError(
            f"{reference} has {len(references)} lines but the docids file has {count}; pass the "
            "reference of the same split, one sentence per line"
        )
    return without_pieces(references, post_process, lambda i: f"{reference}:{i + 1}", PASS_RAW_REFERENCE,
                          undo_option)
