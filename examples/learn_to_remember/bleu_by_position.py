"""s-BLEU by sentence position in the document, memory model against sentence model (paper Figure 3).

Reads two fairseq-generate outputs of the same split (the memory model's and the sentence
model's) and the split's docids file, puts the sentences into buckets by their 1-based position
in their document (1-10, 11-20, ... for --bucket 10), and scores each bucket with sacrebleu's
corpus BLEU, for each model. Prints a table (positions, sentences, both BLEU scores, their
difference) and plots both curves and the difference per bucket to a PNG.

    python examples/learn_to_remember/bleu_by_position.py --docids data-bin/test.en-de.docids \
        --memory gen-memory.txt --sentence gen-sentence.txt --bucket 10 --plot out.png

Reading and validation are document_bleu.py's (generate_texts.py); references are the T-
lines, which must agree between the two outputs, or --reference.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sacrebleu.metrics import BLEU  # noqa: E402

from memory_nmt_tools.document_bleu import DocumentBleuError, read_docids  # noqa: E402
from memory_nmt_tools.generate_texts import read_hypotheses, read_references  # noqa: E402
from memory_nmt_tools.paths import check_paths  # noqa: E402
from memory_nmt_tools.text_files import TextFileError  # noqa: E402


def document_positions(docids):
    """The 1-based position of each sentence in its document (documents are contiguous)."""
    positions = []
    for index, docid in enumerate(docids):
        continues = index > 0 and docids[index - 1] == docid
        positions.append(positions[-1] + 1 if continues else 1)
    return positions


def position_buckets(positions, width):
    """[(first position, last position, sentence ids)] of the buckets that hold sentences."""
    buckets = {}
    for sentence, position in enumerate(positions):
        buckets.setdefault((position - 1) // width, []).append(sentence)
    return [(k * width + 1, (k + 1) * width, buckets[k]) for k in sorted(buckets)]


def bucket_bleu(bleu, hypotheses, references, sentences):
    return bleu.corpus_score(
        [hypotheses[i] for i in sentences], [[references[i] for i in sentences]]
    ).score


def bleu_by_position(memory, sentence, references, docids, width):
    """One row per bucket (first, last, sentences, memory and sentence BLEU, difference),
    and the sacrebleu signature."""
    bleu, rows = BLEU(), []
    for first, last, sentences in position_buckets(document_positions(docids), width):
        memory_bleu = bucket_bleu(bleu, memory, references, sentences)
        sentence_bleu = bucket_bleu(bleu, sentence, references, sentences)
        rows.append({
            "first": first, "last": last, "sentences": len(sentences),
            "memory": memory_bleu, "sentence": sentence_bleu,
            "difference": memory_bleu - sentence_bleu,
        })
    return rows, str(bleu.get_signature())


def format_table(rows):
    header = f"{'positions':>10} {'sentences':>9} {'memory':>7} {'sentence':>8} {'difference':>10}"
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row['first']:>4}-{row['last']:<5} {row['sentences']:>9} {row['memory']:>7.2f} "
            f"{row['sentence']:>8.2f} {row['difference']:>+10.2f}"
        )
    return "\n".join(lines)


def plot(rows, path):
    labels = [f"{row['first']}-{row['last']}" for row in rows]
    x = range(len(rows))
    figure, (curves, difference) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    curves.plot(x, [row["memory"] for row in rows], marker="o", label="memory model")
    curves.plot(x, [row["sentence"] for row in rows], marker="s", label="sentence model")
    curves.set_ylabel("s-BLEU")
    curves.legend()
    difference.bar(x, [row["difference"] for row in rows], color="tab:green")
    difference.axhline(0, color="black", linewidth=0.8)
    difference.set_ylabel("s-BLEU difference\n(memory - sentence)")
    difference.set_xlabel("sentence position in the document")
    difference.set_xticks(list(x), labels, rotation=45)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def same_references(memory_path, sentence_path, count):
    """The T- lines of both outputs, which must be the same split's."""
    references = read_references(memory_path, count)
    others = read_references(sentence_path, count)
    for sentence, (ours, theirs) in enumerate(zip(references, others)):
        if ours != theirs:
            raise DocumentBleuError(
                f"the T- lines of {memory_path} and {sentence_path} differ at sentence id "
                f"{sentence}; pass outputs of the same split (or the raw reference with --reference)"
            )
    return references


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docids", required=True, help="document id of each sentence, one per line")
    parser.add_argument("--memory", required=True, help="fairseq-generate output of the memory model")
    parser.add_argument("--sentence", required=True,
                        help="fairseq-generate output of the sentence-level model")
    parser.add_argument("--bucket", type=int, default=10,
                        help="sentence positions per bucket (default: 10)")
    parser.add_argument("--plot", required=True, help="PNG file to write, in an existing folder")
    parser.add_argument("--hypothesis-lines", choices=["D", "H"], default="D",
                        help="D: detokenized hypotheses (default); H: the model's tokens")
    parser.add_argument("--reference", help="raw reference, one sentence per line, instead of the T- lines")
    args = parser.parse_args(argv)
    if args.bucket < 1:
        parser.error(f"--bucket {args.bucket}: give a positive number of positions")
    output = "a fairseq-generate output of the split"
    check_paths(parser, inputs=[
        ("--docids", args.docids, "file", "the docids file of the split"),
        ("--memory", args.memory, "file", output), ("--sentence", args.sentence, "file", output),
        ("--reference", args.reference, "file", "the raw reference of the split"),
    ], plots=[("--plot", args.plot)])
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        docids = read_docids(args.docids)
        count = len(docids)
        memory = read_hypotheses(args.memory, count, args.hypothesis_lines)
        sentence = read_hypotheses(args.sentence, count, args.hypothesis_lines)
        if args.reference:
            references = read_references(args.memory, count, args.reference)
        else:
            references = same_references(args.memory, args.sentence, count)
    except TextFileError as error:
        sys.exit(f"error: {error}")
    rows, signature = bleu_by_position(memory, sentence, references, docids, args.bucket)
    print(format_table(rows))
    print(f"signature: {signature}")
    plot(rows, args.plot)
    print(f"plot: {args.plot}")
    return rows


if __name__ == "__main__":
    main()
