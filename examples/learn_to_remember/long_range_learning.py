"""How fast the memory model learns long-range context, beside the systems it is compared with.

    python examples/learn_to_remember/long_range_learning.py [--workdir runs/long_range] [--variants drop:window,recompute:window,recompute:1]

Synthetic documents (``memory_nmt_tools/synthetic_documents.py``) of --min-sentences to
--max-sentences sentences, in which an ambiguous word's sense ("plant": pflanze or fabrik) is
fixed only by the document's first sentence and a pronoun's form by its noun 1 to
--max-pronoun-distance sentences back, train with fairseq-train once per variant:

- ``ACROSS:K``: ``transformer_recurrent_memory_small`` (the quickstart's model, or --model-args)
  with ``--gradient-across-windows ACROSS --gradient-reach K`` (``memory_nmt/pipeline/truncation.py``):
  ``drop:window`` the task's default (the earlier sentences of the window the states connect, one backward pass a
  window, nothing sent into the window before), ``recompute:window`` the same with the window
  before's last step recomputed, ``drop:1`` the exact reach of 1 with nothing sent into the window
  before (give it a window of more than one step), ``recompute:1`` the paper's contract across
  windows, ``recompute:2`` and ``recompute:4`` reach further; --memory-args adds options (a window,
  a batch size);
- ``ACROSS:K@N``: the same, finetuned from the ``sentence`` variant's checkpoint of epoch N for the
  --epochs − N epochs left (the paper's two stages at the same target tokens), at the paper's
  finetuning rates scaled to this script's peak (``two_rate_inverse_sqrt``: 0.6x for the memory,
  0.12x for the pretrained parameters, as its 3e-4 and 6e-5 are of its sentence model's 5e-4);
  the sentence variant is trained first where it is missing;
- ``sentence``: fairseq's ``transformer`` on the sentences alone (no context: chance);
- ``local_global``: ``transformer_local_global_small`` on chunks of 20 sentences (no context
  from beyond its chunk).

Every variant has the same size, starts from the same seed and sees every training sentence once
an epoch, so equal epochs are equal training target tokens; a checkpoint is kept every epoch.
--sense-rate, --sense-words and --adjectives make a cued word as rare as names and terms are in
real documents (the document generator's ``DocumentShape``).

Each checkpoint scores the held-out documents' context words contrastively (teacher forced on the
reference context, ``memory_nmt/evaluation/contrastive.py``: right when the correct word scores
above the others; chance is 1/3 for a pronoun, 50% for a sense), the sense words split by how far
back the first sentence is. Training target tokens are epochs times the training split's target
tokens (end of sentence included).

Printed: one row per variant and epoch, the seconds of training to the epoch's end (fairseq-train's
log, a finetuned variant's first stage included: run the variants alone on the machine for times
that compare), the accuracy on the pronouns and on the sense words whose cue is 1 sentence back,
2 to --long-range − 1 back, and --long-range or more back; the time to quality, the first epoch
with at least --quality of the sense words right at every distance, and its seconds; plotted
(--plot): the accuracy on the last of these against training target tokens, one line per
variant. Then how many training sense words an epoch send gradient into their cue, the first
sentence, at each exact reach K among the memory variants (those at most K sentences after it: the
first sentence's write is trained by no other loss). With --probe-epochs, each memory variant's
checkpoints of those epochs are probed (``memory_nmt/evaluation/cue_probe.py``): whether the
first sentence's cue is written into the memory, and whether the topic can still be told from
the memory that later sentences read. Results are kept in --workdir: a rerun trains and scores
only what is missing.
"""
import argparse
import json
import logging
import re
import shlex
import sys
from pathlib import Path

import matplotlib  # before fairseq, whose import leaves the root logger at DEBUG

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from memory_nmt.evaluation import contrastive, cue_probe  # noqa: E402
from memory_nmt_tools.synthetic_documents import (  # noqa: E402
    TOPIC_SENTENCES,
    TOPICS,
    add_shape_options,
    contrastive_items,
    generate_documents,
    shape_of,
    write_documents,
)
from memory_nmt.pipeline.task_config import DEFAULT_WINDOW  # noqa: E402
from memory_nmt.pipeline.truncation import GRADIENT_ACROSS_WINDOWS  # noqa: E402
from memory_nmt_tools.experiments import (  # noqa: E402
    MEMORY_SYSTEM,
    MODEL_ARGS,
    PEAK_LR,
    SENTENCE_SYSTEM,
    SPLIT_SEEDS,
    StepError,
    preprocess,
    train_from_scratch,
    training_seconds,
)
from memory_nmt_tools.paths import check_paths  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

