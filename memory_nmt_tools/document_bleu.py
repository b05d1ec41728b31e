"""Sentence-level and document-level BLEU (s-BLEU, d-BLEU) of fairseq-generate output.

Reads the hypotheses (D- or H- lines) and references (T- lines, or a raw reference file) that
fairseq-generate prints, puts them in corpus order by sentence id, and scores them with
sacrebleu against the document index written by scripts/prepare_documents.py (one document
id per sentence line, e.g. data-bin/test.en-de.docids). s-BLEU is corpus BLEU over sentences;
d-BLEU is corpus BLEU over documents, each document's sentences joined with a space.
``score_documents`` does the scoring for other scripts.

Text still in subword pieces is not scored as it is (``subword_pieces.py`` says what counts as
pieces): hypotheses and references of fairseq-generate run without --post-process, or a
segmented file given as --reference, are undone with --post-process (the data's segmentation, as
given to fairseq-generate) or, without it, refused naming the file, the line and the fix.

These are sacreBLEU scores of detokenized text, the ones to cite. The paper, like most
document-level MT papers (G-Transformer among them), reports BLEU on Moses-tokenized text with
the BPE removed (multi-bleu.perl); --tokenized-reference adds those, clearly labelled: the H-
lines (the model's tokens, as fairseq-generate's --post-process subword_nmt leaves them) against
the reference as the model's data has it (a recipe's WORK_DIR/prep/test.de) with its subwords
undone as fairseq's ``post_process`` undoes them (the function behind --post-process; BPE data takes
--post-process subword_nmt here as in fairseq-generate), scored by
sacrebleu without its own tokenization (tok:none). They compare with the paper's numbers, not
with sacreBLEU's. Data segmented with a pretrained checkpoint's sentencepiece model
(prepare_documents.py --spm-model) is raw text, never Moses-tokenized: pass --post-process
sentencepiece, as to fairseq-generate, and know that its "tokenized" scores are of raw text split
at spaces; report the sacreBLEU scores.
"""
import argparse
import json
import sys
from pathlib import Path

from sacrebleu.metrics import BLEU

from .document_index import read_document_ids
from .generate_texts import read_hypotheses, read_references
from .paths import check_paths
from .subword_pieces import SEGMENTATIONS, without_pieces
from .text_files import TextFileError, read_lines

UNDO_OPTION = "--post-process"  # this command's option that undoes subword pieces


class DocumentBleuError(TextFileError):
    """Bad input: the message names the file (and line or sentence ids) and what to do."""


def read_docids(path):
    """The document id of each sentence, read as training reads them (``document_index.py``)."""
    docids = read_document_ids(path)
    if not docids:
        raise DocumentBleuError(f"{path}: no document ids; pass the docids file of the split")
    return docids


def score_documents(hypotheses, references, docids, tokenized=False):
    """s-BLEU and d-BLEU of hypotheses against references, both in corpus (sentence id) order.

    docids gives each sentence's document; documents are scored in order of first appearance.
    ``tokenized``: the text is tokenized already, so sacrebleu's own tokenization is off
    (tok:none) and so is its warning about tokenized input.
    Returns {"s_bleu", "d_bleu", "sentences", "documents", "signature"}.
    """
    if not len(hypotheses) == len(references) == len(docids):
        raise DocumentBleuError(
            f"{len(hypotheses)} hypotheses, {len(references)} references and {len(docids)} "
            "document ids: they must be parallel, one per sentence"
        )
    document_hypotheses, document_references = {}, {}
    for hypothesis, reference, docid in zip(hypotheses, references, docids):
        document_hypotheses.setdefault(docid, []).append(hypothesis)
        document_references.setdefault(docid, []).append(reference)
    bleu = BLEU(tokenize="none", force=True) if tokenized else BLEU()
    sentence_score = bleu.corpus_score(list(hypotheses), [list(references)])
    document_score = bleu.corpus_score(
        [" ".join(sentences) for sentences in document_hypotheses.values()],
        [[" ".join(sentences) for sentences in document_references.values()]],
    )
    return {
        "s_bleu": sentence_score.score,
        "d_bleu": document_score.score,
        "sentences": len(docids),
        "documents": len(document_hypotheses),
        "signature": str(bleu.get_signature()),
    }


