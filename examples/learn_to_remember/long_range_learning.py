"""How fast the memory model learns long-range context, by how far its training gradient reaches.

    python examples/learn_to_remember/long_range_learning.py [--workdir runs/long_range] [--variants drop:1,recompute:1,recompute:2,recompute:4]

Synthetic documents (``memory_nmt/evaluation/synthetic.py``) of --min-sentences to
--max-sentences sentences, in which an ambiguous word's sense ("plant": pflanze or fabrik) is
fixed only by the document's first sentence, train ``transformer_recurrent_memory_small`` (the
quickstart's model, or --model-args) with fairseq-train once per variant ACROSS:K, that is
``--gradient-across-windows ACROSS --gradient-reach K`` (``memory_nmt/pipeline/truncation.py``):
``drop:1`` is the behaviour before the option existed (a window's first sentence sends nothing
into the window before), ``recompute:1`` the paper's contract across windows, ``recompute:2`` and
``recompute:4`` reach further. Every variant starts from the same seed and sees the same
batches; a checkpoint is kept every epoch.

Each checkpoint scores the held-out documents' sense words contrastively (teacher forced on the
reference context, ``memory_nmt/evaluation/contrastive.py``: right when the correct sense scores
above the other; chance is 50%), split by how far back the first sentence is. Training target
tokens are epochs times the training split's target tokens (end of sentence included): every
sentence is trained on exactly once per epoch.

Printed: one row per variant and epoch, the accuracy on the sense words whose cue is 1 sentence
back, 2 to --long-range − 1 back, and --long-range or more back; plotted (--plot): the accuracy
on the last of these against training target tokens, one line per variant. Results are kept in
--workdir: a rerun trains and scores only what is missing.
"""
import argparse
import json
import logging
import shlex
import sys
from pathlib import Path

import matplotlib  # before fairseq, whose import leaves the root logger at DEBUG

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from memory_nmt.evaluation import contrastive  # noqa: E402
from memory_nmt.evaluation.synthetic import contrastive_items, generate_documents, write_documents  # noqa: E402
from memory_nmt.pipeline.truncation import GRADIENT_ACROSS_WINDOWS  # noqa: E402
from memory_nmt_tools.experiments import MODEL_ARGS, StepError, preprocess, run_saving_stdout  # noqa: E402
from memory_nmt_tools.paths import check_paths  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "memory_nmt"

SPLIT_SEEDS = {"train": 0, "valid": 1000, "test": 2000}  # added to --seed
TRAINING_ARGS = [
    "--arch", "transformer_recurrent_memory_small",
    "--task", "document_translation", "--criterion", "document_label_smoothed_cross_entropy",
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "1.0",
    "--lr", "2e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100",
    "--warmup-init-lr", "1e-7", "--label-smoothing", "0.1", "--disable-validation",
    "--log-format", "simple", "--log-interval", "50",
]


def parse_variants(text):
    variants = []
    for part in text.split(","):
        across, _, reach = part.partition(":")
        if across not in GRADIENT_ACROSS_WINDOWS or not reach.isdigit():
            raise argparse.ArgumentTypeError(
                f"{part!r} is not ACROSS:K (ACROSS one of {', '.join(GRADIENT_ACROSS_WINDOWS)}, K 0 or more)"
            )
        variants.append((across, int(reach)))
    return variants


def prepare(args, work: Path):
    """The corpus, binarized as the quickstart binarizes its own (once); the test documents;
    and the training split's target tokens."""
    documents = {
        split: generate_documents(count, args.seed + SPLIT_SEEDS[split], args.min_sentences, args.max_sentences)
        for split, count in (("train", args.documents), ("valid", 10), ("test", args.test_documents))
    }
    data = work / "data-bin"
    if not (data / "test.en-de.docids").exists():  # the quickstart's preprocess copies it last
        for split, docs in documents.items():
            write_documents(docs, str(work / "corpus" / split))
        preprocess(work)
    target_tokens = sum(len(sentence.split()) + 1 for doc in documents["train"] for sentence in doc.target)
    return data, documents["test"], target_tokens


def sense_items(documents, work: Path):
    """The contrastive items of the documents' sense words (the pronouns are left out)."""
    entries = [
        entry for entry, word in zip(contrastive_items(documents), (w for d in documents for w in d.context_words))
        if word.phenomenon == "sense"
    ]
    path = work / "sense_words.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    return contrastive.read_voita_json(path)


def train(args, data: Path, directory: Path, across: str, reach: int):
    log = directory / "train.log"
    if log.exists():
        print(f"  training: {log} exists, skipped")
        return
    directory.mkdir(parents=True, exist_ok=True)
    run_saving_stdout(f"training {across}:{reach}", [
        sys.executable, "-m", "fairseq_cli.train", str(data), "--user-dir", str(PLUGIN), *TRAINING_ARGS,
        *shlex.split(args.model_args),
        "--max-tokens", str(args.max_tokens), "--optimization-window", args.optimization_window,
        "--max-epoch", str(args.epochs), "--seed", str(args.seed),
        "--gradient-across-windows", across, "--gradient-reach", str(reach),
        "--save-dir", str(directory / "checkpoints"), *(["--cpu"] if args.device == "cpu" else []),
    ], log)