FINETUNE_RATES = {"--lr": 0.12, "--context-lr": 0.6}  # the paper's 6e-5 and 3e-4 over its sentence model's 5e-4
MEMORY_VARIANT = re.compile(r"(?P<across>\w+):(?P<reach>\d+|window)(@(?P<after>\d+))?")
SYSTEMS = {  # the other variants -> their task, architecture and criterion
    "sentence": SENTENCE_SYSTEM,
    "local_global": ["--task", "document_translation", "--arch", "transformer_local_global_small",
                     "--criterion", "document_label_smoothed_cross_entropy"],
}

def parse_variants(text):
    """The variants' names: the memory model's ACROSS:K or ACROSS:K@N, or another system's name."""
    variants = []
    for part in text.split(","):
        memory = MEMORY_VARIANT.fullmatch(part)
        if part not in SYSTEMS and (memory is None or memory["across"] not in GRADIENT_ACROSS_WINDOWS):
            raise argparse.ArgumentTypeError(
                f"{part!r} is neither ACROSS:K nor ACROSS:K@N (ACROSS one of {', '.join(GRADIENT_ACROSS_WINDOWS)}, "
                f"K 0 or more or 'window', N the sentence variant's epoch to finetune from) nor one of "
                f"{', '.join(SYSTEMS)}"
            )
        variants.append(part)
    return variants


def after_sentence(variant: str) -> int:
    """The sentence variant's epoch that a memory variant ACROSS:K@N is finetuned from; 0 from scratch."""
    memory = MEMORY_VARIANT.fullmatch(variant)
    return int(memory["after"] or 0) if memory else 0


def directory_of(work: Path, variant: str) -> Path:
    return work / variant.replace(":", "-").replace("@", "-after-sentence")


def variant_options(args, variant: str):
    """The fairseq-train options that make ``variant``: its system's, and a memory model's
    gradient options, window, finetuning and --memory-args (last, so that they count)."""
    if variant in SYSTEMS:
        return SYSTEMS[variant], []
    memory = MEMORY_VARIANT.fullmatch(variant)
    finetuning = []
    if after_sentence(variant):
        sentence = checkpoint_of(directory_of(args.workdir, "sentence"), "sentence", after_sentence(variant))
        rates = [text for option, rate in FINETUNE_RATES.items() for text in (option, f"{rate * PEAK_LR:g}")]
        finetuning = ["--finetune-from-model", str(sentence), "--lr-scheduler", "two_rate_inverse_sqrt", *rates]
    return MEMORY_SYSTEM, ["--gradient-across-windows", memory["across"], "--gradient-reach", memory["reach"],
                    "--optimization-window", args.optimization_window, *finetuning, *shlex.split(args.memory_args)]


def prepare(args, work: Path):
    """The corpus, binarized as the quickstart binarizes its own (once); the test documents;
    and the training split's target tokens."""
    documents = {
        split: generate_documents(count, args.seed + SPLIT_SEEDS[split], args.min_sentences, args.max_sentences,
                                  args.shape)
        for split, count in (("train", args.documents), ("valid", 10), ("test", args.test_documents))
    }
    data = work / "data-bin"
    if not (data / "test.en-de.docids").exists():  # the quickstart's preprocess copies it last
        for split, docs in documents.items():
            write_documents(docs, str(work / "corpus" / split))
        preprocess(work)
    target_tokens = sum(len(sentence.split()) + 1 for doc in documents["train"] for sentence in doc.target)
    return data, documents, target_tokens


def context_items(documents, work: Path):
    """The contrastive items of the documents' context words, and each one's phenomenon."""
    path = work / "context_words.json"
    path.write_text(json.dumps(contrastive_items(documents)), encoding="utf-8")
    phenomena = [word.phenomenon for document in documents for word in document.context_words]
    return contrastive.read_voita_json(path), phenomena


