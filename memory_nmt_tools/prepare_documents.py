"""Turn raw parallel documents into fairseq-preprocess input plus a document index.

Reads one of three input formats (blank-line separated text, text with a ``<d>`` line before
each document as in the selective-attn release, WMT SGML), checks that both sides hold the
same documents with the same number of sentences, optionally segments the sentences, and
writes ``{prefix}.{src}``, ``{prefix}.{tgt}`` and ``{prefix}.docids`` (one document id per
sentence line). fairseq-preprocess binarizes the first two (this script does not run it); copy
the docids file next to the binarized data as ``{split}.{src}-{tgt}.docids``, where the
memory_nmt task reads it. An output that would overwrite an input is refused before anything is
read, and each output replaces its file only once completely written.

Two ways to segment:

- training from scratch: Moses tokenization (sacremoses, with fairseq's ``--tokenizer moses``
  defaults) and joint BPE (subword-nmt), undone by fairseq's ``--post-process subword_nmt``;
- finetuning a pretrained checkpoint (mBART-50, NLLB-200): the checkpoint's own sentencepiece
  model on the raw text (``--spm-model``), its pieces joined by spaces as fairseq's
  ``--bpe sentencepiece`` and mBART's ``spm_encode --output_format=piece`` write them, undone by
  ``--post-process sentencepiece``. Binarize with the checkpoint's dictionary,
  ``fairseq-preprocess --srcdict DICT --tgtdict DICT``, so that the token ids are the ones the
  checkpoint was trained with.
"""
import argparse
import html
import os
import re
import secrets
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .text_files import TextFileError, numbered_lines