def tokenized_scores(generate_output, tokenized_reference, docids, post_process=None):
    """The paper-comparable scores: the H- lines, whose subwords fairseq-generate's
    ``--post-process`` undid (or ``post_process`` undoes here), against the tokenized reference,
    whose subwords ``post_process`` undoes as fairseq does (``subword_pieces.without_pieces``)."""
    count = len(docids)
    hypotheses = read_hypotheses(generate_output, count, "H", post_process, UNDO_OPTION)
    references = read_lines(tokenized_reference)
    if len(references) != count:
        raise DocumentBleuError(
            f"{tokenized_reference} has {len(references)} lines but the docids file has {count}; "
            "pass the tokenized reference of the same split, one sentence per line"
        )
    references = without_pieces(references, post_process, lambda i: f"{tokenized_reference}:{i + 1}",
                                "give --post-process {0}, as to fairseq-generate, to undo them")
    return score_documents(hypotheses, references, docids, tokenized=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generate-output", required=True,
                        help="fairseq-generate's stdout (its S-/T-/H-/D- lines; others are "
                        "ignored)")
    parser.add_argument("--docids", required=True,
                        help="document id of each sentence of the generated split, one per line")
    parser.add_argument("--hypothesis-lines", choices=["D", "H"], default="D",
                        help="D: detokenized hypotheses (default); H: hypotheses as the model's "
                        "tokens (after --post-process)")
    parser.add_argument("--reference",
                        help="raw reference, one sentence per line in corpus order, instead of "
                        "the T- lines")
    parser.add_argument("--tokenized-reference",
                        help="also score the paper's way: the reference as the model's data has it "
                        "(Moses-tokenized, with or without BPE; e.g. a recipe's WORK_DIR/prep/test.de), "
                        "one sentence per line in corpus order, against the H- lines")
    parser.add_argument("--post-process", choices=sorted(SEGMENTATIONS),
                        help="the data's segmentation, as given to fairseq-generate's --post-process "
                        "(subword_nmt for BPE data, sentencepiece for data prepared with --spm-model): "
                        "undone here in the --tokenized-reference and in hypotheses or references "
                        "still in its pieces; without it, text in subword pieces is refused")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: s_bleu, d_bleu, sentences, documents, "
                        "signature (and with --tokenized-reference the same under 'tokenized')")
    parser.add_argument("--save-json", type=Path, metavar="FILE",
                        help="also write that JSON object to FILE, the scores printed as without it")
    args = parser.parse_args(argv)
    check_paths(parser, outputs=[("--save-json", args.save_json)])
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        docids = read_docids(args.docids)
        count = len(docids)
        hypotheses = read_hypotheses(args.generate_output, count, args.hypothesis_lines, args.post_process,
                                     UNDO_OPTION)
        references = read_references(args.generate_output, count, args.reference, args.post_process, UNDO_OPTION)
        scores = score_documents(hypotheses, references, docids)
        if args.tokenized_reference:
            scores["tokenized"] = tokenized_scores(
                args.generate_output, args.tokenized_reference, docids, args.post_process
            )
    except TextFileError as error:
        sys.exit(f"error: {error}")
    if args.save_json:
        args.save_json.write_text(json.dumps(scores) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(scores))
        return
    print(f"s-BLEU {scores['s_bleu']:.2f}  ({scores['sentences']} sentences)")
    print(f"d-BLEU {scores['d_bleu']:.2f}  ({scores['documents']} documents)")
    print(f"signature: {scores['signature']}")
    if "tokenized" in scores:
        tokenized = scores["tokenized"]
        print(f"tokenized s-BLEU {tokenized['s_bleu']:.2f}, d-BLEU {tokenized['d_bleu']:.2f}  (as the paper "
              "reports: tokenized text, BPE removed; not comparable with sacreBLEU scores)")
        print(f"signature: {tokenized['signature']}")


if __name__ == "__main__":
    main()