def bucket(distance: int, long_range: int) -> str:
    if distance == 1:
        return "1 back"
    return f"2-{long_range - 1} back" if distance < long_range else f">={long_range} back"


def score(args, data: Path, directory: Path, items):
    """{epoch: {bucket: (right, total)}} of every epoch checkpoint, kept in scores.json."""
    from memory_nmt_tools.contrastive_eval import load

    path = directory / "scores.json"
    scores = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for epoch in range(1, args.epochs + 1):
        if str(epoch) in scores:
            continue
        model, task, _ = load(directory / "checkpoints" / f"checkpoint{epoch}.pt", data, args.device == "cuda")
        counts = {}
        for item, item_scores in zip(items, contrastive.score_items(model, task, items)):
            right_total = counts.setdefault(bucket(item.distance, args.long_range), [0, 0])
            right_total[0] += int(contrastive.is_right(item, item_scores))
            right_total[1] += 1
        scores[str(epoch)] = counts
        path.write_text(json.dumps(scores, indent=1), encoding="utf-8")
    return {int(epoch): counts for epoch, counts in scores.items()}


def format_table(results, target_tokens, long_range):
    buckets = ["1 back", f"2-{long_range - 1} back", f">={long_range} back"]
    lines = [f"sense-word accuracy (contrastive, chance 50%) by how far back the first sentence is; "
             f"{target_tokens} training target tokens an epoch",
             f"  {'variant':<14}{'epoch':>6}{'tgt tokens':>12}" + "".join(f"{b:>16}" for b in buckets)]
    for variant, by_epoch in results.items():
        for epoch, counts in sorted(by_epoch.items()):
            cells = []
            for name in buckets:
                right, total = counts.get(name, (0, 0))
                cells.append(f"{100 * right / total:.1f}% of {total}" if total else "-")
            lines.append(f"  {variant:<14}{epoch:>6}{epoch * target_tokens:>12}" + "".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)


def plot(results, target_tokens, long_range, path):
    name = f">={long_range} back"
    figure, axes = plt.subplots(figsize=(6, 4))
    for variant, by_epoch in results.items():
        epochs = sorted(by_epoch)
        accuracy = [100 * by_epoch[e][name][0] / by_epoch[e][name][1] for e in epochs]
        axes.plot([e * target_tokens for e in epochs], accuracy, marker="o", label=variant)
    axes.axhline(50, color="grey", linestyle=":", label="chance")
    axes.set_xlabel("training target tokens")
    axes.set_ylabel(f"sense words, cue {long_range}+ sentences back (%)")
    axes.set_ylim(0, 102)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    print(f"plot: {path}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT / "runs" / "long_range",
                        help="where the corpus, checkpoints and scores go, created if missing (default: %(default)s)")
    parser.add_argument("--variants", type=parse_variants, default="drop:1,recompute:1,recompute:2,recompute:4",
                        help="comma-separated ACROSS:K, --gradient-across-windows ACROSS --gradient-reach K")
    parser.add_argument("--documents", type=int, default=500, help="training documents")
    parser.add_argument("--test-documents", type=int, default=200)
    parser.add_argument("--min-sentences", type=int, default=8)
    parser.add_argument("--max-sentences", type=int, default=12)
    parser.add_argument("--long-range", type=int, default=4, help="sentences back from which a cue is long-range")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--model-args", default=shlex.join(MODEL_ARGS),
                        help="the model's size and dropout as fairseq-train options (default: the quickstart's)")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--optimization-window", default="1-8")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--plot", type=Path, help="where to save the plot, in an existing folder "
                        "(default WORKDIR/long_range.png)")
    args = parser.parse_args(argv)
    if args.long_range < 2:
        parser.error("--long-range must be 2 or more (1 back is its own column)")
    args.plot = args.plot or args.workdir / "long_range.png"
    check_paths(parser, plots=[("--plot", args.plot)], workdirs=[("--workdir", args.workdir)])
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # fairseq's INFO lines would bury the table
    work = args.workdir
    data, test_documents, target_tokens = prepare(args, work)
    items = sense_items(test_documents, work)
    results = {}
    for across, reach in args.variants:
        variant = f"{across}:{reach}"
        directory = work / variant.replace(":", "-")
        print(f"{variant}:", flush=True)
        train(args, data, directory, across, reach)
        results[variant] = score(args, data, directory, items)
    table = format_table(results, target_tokens, args.long_range)
    print(table)
    (work / "long_range.txt").write_text(table + "\n", encoding="utf-8")
    plot(results, target_tokens, args.long_range, args.plot)
    return results


if __name__ == "__main__":
    try:
        main()
    except StepError as error:
        sys.exit(f"long_range_learning.py: {error}")