DOC_MARKER = "<d>"
SGML_SET = re.compile(r"<(?:src|ref|tst)set\b[^>]*>")
SGML_DOC = re.compile(r"<doc\b[^>]*>")
SGML_SEG = re.compile(r"<seg\b([^>]*)>(.*?)</seg>")
SGML_ATTRIBUTE = re.compile(r"""(\w+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


class PrepareError(TextFileError):
    """Bad input: the message names the file and line (or document) and what to do."""


@dataclass
class DocumentSide:
    """One document of one side: its id, the line it starts on, its sentences (and SGML seg ids)."""

    doc_id: str
    line: int
    sentences: list = field(default_factory=list)
    seg_ids: list = field(default_factory=list)


def clean(text):
    """Strip the ASCII whitespace around a sentence; other characters are kept as they are."""
    return text.strip(" \t\f\v")


def read_blank_lines(path, prefix):
    """Documents of plain text, one sentence per line, an empty line between documents."""
    documents, current = [], None
    for number, text in numbered_lines(path):
        sentence = clean(text)
        if sentence:
            if current is None:
                current = DocumentSide(f"{prefix}-{len(documents)}", number)
            current.sentences.append(sentence)
        elif current is None:
            raise PrepareError(
                f"{path}:{number}: empty document (blank line at the start or two blank lines "
                "in a row); documents are separated by exactly one blank line, remove the extra one"
            )
        else:
            documents.append(current)
            current = None
    if current is not None:
        documents.append(current)
    return documents


def read_doc_markers(path, prefix):
    """Documents of text with a line ``<d>`` before each document, one sentence per line."""
    documents = []
    for number, text in numbered_lines(path):
        sentence = clean(text)
        if sentence == DOC_MARKER:
            documents.append(DocumentSide(f"{prefix}-{len(documents)}", number))
        elif not sentence:
            raise PrepareError(
                f"{path}:{number}: empty line; every line must be a sentence or {DOC_MARKER}, "
                "remove it or give it its text"
            )
        elif not documents:
            raise PrepareError(
                f"{path}:{number}: sentence before the first {DOC_MARKER} line; this format needs "
                f"a line {DOC_MARKER} before each document (blank-line separated text: "
                "--format blank-lines)"
            )
        else:
            documents[-1].sentences.append(sentence)
    for document in documents:
        if not document.sentences:
            raise PrepareError(
                f"{path}:{document.line}: empty document {document.doc_id} (a {DOC_MARKER} line "
                "with no sentence after it); remove the extra marker"
            )
    return documents


def attributes(tag):
    """The attributes of an SGML start tag as a dict."""
    return {m[1]: m[2] or m[3] or m[4] for m in SGML_ATTRIBUTE.finditer(tag)}


def read_sgml(path, prefix):
    """Documents of WMT SGML as {docid: DocumentSide}, in file order.

    Only ``<seg>`` elements are text of the corpus: markup lines (``<p>``, ``<h1>``, ...) and
    stray text outside segments (the real files have some) are skipped, as WMT scoring does.
    Entities in segment text are unescaped.
    Without ``prefix`` the ids are prefixed with the file's setid, if it has one.
    """
    documents, current = {}, None
    for number, text in numbered_lines(path):
        where = f"{path}:{number}"
        if prefix is None and SGML_SET.search(text):
            prefix = attributes(SGML_SET.search(text)[0]).get("setid")
        if SGML_DOC.search(text):
            docid = attributes(SGML_DOC.search(text)[0]).get("docid")
            if not docid or re.search(r"\s", docid):
                raise PrepareError(f"{where}: <doc> without a docid, or with spaces in it; fix it")
            if docid in documents:
                raise PrepareError(f"{where}: docid {docid} used twice; docids must be unique")
            current = documents[docid] = DocumentSide(f"{prefix}-{docid}" if prefix else docid, number)
        for seg in SGML_SEG.finditer(text):
            seg_id = attributes(seg[1]).get("id")
            sentence = clean(html.unescape(seg[2]))
            if current is None:
                raise PrepareError(f"{where}: <seg> outside a <doc> block; wrap it in one")
            if seg_id is None or seg_id in current.seg_ids:
                raise PrepareError(f"{where}: <seg> without an id, or a repeated id, in {docid}")
            if not sentence:
                raise PrepareError(f"{where}: empty segment id={seg_id} in {docid}; give it text")
            current.sentences.append(sentence)
            current.seg_ids.append(seg_id)
        rest = SGML_SEG.sub("", text)
        if "<seg" in rest or "</seg>" in rest:
            raise PrepareError(
                f"{where}: <seg> element not closed on its line; put each segment, "
                "<seg id=N>text</seg>, on one line"
            )
        if "</doc>" in text:
            current = None
    for docid, document in documents.items():
        if not document.sentences:
            raise PrepareError(
                f"{path}:{document.line}: docid {docid} has no <seg>; remove the empty document"
            )
    return documents


def read_side(path, input_format, prefix):
    """The documents of one side as {key: DocumentSide} (position or docid), never empty."""
    if input_format == "sgml":
        documents = read_sgml(path, prefix)
    else:
        reader = read_blank_lines if input_format == "blank-lines" else read_doc_markers
        documents = dict(enumerate(reader(path, prefix or Path(path).stem)))
    if not documents:
        raise PrepareError(f"{path}: no sentences (empty input); check the path and --format")
    return documents


def pair_sides(source_path, target_path, source_docs, target_docs, input_format):
    """Check that both sides hold the same documents and sentences.

    Returns (document id, source sentences, target sentences) per document in source order.
    SGML sides are paired by docid and segment id; the other formats by position.
    """
    if input_format == "sgml":
        checks = ((source_docs, target_docs, source_path, target_path),
                  (target_docs, source_docs, target_path, source_path))
        for docs, other_docs, path, other_path in checks:
            for docid, doc in docs.items():
                if docid not in other_docs:
                    raise PrepareError(
                        f"{other_path}: no document docid={docid} (it is at line {doc.line} of "
                        f"{path}); both files must hold the same documents"
                    )
                missing = [seg for seg in doc.seg_ids if seg not in other_docs[docid].seg_ids]
                if missing:
                    raise PrepareError(
                        f"{other_path}: docid={docid} has no segment id={missing[0]} (it is in "
                        f"{path}); both files must hold the same segments"
                    )
        pairs = []
        for docid, doc in source_docs.items():
            target = dict(zip(target_docs[docid].seg_ids, target_docs[docid].sentences))
            pairs.append((doc.doc_id, doc.sentences, [target[seg] for seg in doc.seg_ids]))
        return pairs
    for key, doc in source_docs.items():
        other = target_docs.get(key)
        if other is not None and len(doc.sentences) != len(other.sentences):
            raise PrepareError(
                f"document {doc.doc_id} has {len(doc.sentences)} sentences in {source_path} "
                f"(from line {doc.line}) but {len(other.sentences)} in {target_path} (from line "
                f"{other.line}); both sides need the same sentences in the same documents"
            )
    if len(source_docs) != len(target_docs):
        longer, path = max((source_docs, source_path), (target_docs, target_path),
                           key=lambda side: len(side[0]))
        extra = longer[min(len(source_docs), len(target_docs))]
        raise PrepareError(
            f"{source_path} has {len(source_docs)} documents but {target_path} has "
            f"{len(target_docs)}, the first without a counterpart being {extra.doc_id} at line "
            f"{extra.line} of {path}; both sides need the same document boundaries"
        )
    return [(doc.doc_id, doc.sentences, target_docs[key].sentences)
            for key, doc in source_docs.items()]


def tokenize(sentences, language, args):
    """Moses-tokenize sentences like fairseq's ``--tokenizer moses`` (dash splits, escaping)."""
    from sacremoses import MosesTokenizer  # imported when used: it doubles the start-up time

    tokenizer = MosesTokenizer(lang=language)
    return [
        tokenizer.tokenize(
            sentence,
            aggressive_dash_splits=not args.moses_no_dash_splits,
            return_str=True,
            escape=not args.moses_no_escape,
        )
        for sentence in sentences
    ]


def most_frequent_pair(lines):
    """How often the corpus's most frequent pair of adjacent symbols occurs, counted as
    subword-nmt's learn_bpe counts them: words split on spaces, a word's last character marked
    as word-final (so "ab" holds the pair a, b</w>), each word once per occurrence."""
    words = Counter(word for line in lines for word in line.strip("\r\n ").split(" ") if word)
    pairs = Counter()
    for word, count in words.items():
        symbols = (*word[:-1], word[-1] + "</w>")
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += count
    return max(pairs.values(), default=0)


def learn_joint_bpe(sides, merges, codes_path):
    """Learn ``merges`` BPE merge operations on all sides together and write them to codes_path.

    subword-nmt merges only pairs that occur at least twice: on a corpus with none it would write
    a codes file without a single merge, which applying it then rejects ("invalid line 2"). That
    is refused here, before anything is written.
    """
    from subword_nmt.learn_bpe import learn_bpe

    lines = [line for side in sides for line in side]
    if most_frequent_pair(lines) < 2:
        raise PrepareError(
            f"--learn-bpe {merges}: no pair of symbols occurs twice in the corpus, so BPE has "
            "nothing to merge; learn the codes on the real training corpus (or leave out "
            "--learn-bpe and --bpe-codes)"
        )
    Path(codes_path).parent.mkdir(parents=True, exist_ok=True)
    with replaced_whole(codes_path) as codes:
        learn_bpe(lines, codes, merges)


def apply_bpe(sentences, codes_path):
    """Segment sentences with the BPE codes in codes_path ("@@ " marks a split)."""
    from subword_nmt.apply_bpe import BPE

    try:
        with open(codes_path, encoding="utf-8") as codes:
            bpe = BPE(codes)
    except OSError as error:
        raise PrepareError(f"cannot read BPE codes {codes_path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise PrepareError(f"{codes_path}: not a UTF-8 subword-nmt codes file") from None
    return [bpe.segment(sentence) for sentence in sentences]


def load_sentencepiece(model_path):
    """The sentencepiece model in model_path, loaded before the corpus is read."""
    import sentencepiece

    fix = "pass the sentencepiece model of the pretrained checkpoint (e.g. mBART-50's sentence.bpe.model)"
    if not Path(model_path).is_file():
        raise PrepareError(f"--spm-model {model_path}: no such file; {fix}")
    try:
        return sentencepiece.SentencePieceProcessor(model_file=str(model_path))
    except RuntimeError as error:
        raise PrepareError(f"--spm-model {model_path}: cannot load it ({error}); {fix}") from None


def apply_sentencepiece(sentences, model):
    """Segment sentences into the model's pieces, joined by spaces (U+2581 "▁" marks a word start)."""
    return [" ".join(model.encode(sentence, out_type=str)) for sentence in sentences]


def spm_model_refused_with(options):
    """Why --spm-model cannot go with ``options`` (Moses tokenization, BPE), for parser.error."""
    return f"--spm-model segments raw text with the pretrained model's own pieces: leave out {options}"


def check_no_empty_line(sides, positions, step):
    """An error naming the first sentence that ``step`` left empty."""
    for lang, lines in sides.items():
        for (doc_id, number), line in zip(positions, lines):
            if not line:
                raise PrepareError(
                    f"sentence {number} of document {doc_id} ({lang}) is empty after {step}; "
                    "remove it from both sides"
                )


@contextmanager
def replaced_whole(path):
    """A text file (UTF-8, LF) that takes ``path``'s place only once it is completely written:
    an error while writing leaves ``path`` as it was and no partial file behind. The file gets
    the mode a plainly written one gets (0666 less the umask; tempfile.mkstemp's would be 0600,
    unreadable to the collaborators who share the prepared data)."""
    partial = os.path.join(os.path.dirname(os.path.abspath(path)),
                           f".{os.path.basename(path)}.{secrets.token_hex(4)}.partial")
    handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            yield out
        os.replace(partial, path)
    except BaseException:
        os.unlink(partial)
        raise


def write_outputs(outputs):
    """Write each ``{path: lines}`` whole (``replaced_whole``), one line per item."""
    for path, lines in outputs.items():
        with replaced_whole(path) as out:
            out.writelines(line + "\n" for line in lines)


def output_paths(args):
    """PREFIX.SRC, PREFIX.TGT and PREFIX.docids, after checking that no file this run writes is
    one it reads or writes already (a second run would otherwise read its own output)."""
    outputs = [f"{args.output_prefix}.{suffix}" for suffix in (args.source_lang, args.target_lang, "docids")]
    reads = {"--source": args.source, "--target": args.target}
    writes = [(path, "--output-prefix") for path in outputs]
    if args.bpe_codes and args.learn_bpe:
        writes.insert(0, (args.bpe_codes, "--bpe-codes"))
    elif args.bpe_codes:
        reads["--bpe-codes"] = args.bpe_codes
    if args.spm_model:
        reads["--spm-model"] = args.spm_model
    taken = {Path(path).resolve(): (path, option) for option, path in reads.items()}
    for path, option in writes:
        earlier = taken.setdefault(Path(path).resolve(), (path, option))
        if earlier != (path, option):
            raise PrepareError(
                f"{path} ({option}) would overwrite {earlier[0]} ({earlier[1]}); choose another {option}"
            )
    return outputs


def prepare(args):
    """Read, pair, process and write one corpus; return the one-line summary."""
    paths = output_paths(args)
    if args.bpe_codes and not args.learn_bpe and not Path(args.bpe_codes).is_file():
        raise PrepareError(
            f"--bpe-codes {args.bpe_codes}: no such file; learn the codes on the training split "
            "first (--learn-bpe N --bpe-codes CODES)"
        )
    spm_model = load_sentencepiece(args.spm_model) if args.spm_model else None
    source_docs = read_side(args.source, args.format, args.doc_prefix)
    target_docs = read_side(args.target, args.format, args.doc_prefix)
    pairs = pair_sides(args.source, args.target, source_docs, target_docs, args.format)
    positions = [(doc_id, n) for doc_id, source, _ in pairs for n in range(1, len(source) + 1)]
    sides = {
        args.source_lang: [sentence for _, source, _ in pairs for sentence in source],
        args.target_lang: [sentence for _, _, target in pairs for sentence in target],
    }
    if args.moses:
        sides = {lang: tokenize(lines, lang, args) for lang, lines in sides.items()}
        check_no_empty_line(sides, positions, "Moses tokenization")
    if spm_model:
        sides = {lang: apply_sentencepiece(lines, spm_model) for lang, lines in sides.items()}
        check_no_empty_line(sides, positions, "sentencepiece segmentation")
    if args.learn_bpe:
        learn_joint_bpe(sides.values(), args.learn_bpe, args.bpe_codes)
    if args.bpe_codes:
        sides = {lang: apply_bpe(lines, args.bpe_codes) for lang, lines in sides.items()}
    Path(args.output_prefix).parent.mkdir(parents=True, exist_ok=True)
    outputs = dict(zip(paths, [*sides.values(), [doc_id for doc_id, _ in positions]]))
    write_outputs(outputs)
    written = list(outputs) + ([args.bpe_codes] if args.learn_bpe else [])
    return f"{len(pairs)} documents, {len(positions)} sentences: wrote {' '.join(written)}"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Learn BPE on the training set (--learn-bpe N --bpe-codes CODES) and apply the "
        "same codes to valid/test (--bpe-codes CODES). To finetune a pretrained checkpoint "
        "(mBART-50, NLLB-200), give raw text and the checkpoint's sentencepiece model "
        "(--spm-model MODEL), then binarize with the checkpoint's dictionary: fairseq-preprocess "
        "--srcdict DICT --tgtdict DICT (this script does not run fairseq-preprocess).",
    )
    parser.add_argument("--format", required=True, choices=["blank-lines", "doc-markers", "sgml"],
                        help="blank-lines: one sentence per line, an empty line between documents; "
                        "doc-markers: a line <d> before each document; sgml: WMT SGML "
                        "(<doc docid=...> blocks of <seg id=N> lines), paired by docid and seg id")
    parser.add_argument("--source", required=True, help="source-side input file")
    parser.add_argument("--target", required=True, help="target-side input, parallel to --source")
    parser.add_argument("--source-lang", required=True, help="source language code, e.g. en")
    parser.add_argument("--target-lang", required=True, help="target language code, e.g. de")
    parser.add_argument("--output-prefix", required=True,
                        help="write PREFIX.SRC_LANG, PREFIX.TGT_LANG and PREFIX.docids; "
                        "creates the directory if needed")
    parser.add_argument("--doc-prefix",
                        help="document ids are DOC_PREFIX-INDEX (INDEX from 0) for text formats, "
                        "DOC_PREFIX-DOCID for sgml (default: the source file's name without "
                        "extension; for sgml the file's setid)")
    parser.add_argument("--moses", action="store_true",
                        help="Moses-tokenize each side with sacremoses, with the defaults of "
                        "fairseq's --tokenizer moses")
    parser.add_argument("--moses-no-dash-splits", action="store_true",
                        help="with --moses: no aggressive dash splitting")
    parser.add_argument("--moses-no-escape", action="store_true",
                        help="with --moses: don't escape special characters (&amp; &quot; ...)")
    parser.add_argument("--learn-bpe", type=int, metavar="MERGES",
                        help="learn a joint BPE of MERGES merge operations on both sides of this "
                        "input, write it to --bpe-codes, and apply it")
    parser.add_argument("--bpe-codes", metavar="CODES",
                        help="apply these subword-nmt BPE codes (written first with --learn-bpe)")
    parser.add_argument("--spm-model", metavar="MODEL",
                        help="segment the raw text of both sides with this sentencepiece model (a "
                        "pretrained checkpoint's, e.g. mBART-50's sentence.bpe.model), pieces "
                        "joined by spaces; undone by fairseq's --post-process sentencepiece")
    args = parser.parse_args(argv)
    if args.spm_model and (args.moses or args.learn_bpe is not None or args.bpe_codes):
        parser.error(spm_model_refused_with("--moses, --learn-bpe and --bpe-codes"))
    if args.learn_bpe is not None and (args.learn_bpe < 1 or not args.bpe_codes):
        parser.error("--learn-bpe needs a positive number of merges and --bpe-codes CODES to write")
    if args.source_lang == args.target_lang:
        parser.error("--source-lang and --target-lang must differ (they name the output files)")
    if (args.moses_no_dash_splits or args.moses_no_escape) and not args.moses:
        parser.error("--moses-no-dash-splits and --moses-no-escape only apply with --moses")
    if args.doc_prefix is not None and (not args.doc_prefix or re.search(r"\s", args.doc_prefix)):
        parser.error("--doc-prefix must be non-empty and without spaces")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        print(prepare(args))
    except TextFileError as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