def training_order(variants):
    """The variants in the order they train: the sentence variant first where another is finetuned from it."""
    if any(after_sentence(variant) for variant in variants):
        return ["sentence", *(variant for variant in variants if variant != "sentence")]
    return variants


def check_first_stage(args, directory: Path):
    """Refuse a sentence variant that lacks a checkpoint a finetuned variant starts from."""
    for variant in args.variants:
        if after_sentence(variant) and not checkpoint_of(directory, "sentence", after_sentence(variant)).exists():
            raise StepError(f"{variant}: {directory} has no checkpoint{after_sentence(variant)}.pt (it was trained "
                            f"for fewer epochs); remove {directory} to train it again for --epochs {args.epochs}")


def train(args, data: Path, directory: Path, variant: str):
    system, memory = variant_options(args, variant)
    train_from_scratch(f"training {variant}", data, directory, [*system, *memory], args,
                       args.epochs - after_sentence(variant))


def bucket(phenomenon: str, distance: int, long_range: int) -> str:
    if phenomenon == "pronoun":
        return "pronoun"
    if distance == 1:
        return "1 back"
    return f"2-{long_range - 1} back" if distance < long_range else f">={long_range} back"


def checkpoint_of(directory: Path, variant: str, epoch: int) -> Path:
    """The checkpoint of a variant after ``epoch`` epochs, those of its sentence model included."""
    return directory / "checkpoints" / f"checkpoint{epoch - after_sentence(variant)}.pt"


def score(args, data: Path, directory: Path, variant: str, items, phenomena):
    """{epoch: {bucket: (right, total)}} of every epoch checkpoint, kept in scores.json."""
    from memory_nmt_tools.contrastive_eval import load

    path = directory / "scores.json"
    scores = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for epoch in range(after_sentence(variant) + 1, args.epochs + 1):
        if str(epoch) in scores:
            continue
        model, task, _ = load(checkpoint_of(directory, variant, epoch), data, args.device == "cuda")
        counts = {}
        for item, phenomenon, item_scores in zip(items, phenomena, contrastive.score_items(model, task, items)):
            right_total = counts.setdefault(bucket(phenomenon, item.distance, args.long_range), [0, 0])
            right_total[0] += int(contrastive.is_right(item, item_scores))
            right_total[1] += 1
        scores[str(epoch)] = counts
        path.write_text(json.dumps(scores, indent=1), encoding="utf-8")
    return {int(epoch): counts for epoch, counts in scores.items()}


def cue_gradients(documents, variants) -> str:
    """How many training sense words an epoch send gradient into the first sentence, per reach."""
    reaches = sorted({int(MEMORY_VARIANT.fullmatch(variant)["reach"]) for variant in variants
                      if variant not in SYSTEMS and MEMORY_VARIANT.fullmatch(variant)["reach"].isdigit()})
    distances = [word.distance for document in documents for word in document.context_words
                 if word.phenomenon == "sense"]
    counts = ", ".join(f"reach {k}: {sum(d <= k for d in distances)}" for k in reaches)
    return (f"training sense words an epoch whose loss reaches their cue (the first sentence), of "
            f"{len(distances)}: {counts}") if reaches else ""


def topic_cues():
    """The first sentences' words that only one topic's first sentences hold, by side."""
    cues = {}
    for side, index in (("encoder", 0), ("decoder", 1)):
        words = {topic: {w for pair in TOPIC_SENTENCES[topic] for w in pair[index].split()} for topic in TOPICS}
        cues[side] = set.symmetric_difference(*words.values())
    return cues


