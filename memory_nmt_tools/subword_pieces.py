"""Text that still holds subword pieces: telling BPE's and sentencepiece's from ordinary text, and
refusing such text or undoing it as fairseq's ``post_process`` (the function behind
fairseq-generate's ``--post-process``) does, for the tools that score translations.

The scoring tools read text that should be free of the data's segmentation: fairseq-generate's
hypotheses and references (which its ``--post-process`` joins back into words) and raw
references; fairseq-generate run without ``--post-process`` leaves them in pieces, and BLEU of
pieces is far higher than BLEU of words. What counts as a line in pieces, by the shape each
segmentation gives a whole line (``segmentation_of``):

- ``subword_nmt`` (BPE): a token ending in ``@@`` that another token or the end of the line
  follows, the join fairseq's ``post_process`` removes (``c@@ at``);
- ``sentencepiece``: ``▁`` (U+2581, the mark sentencepiece puts before every word, the line's first
  word included) beginning the line's first token, or two or more of its tokens (``▁the ▁c at``).

A ``▁`` or ``@@`` elsewhere in ordinary text (inside a word, or one alone within a line) is text
and left alone. The lines of one side (the hypotheses of a fairseq-generate run, a reference
file) with one line in pieces are in pieces throughout, as fairseq-generate writes them all
alike: ``without_pieces`` undoes every line as ``post_process`` does (``UNDO``: its two string
replacements, here so that a scoring process need not import fairseq, seconds of CPU, for them;
tests/tools/test_document_bleu.py pins them to fairseq's), which also joins the pieces of a line
that holds no mark, as fairseq-generate's ``--post-process`` would have, or refuses them, naming
the file and line and what to do.

A fairseq dictionary is a segmentation's (``dictionary_segmentation``) when at least one of its
symbols in twenty, fairseq's special symbols left out, has that segmentation's mark: begins with
``▁`` (sentencepiece) or ends in ``@@`` (BPE); a dictionary of words holds none. The contrastive
scorer and the comparison read it to tell a checkpoint whose data was segmented.
"""
import re

from .text_files import TextFileError

SEGMENTATIONS = {"sentencepiece": "sentencepiece", "subword_nmt": "BPE"}  # --post-process name: its name in messages
# what fairseq's --post-process also takes for BPE (not "@@", which drops the marks and joins no pieces)
FAIRSEQ_ALIASES = {"@@ ": "subword_nmt"}
BPE_JOIN = re.compile(r"\S@@(?: |$)")
SENTENCEPIECE_MARK = "\u2581"
DICTIONARY_SHARE = 20  # one symbol in this many carrying a segmentation's mark makes the dictionary that segmentation's
EXCERPT = 40  # characters of a line in pieces shown in the refusal
UNDO = {  # each segmentation's undoing, as fairseq.data.data_utils.post_process does it
    "subword_nmt": lambda line: (line + " ").replace("@@ ", "").rstrip(),
    "sentencepiece": lambda line: line.replace(" ", "").replace(SENTENCEPIECE_MARK, " ").strip(),
}


class SubwordPiecesError(TextFileError):
    """Text in subword pieces where words were expected: names the file and line and what to do."""


def segmentation_of(line):
    """"subword_nmt" or "sentencepiece" if ``line`` has the shape that segmentation gives a line
    (see the module's docstring), else None."""
    if BPE_JOIN.search(line):
        return "subword_nmt"
    tokens = line.split()
    marked = sum(token.startswith(SENTENCEPIECE_MARK) for token in tokens)
    if tokens and (tokens[0].startswith(SENTENCEPIECE_MARK) or marked >= 2):
        return "sentencepiece"
    return None


def fairseq_post_process(name):
    """The segmentation a fairseq ``--post-process`` value undoes ("subword_nmt", "sentencepiece"),
    or None for none of them."""
    name = FAIRSEQ_ALIASES.get(name, name)
    return name if name in SEGMENTATIONS else None


def without_pieces(lines, post_process, locate, fix, undo_option=None):
    """``lines`` (one side: a run's hypotheses, a reference file) as words.

    None in pieces: the lines as they are. In the pieces of ``post_process`` (the segmentation the
    user named): every line undone as fairseq's ``post_process`` does (``UNDO``). Otherwise
    ``SubwordPiecesError`` naming the first line in pieces (``locate(index)``: "FILE:LINE" and what
    the line is) and, when ``post_process`` was not given, ``fix`` (with ``{0}``, the segmentation
    found), then ``undo_option`` (the option of the tool that undoes them) if the tool has one.
    """
    found = next(((index, name) for index, line in enumerate(lines) if (name := segmentation_of(line))), None)
    if found is None:
        return list(lines)
    index, segmentation = found
    if segmentation == post_process:
        return [UNDO[segmentation](line) for line in lines]
    line = lines[index]
    where = (f"{locate(index)} is in {SEGMENTATIONS[segmentation]} pieces "
             f"('{line[:EXCERPT]}{'...' * (len(line) > EXCERPT)}')")
    if post_process is not None:
        raise SubwordPiecesError(f"{where}, not {SEGMENTATIONS[post_process]}'s: give --post-process {segmentation}")
    undo_here = f", or undo them here with {undo_option} {segmentation}" if undo_option else ""
    raise SubwordPiecesError(f"{where}: {fix.format(segmentation)}{undo_here}")


def dictionary_segmentation(dictionary):
    """"sentencepiece" or "subword_nmt" if that segmentation's mark is on at least one in
    DICTIONARY_SHARE of a fairseq ``Dictionary``'s symbols (its special symbols left out), else None."""
    symbols = dictionary.symbols[dictionary.nspecial:]
    counts = {
        "sentencepiece": sum(symbol.startswith(SENTENCEPIECE_MARK) for symbol in symbols),
        "subword_nmt": sum(symbol.endswith("@@") for symbol in symbols),
    }
    segmentation, marked = max(counts.items(), key=lambda count: count[1])
    return segmentation if marked and marked * DICTIONARY_SHARE >= len(symbols) else None