def probe(args, data: Path, directory: Path, variant: str, epoch: int, documents) -> dict:
    """``cue_probe.probe`` of the checkpoint of ``epoch``, kept in probe{epoch}.json."""
    path = directory / f"probe{epoch}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    from memory_nmt.evaluation.memory_attention import load_model

    model, task = load_model(checkpoint_of(directory, variant, epoch), data)
    task.load_dataset("test")
    dictionaries = {"encoder": task.source_dictionary, "decoder": task.target_dictionary}
    cue_ids = {side: {dictionaries[side].index(word) for word in words} for side, words in topic_cues().items()}
    topic_of = {source: TOPICS.index(topic) for topic, pairs in TOPIC_SENTENCES.items() for source, _ in pairs}
    topics = [topic_of[document.source[0]] for document in documents]
    result = cue_probe.probe(model, task.dataset("test"), topics, cue_ids,
                             lambda distance: bucket("sense", distance, args.long_range))
    path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def format_probes(probes, long_range) -> str:
    buckets = sense_buckets(long_range)
    width = variant_width(variant for variant, _ in probes)
    lines = ["probe: Update Attention on the first sentence's cue words (x their share of its tokens), and the "
             "topic told from the memory read d sentences later (nearest centroid, chance 50%)",
             f"  {'variant':<{width}}{'epoch':>6}  {'layer':<12}{'cue weight':>12}" + "".join(f"{b:>16}" for b in buckets)]
    for (variant, epoch), layers in probes.items():
        for layer, found in layers.items():
            weight = f"{found['written']:.2f}" if found["written"] is not None else "-"
            cells = [f"{100 * found['kept'][b][0] / found['kept'][b][1]:.1f}%" if b in found["kept"] else "-"
                     for b in buckets]
            lines.append(f"  {variant:<{width}}{epoch:>6}  {layer:<12}{weight:>12}" + "".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)


def variant_seconds(work: Path, variant: str) -> dict:
    """{epoch: training seconds} of a variant, its sentence model's first stage included."""
    own = training_seconds(directory_of(work, variant) / "train.log")
    first = after_sentence(variant)
    before = training_seconds(directory_of(work, "sentence") / "train.log").get(first, 0) if first else 0
    return {epoch + first: seconds + before for epoch, seconds in own.items()}


def variant_width(variants) -> int:
    """The width of a table's variant column: its longest name and two spaces, 14 at least."""
    return max([14, *(len(variant) + 2 for variant in variants)])


def sense_buckets(long_range: int):
    return ["1 back", f"2-{long_range - 1} back", f">={long_range} back"]


def accuracy(counts, name) -> float:
    right, total = counts.get(name, (0, 0))
    return right / total if total else 0.0


def format_table(results, target_tokens, long_range, seconds):
    buckets = ["pronoun", *sense_buckets(long_range)]
    width = variant_width(results)
    lines = [f"contrastive accuracy on the pronouns (chance 1/3) and on the sense words (chance 50%) by how far "
             f"back the first sentence is; {target_tokens} training target tokens an epoch; train s: seconds of "
             f"training to the epoch's end",
             f"  {'variant':<{width}}{'epoch':>6}{'tgt tokens':>12}{'train s':>9}" + "".join(f"{b:>16}" for b in buckets)]
    for variant, by_epoch in results.items():
        for epoch, counts in sorted(by_epoch.items()):
            cells = []
            for name in buckets:
                right, total = counts.get(name, (0, 0))
                cells.append(f"{100 * right / total:.1f}% of {total}" if total else "-")
            wall = seconds[variant].get(epoch)
            lines.append(f"  {variant:<{width}}{epoch:>6}{epoch * target_tokens:>12}{wall if wall is not None else '-':>9}"
                         + "".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)


def format_time_to_quality(results, target_tokens, long_range, seconds, quality) -> str:
    """Per variant, the first epoch at whose end the sense words are right at least ``quality`` of the
    time at every distance: its training target tokens and seconds."""
    lines = [f"time to quality: the first epoch with >= {quality:.0%} of the sense words right at every distance"]
    width = variant_width(results)
    for variant, by_epoch in results.items():
        reached = [epoch for epoch, counts in sorted(by_epoch.items())
                   if all(accuracy(counts, name) >= quality for name in sense_buckets(long_range))]
        if not reached:
            lines.append(f"  {variant:<{width}}not within {max(by_epoch, default=0)} epochs")
            continue
        epoch = reached[0]
        wall = seconds[variant].get(epoch)
        lines.append(f"  {variant:<{width}}epoch {epoch}, {epoch * target_tokens} target tokens, "
                     + (f"{wall} s of training" if wall is not None else "its training time not logged"))
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
    parser.add_argument("--variants", type=parse_variants, default="drop:window,recompute:window,recompute:1",
                        help="comma-separated: the memory model's ACROSS:K (--gradient-across-windows ACROSS "
                        "--gradient-reach K), ACROSS:K@N (the same finetuned from the sentence variant's epoch N), "
                        "'sentence' (the transformer), 'local_global'")
    parser.add_argument("--memory-args", default="", help="more fairseq-train options of the memory model's "
                        "variants (e.g. '--max-tokens 1024', the last of an option counting)")
    parser.add_argument("--documents", type=int, default=500, help="training documents")
    parser.add_argument("--test-documents", type=int, default=200)
    parser.add_argument("--min-sentences", type=int, default=8)
    parser.add_argument("--max-sentences", type=int, default=12)
    add_shape_options(parser)
    parser.add_argument("--long-range", type=int, default=4, help="sentences back from which a cue is long-range")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--model-args", default=shlex.join(MODEL_ARGS),
                        help="the model's size and dropout as fairseq-train options (default: the quickstart's)")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--optimization-window", default=DEFAULT_WINDOW, help="the memory variants' sentence "
                        "steps per update (default: %(default)s, the task's; the paper's is full)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quality", type=float, default=0.9, help="the share of the sense words right at every "
                        "distance whose first epoch the time to quality is reported for (default: %(default)s)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--probe-epochs", default=[], type=lambda text: [int(e) for e in text.split(",") if e],
                        help="comma-separated epochs whose checkpoints of each memory variant to probe: is the "
                        "first sentence's cue written into the memory, and is it kept")
    parser.add_argument("--plot", type=Path, help="where to save the plot, in an existing folder "
                        "(default WORKDIR/long_range.png)")
    args = parser.parse_args(argv)
    if args.long_range < 2:
        parser.error("--long-range must be 2 or more (1 back is its own column)")
    for variant in args.variants:
        if not after_sentence(variant) < args.epochs:
            parser.error(f"--variants {variant}: finetuned after {after_sentence(variant)} epochs of the sentence "
                         f"variant, which leaves none of --epochs {args.epochs}")
    if not all(1 <= epoch <= args.epochs for epoch in args.probe_epochs):
        parser.error(f"--probe-epochs {','.join(map(str, args.probe_epochs))}: "
                     f"give epochs from 1 to --epochs {args.epochs}")
    args.plot = args.plot or args.workdir / "long_range.png"
    args.shape = shape_of(parser, args)
    check_paths(parser, plots=[("--plot", args.plot)], workdirs=[("--workdir", args.workdir)])
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # fairseq's INFO lines would bury the table
    work = args.workdir
    data, documents, target_tokens = prepare(args, work)
    items, phenomena = context_items(documents["test"], work)
    results = {}
    for variant in training_order(args.variants):
        directory = directory_of(work, variant)
        print(f"{variant}:", flush=True)
        train(args, data, directory, variant)
        if variant == "sentence":
            check_first_stage(args, directory)
        if variant in args.variants:
            results[variant] = score(args, data, directory, variant, items, phenomena)
    results = {variant: results[variant] for variant in args.variants}
    seconds = {variant: variant_seconds(work, variant) for variant in args.variants}
    table = "\n".join(filter(None, [format_table(results, target_tokens, args.long_range, seconds),
                                     format_time_to_quality(results, target_tokens, args.long_range, seconds,
                                                            args.quality),
                                     cue_gradients(documents["train"], args.variants)]))
    probes = {(variant, epoch): probe(args, data, directory_of(work, variant), variant, epoch, documents["test"])
              for variant in args.variants if variant not in SYSTEMS for epoch in args.probe_epochs
              if epoch > after_sentence(variant)}
    if probes:
        table += "\n" + format_probes(probes, args.long_range)
    print(table)
    (work / "long_range.txt").write_text(table + "\n", encoding="utf-8")
    plot(results, target_tokens, args.long_range, args.plot)
    return results


if __name__ == "__main__":
    try:
        main()
    except StepError as error:
        sys.exit(f"long_range_learning.py: {error}")
