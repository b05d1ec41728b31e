"""What a document-level model keeps of a long document: several bindings, the current topic, its own word choices.

    python examples/learn_to_remember/document_phenomena.py [--workdir runs/phenomena] \
        [--variants sentence,concat,memory] [--variant NAME=OPTIONS ...] [--epochs 12]

Synthetic documents of --min-sentences to --max-sentences sentences
(``memory_nmt_tools/long_documents.py``) in which a pronoun's form, an ambiguous word's sense (the
current topic, which a later topic sentence may switch), a person's title (Herr or Frau: several
people introduced early) and a word of two valid translations (the document's first choice kept)
each depend on an earlier sentence. With --short-documents, that many more training documents
of --min-sentences to --short-max-sentences sentences are shuffled among the long ones (the test
documents stay long), so that more of the training cues lie within a window of their use. Each
variant trains with fairseq-train from scratch, at one size, seed and number of epochs, so on the
same training target tokens:

- ``sentence``: fairseq's ``transformer`` (no context: chance on every phenomenon);
- ``concat``: ``transformer_context_concat_small`` (the previous source sentence);
- ``concat_target``: the same with the previous target sentence too (2-to-2: in translation the
  model's own), the control for a word whose cue is on the target side only (a word choice);
- ``memory``: ``transformer_recurrent_memory_small`` with the task's training defaults;
- ``--variant NAME=OPTIONS``: the memory model with more fairseq-train options (a memory size,
  the layers that carry it, a window, an update rule), given in quotes.

The checkpoints of --score-epochs are scored on the held-out documents:

- contrastively, teacher forced on the reference (``memory_nmt/evaluation/contrastive.py``: right
  when the correct word scores above the others), by phenomenon and by how far back the document
  established what the word needs (``distance``: the topic sentence in force, the person's
  introduction, the word's first use, the pronoun's noun); by ``gap``, how far back the
  nearest sentence whose reference shows it is; and a title the document names for the first time
  since the introductions, by the person's place among them, and for the later persons by whether
  their title is the first person's (a memory that keeps one title for the whole document gets
  those right and the others wrong);
- by translating them (fairseq-generate, the model reading its own translations as context):
  ``own choice``, the later uses of a word of two translations that keep the translation the
  model wrote at its first use, counted only for the words whose first translation varies across
  documents (the less frequent one first in at least --varied of the documents that use the
  word): a model that always writes one translation is not counted as consistent.

With --probe, each memory variant's last checkpoint is walked over the held-out documents
(``memory_nmt/evaluation/phenomenon_probe.py``): how well each context word's answer can be told
from what the memory gives the word (its Output Attention's read there), by layer, phenomenon and
distance, which says whether the memory does not hold it or holds it unused; and where the memory
is a queue (``--memory-update queue``), the mean share of the memory each sentence pushed, by what
a later sentence needs from it (``memory_nmt/evaluation/queue_pushes.py``), which says what the
queue keeps a slot for, and the mean share of a context word's read that falls on the slot holding
what its cue sentence pushed, which says whether the read finds it there.

Printed and kept in WORKDIR/phenomena.txt: what the training documents offer a gradient that
reaches 1, 3 or 15 sentences back (the share of context words whose need was established, or last
shown, that near) and what following each name's most frequent title in training would score;
per variant and scored epoch, the accuracy (%) by phenomenon and distance bucket, then by gap
bucket, the titles first named by person, and the own-choice consistency; the seconds of training
to that epoch (fairseq-train's log: run the variants alone for times that compare). A rerun
trains and scores only what is missing.
"""
import argparse
import json
import logging
import random
import shlex
import sys
from collections import Counter
from pathlib import Path

from memory_nmt.evaluation import contrastive
from memory_nmt_tools.experiments import (
    MEMORY_SYSTEM,
    SENTENCE_SYSTEM,
    SPLIT_SEEDS,
    StepError,
    fairseq_command,
    named_options,
    preprocess,
    run_saving_stdout,
    train_from_scratch,
    training_seconds,
)
from memory_nmt_tools.generate_texts import read_hypotheses
from memory_nmt_tools.long_documents import (
    CHANCE,
    PHENOMENA,
    TITLES,
    LongDocumentShape,
    check_lengths,
    first_choices,
    generate_long_documents,
    translation_pair,
)
from memory_nmt_tools.paths import check_paths
from memory_nmt_tools.synthetic_documents import contrastive_items, write_documents

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "memory_nmt"

CONCAT_SYSTEM = ["--task", "document_translation", "--arch", "transformer_context_concat_small",
                 "--criterion", "document_label_smoothed_cross_entropy"]
SYSTEMS = {
    "sentence": SENTENCE_SYSTEM,
    "concat": CONCAT_SYSTEM,
    "concat_target": [*CONCAT_SYSTEM, "--target-context", "1"],
    "memory": MEMORY_SYSTEM,
}
LONG_RANGE_MODEL = [  # docs/analyses.md's long-range runs: 3+3 layers of 128/256, 4 heads
    "--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "128", "--decoder-embed-dim", "128",
    "--encoder-ffn-embed-dim", "256", "--decoder-ffn-embed-dim", "256", "--encoder-attention-heads", "4",
    "--decoder-attention-heads", "4", "--share-all-embeddings", "--dropout", "0.1",
]
SHAPE_OPTIONS = ("max_people", "max_pronoun_distance", "choice_words", "switch_rate", "mention_rate", "sense_rate",
                 "choice_rate", "pronoun_rate")  # LongDocumentShape's fields given on the command line
SHORT_SEED = 3000  # added to --seed for the short training documents, as SPLIT_SEEDS for a split
REACHES = (1, 3, 15)  # sentences back: the paper's gradient, a window of 4's longest, a window of 16's
BUCKETS = ((1, 1, "1"), (2, 9, "2-9"), (10, 29, "10-29"), (30, 99, "30-99"), (100, None, "100+"))
NOTHING_NEEDED = "nothing"  # a sentence no later context word needs, among those the pushes are counted by


def bucket(distance: int) -> str:
    return next(name for low, high, name in BUCKETS if distance >= low and (high is None or distance <= high))


def parse_systems(text):
    names = [name for name in text.split(",") if name]
    unknown = [name for name in names if name not in SYSTEMS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown)}: give some of {', '.join(SYSTEMS)}")
    return names


def training_documents(args):
    """--documents of --min-sentences to --max-sentences sentences, and --short-documents of
    --min-sentences to --short-max-sentences shuffled among them."""
    documents = generate_long_documents(args.documents, args.seed + SPLIT_SEEDS["train"], args.min_sentences,
                                        args.max_sentences, args.shape)
    if args.short_documents:
        documents += generate_long_documents(args.short_documents, args.seed + SHORT_SEED, args.min_sentences,
                                             args.short_max_sentences, args.shape)
        random.Random(args.seed).shuffle(documents)
    return documents


def prepare(args, work: Path):
    """The documents of each split, written and binarized once."""
    documents = {
        split: generate_long_documents(count, args.seed + SPLIT_SEEDS[split], args.min_sentences,
                                       args.max_sentences, args.shape)
        for split, count in (("valid", 4), ("test", args.test_documents))
    }
    documents["train"] = training_documents(args)
    data = work / "data-bin"
    if not (data / "test.en-de.docids").exists():  # preprocess copies it last
        for split, docs in documents.items():
            write_documents(docs, str(work / "corpus" / split))
        preprocess(work)
    target_tokens = sum(len(sentence.split()) + 1 for doc in documents["train"] for sentence in doc.target)
    return data, documents, target_tokens


def within_reach(documents) -> dict:
    """{"distance" | "gap": {phenomenon: [words, words within each of REACHES]}}: how many of the
    documents' context words have what they need established (shown) at most that many sentences
    back, which a gradient reaching that far back through the memory can train."""
    counts = {"distance": {}, "gap": {}}
    for word in (word for document in documents for word in document.context_words):
        for kind, back in (("distance", word.distance), ("gap", word.gap)):
            found = counts[kind].setdefault(word.phenomenon, [0] * (1 + len(REACHES)))
            found[0] += 1
            for position, reach in enumerate(REACHES, 1):
                found[position] += int(back <= reach)
    return counts


def asking_token(document, word, asking) -> str:
    """The source token of ``word``'s sentence that asks for it: the first of the set ``asking``."""
    return next(token for token in document.source[word.sentence].split() if token in asking)


def title_of(word) -> str:
    """"mr" or "mrs": the English title a ``title`` word's German one translates."""
    return "mr" if word.correct in TITLES["mr"].values() else "mrs"


def name_prior(train, test, names) -> list:
    """[right, total]: the held-out title words that the title most often given to the same name
    in the training documents would get right (a model following its training, not the document)."""

    def titled(documents):
        for document in documents:
            for word in document.context_words:
                if word.phenomenon == "title":
                    yield asking_token(document, word, names), title_of(word)

    given = {}
    for name, title in titled(train):
        given.setdefault(name, Counter())[title] += 1
    right_total = [0, 0]
    for name, title in titled(test):
        right_total[0] += int(name in given and given[name].most_common(1)[0][0] == title)
        right_total[1] += 1
    return right_total


def format_corpus(documents, shape: LongDocumentShape) -> str:
    """What the training documents offer a gradient of each reach, and what the names' prior scores."""
    reach = within_reach(documents["train"])
    within = "/".join(map(str, REACHES))
    lines = ["training documents' context words (%) whose need lies at most REACH sentences back",
             f"  {'':<10}{'established, ' + within:>26}{'last shown, ' + within:>26}{'words':>8}"]
    for phenomenon in PHENOMENA:
        words = reach["distance"].get(phenomenon, [0])[0]
        cells = [" / ".join(f"{100 * count / words:.1f}" for count in reach[kind][phenomenon][1:]) if words else "-"
                 for kind in ("distance", "gap")]
        lines.append(f"  {phenomenon:<10}{cells[0]:>26}{cells[1]:>26}{words:>8}")
    prior = name_prior(documents["train"], documents["test"], set(shape.lexicon().names))
    if prior[1]:
        lines.append(f"title: the title a name has most often in the training documents is right for {cell(prior)} "
                     "held-out titles")
    return "\n".join(lines)


def groups(document, word) -> dict:
    """{kind: bucket} a context word of ``document`` is counted in: ``distance`` and ``gap``
    (``bucket``) and, for a title the document names for the first time since the introductions
    (its gap is its distance), ``introduced``: the person's place among them (1 for the first; they
    follow the first sentence), and for a later person ``first's title``: whether the first person
    has the same title ("same") or the other ("other"). A memory that keeps one title for the whole
    document gets "same" right and "other" wrong; one that keeps a title a person gets both."""
    found = {"distance": bucket(word.distance), "gap": bucket(word.gap)}
    if word.phenomenon == "title" and word.gap == word.distance:
        place = word.cue_sentence
        found["introduced"] = str(place)
        if place > 1:
            first = next(token for token in document.source[1].split() if token in TITLES)
            found["first's title"] = "same" if first == title_of(word) else "other"
    return found


def contrastive_scores(args, data: Path, checkpoint: Path, documents) -> dict:
    """{"distance" | "gap" | "introduced" | "first's title": {phenomenon: {bucket: [right, total]}}} of
    the documents' context words (``groups``), kept beside the checkpoint."""
    from memory_nmt_tools.contrastive_eval import load

    path = checkpoint.with_suffix(".contrastive.json")
    if path.exists():
        kept = json.loads(path.read_text(encoding="utf-8"))
        if "first's title" in kept:  # else scored before the grouping by person existed: scored again
            return kept
    items_path = checkpoint.parent / "context_words.json"
    items_path.write_text(json.dumps(contrastive_items(documents)), encoding="utf-8")
    items = contrastive.read_voita_json(items_path)
    words = [(document, word) for document in documents for word in document.context_words]
    model, task, _ = load(checkpoint, data, args.device == "cuda")
    counts = {"distance": {}, "gap": {}, "introduced": {}, "first's title": {}}
    for item, (document, word), scores in zip(items, words, contrastive.score_items(model, task, items)):
        for kind, name in groups(document, word).items():
            right_total = counts[kind].setdefault(word.phenomenon, {}).setdefault(name, [0, 0])
            right_total[0] += int(contrastive.is_right(item, scores))
            right_total[1] += 1
    path.write_text(json.dumps(counts, indent=1), encoding="utf-8")
    return counts


def translate(args, data: Path, checkpoint: Path, system, documents):
    """The held-out documents as the checkpoint translates them (fairseq-generate), by document."""
    output = checkpoint.with_suffix(".generate.txt")
    if not output.exists():
        run_saving_stdout("translating", [
            *fairseq_command("generate"), str(data), "--user-dir", str(PLUGIN), "--path", str(checkpoint),
            "--task", system[system.index("--task") + 1], "--gen-subset", "test", "--beam", str(args.beam),
            "--max-tokens", "4096", "--required-batch-size-multiple", "1",
            *(["--cpu"] if args.device == "cpu" else []), *shlex.split(args.generate_args),
        ], output)
    sentences = read_hypotheses(output, sum(len(document.target) for document in documents))
    by_document, start = [], 0
    for document in documents:
        by_document.append(sentences[start:start + len(document.target)])
        start += len(document.target)
    return by_document


def own_choice(args, documents, hypotheses) -> dict:
    """{"kept": {bucket: [kept, total]}, "words": (counted, used)}: the later uses of a word of two
    translations that keep the model's first translation, for the words whose first translation
    varies across documents."""
    firsts = first_choices(documents, hypotheses)
    chosen = {}
    for document_firsts in firsts:
        for pair, first in document_firsts.items():
            if first is not None:
                chosen.setdefault(pair, []).append(first)
    varied = {pair for pair, seen in chosen.items()
              if min(seen.count(translation) for translation in pair) >= args.varied * len(seen)}
    kept = {}
    for document, hypothesis, document_firsts in zip(documents, hypotheses, firsts):
        for word in document.context_words:
            pair = translation_pair(word) if word.phenomenon == "choice" else None
            if pair not in varied or document_firsts[pair] is None:
                continue
            tokens = set(hypothesis[word.sentence].split())
            other = next(translation for translation in pair if translation != document_firsts[pair])
            right_total = kept.setdefault(bucket(word.gap), [0, 0])
            right_total[0] += int(document_firsts[pair] in tokens and other not in tokens)
            right_total[1] += 1
    return {"kept": kept, "words": (len(varied), len(chosen))}


def score(args, data: Path, directory: Path, system, epoch: int, documents) -> dict:
    checkpoint = directory / "checkpoints" / f"checkpoint{epoch}.pt"
    scores = contrastive_scores(args, data, checkpoint, documents)
    scores["own choice"] = own_choice(args, documents, translate(args, data, checkpoint, system, documents))
    return scores


def probe_points(documents, shape: LongDocumentShape):
    """A ``ProbePoint`` per context word: the source token that asks for it and its answer."""
    from memory_nmt.evaluation.phenomenon_probe import ProbePoint

    lexicon = shape.lexicon()
    senses = {english: {german: topic for topic, german in by_topic.items()}
              for english, (_, by_topic) in shape.words().sense_words}
    choices = {english: translations for english, (_, translations) in lexicon.choices}
    asking = {"title": set(lexicon.names), "topic": set(senses), "choice": set(choices), "pronoun": {"it"}}
    points = []
    for number, document in enumerate(documents):
        for word in document.context_words:
            token = asking_token(document, word, asking[word.phenomenon])
            if word.phenomenon == "title":
                answer = title_of(word)
            elif word.phenomenon == "topic":
                answer = senses[token][word.correct]
            elif word.phenomenon == "choice":
                answer = str(choices[token].index(word.correct))
            else:
                answer = word.correct
            points.append(ProbePoint(number, word.sentence, token, word.correct, answer,
                                     (word.phenomenon, bucket(word.distance)), word.cue_sentence))
    return points


def probed(args, data: Path, checkpoint: Path, documents) -> dict:
    """``phenomenon_probe.probe`` of a checkpoint ("reads") and, where its memory is a queue, the
    shares its sentences pushed ("pushes", ``needs_pushed``) and the share of a context word's read
    on its cue sentence's slot ("found", ``queue_pushes.cue_slot_reads``), kept beside it."""
    path = checkpoint.with_suffix(".probe.json")
    if path.exists():
        kept = json.loads(path.read_text(encoding="utf-8"))
        if "reads" in kept and "queue" in kept and (not kept["queue"] or "found" in kept):
            return kept  # one kept before a queue's pushes and found shares were counted is probed again
    from memory_nmt.evaluation.memory_attention import load_model
    from memory_nmt.evaluation.phenomenon_probe import probe
    from memory_nmt.evaluation.queue_pushes import cue_slot_reads, is_queue

    model, task = load_model(checkpoint, data)
    task.load_dataset("test")
    dataset = task.dataset("test")
    points = probe_points(documents, args.shape)
    result = {"reads": by_group_name(probe(model, dataset, points)), "queue": is_queue(model)}
    if result["queue"]:
        result["pushes"] = needs_pushed(model, dataset, documents)
        result["found"] = by_group_name(cue_slot_reads(model, dataset, points))
    path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def by_group_name(layers) -> dict:
    """{layer: {(phenomenon, distance bucket): figures}} keyed "phenomenon bucket", as JSON keeps it."""
    return {layer: {f"{phenomenon} {distance}": figures for (phenomenon, distance), figures in groups.items()}
            for layer, groups in layers.items()}


def needs_pushed(model, dataset, documents) -> dict:
    """{memory layer: {what a later sentence needs from a sentence (a phenomenon, or NOTHING_NEEDED): [the
    shares it pushed, summed, and the sentences]}} over the held-out documents (``queue_pushes.pushed_shares``)."""
    from memory_nmt.evaluation.queue_pushes import pushed_shares

    found = {}
    for number, document in enumerate(documents):
        needed = {word.cue_sentence: word.phenomenon for word in document.context_words}
        for layer, shares in pushed_shares(model, dataset, number).items():
            for sentence, share in enumerate(shares):
                group = found.setdefault(layer, {}).setdefault(needed.get(sentence, NOTHING_NEEDED), [0.0, 0])
                group[0] += share
                group[1] += 1
    return found


def by_phenomenon(header, variants, shown) -> str:
    """``header``, then a line per variant, memory layer and phenomenon of ``variants`` ({variant: {layer:
    {"phenomenon bucket": figures}}}), a column per distance bucket, each cell ``shown(figures)``."""
    names = [name for _, _, name in BUCKETS]
    lines = [header]
    for variant, layers in variants.items():
        for layer, groups in layers.items():
            for phenomenon in PHENOMENA:
                cells = [groups.get(f"{phenomenon} {name}") for name in names]
                lines.append(f"  {variant + ' ' + layer + ' ' + phenomenon:<40}"
                             + "".join(f"{shown(c) if c else '-':>14}" for c in cells))
    return "\n".join(lines)


def format_probes(probes) -> str:
    """The probe's lines: each context word's answer told from its memory's read, % (words)."""
    return by_phenomenon("probe: each context word's answer told from what its layer's memory read gives it "
                         "(nearest centroid, % of the odd-numbered documents' words)", probes, cell)


def format_pushes(pushed) -> str:
    lines = ["pushed: the mean share of a queue memory a sentence pushed (sentences), by what a later sentence "
             "needs from it (the pronoun's noun, the topic it sets, the person it introduces, the word choice it "
             "makes first; nothing: fillers and what no later sentence uses)"]
    for variant, layers in pushed.items():
        for layer, needs in layers.items():
            lines.append(f"  {variant + ' ' + layer:<24}" + "".join(
                f"{need} {needs[need][0] / needs[need][1]:.2f} ({needs[need][1]})".rjust(20)
                for need in (*PHENOMENA, NOTHING_NEEDED) if need in needs))
    return "\n".join(lines)


def format_found(found) -> str:
    """The found lines: the mean share of a queue's read on the cue sentence's slot (words)."""
    return by_phenomenon("found: the mean share of a queue memory's read at a context word that falls on the slot "
                         "holding what its cue sentence pushed (words; uniform over the slots: one over their number)",
                         found, lambda summed_count: f"{summed_count[0] / summed_count[1]:.2f} ({summed_count[1]})")


def cell(right_total) -> str:
    right, total = right_total
    return f"{100 * right / total:.1f} ({total})"


def format_results(results, target_tokens, seconds) -> str:
    names = [name for _, _, name in BUCKETS]
    lines = ["contrastive accuracy % (items) by phenomenon and sentences back; chance: "
             + ", ".join(f"{p} {CHANCE[p]:.0%}" for p in PHENOMENA) + f"; {target_tokens} target tokens an epoch"]
    for (variant, epoch), scores in results.items():
        wall = seconds[variant].get(epoch)
        lines.append(f"\n{variant}, epoch {epoch} ({epoch * target_tokens} target tokens, "
                     f"{wall if wall is not None else '-'} s of training)")
        lines.append(f"  {'':<28}" + "".join(f"{name:>14}" for name in names))
        for kind, label in (("distance", "since established"), ("gap", "since last shown")):
            for phenomenon in PHENOMENA:
                found = scores[kind].get(phenomenon, {})
                lines.append(f"  {phenomenon + ', ' + label:<28}"
                             + "".join(f"{cell(found[name]) if name in found else '-':>14}" for name in names))
        people, first = scores["introduced"].get("title", {}), scores["first's title"].get("title", {})
        lines.append(f"  {'title, first named, by person':<28}"
                     + "".join(f"{cell(people[place]):>14}" for place in sorted(people, key=int))
                     + "   (the person introduced 1st, 2nd, ...)")
        lines.append(f"  {'title, later persons':<28}"
                     + "".join(f"{cell(first[name]) if name in first else '-':>14}" for name in ("same", "other"))
                     + "   (first named; the 1st person's title, the other: one title kept for all is right on the "
                     "first only)")
        own = scores["own choice"]
        counted, used = own["words"]
        lines.append(f"  {'own choice kept':<28}"
                     + "".join(f"{cell(own['kept'][name]) if name in own['kept'] else '-':>14}" for name in names)
                     + f"   ({counted} of {used} words' first translation varies)")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT / "runs" / "phenomena",
                        help="where the corpus, checkpoints and scores go, created if missing (default: %(default)s)")
    parser.add_argument("--variants", type=parse_systems, default="sentence,concat,memory",
                        help=f"comma-separated, of {', '.join(SYSTEMS)} (default: %(default)s)")
    parser.add_argument("--variant", type=named_options(SYSTEMS), action="append", default=[], metavar="NAME=OPTIONS",
                        help="a memory model variant: NAME and its fairseq-train options, e.g. "
                        "gated='--memory-update gated' (repeatable)")
    parser.add_argument("--documents", type=int, default=1000, help="training documents (default: %(default)s)")
    parser.add_argument("--test-documents", type=int, default=60)
    parser.add_argument("--min-sentences", type=int, default=10)
    parser.add_argument("--max-sentences", type=int, default=150)
    parser.add_argument("--short-documents", type=int, default=0,
                        help="more training documents, of --min-sentences to --short-max-sentences sentences, "
                        "shuffled among the others: more of their cues lie within a training window of their use "
                        "(default: %(default)s)")
    parser.add_argument("--short-max-sentences", type=int, default=16)
    default = LongDocumentShape()
    for name in SHAPE_OPTIONS:
        parser.add_argument("--" + name.replace("_", "-"), type=type(getattr(default, name)),
                            default=getattr(default, name), help="long_documents.LongDocumentShape's (default: "
                            "%(default)s; a rate is the share of sentences of that kind)")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--score-epochs", type=lambda text: [int(e) for e in text.split(",") if e],
                        help="comma-separated epochs to score (default: half of --epochs and the last)")
    parser.add_argument("--model-args", default=shlex.join(LONG_RANGE_MODEL),
                        help="the model's size and dropout as fairseq-train options (default: 3+3 layers of 128)")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--generate-args", default="", help="more fairseq-generate options, one string")
    parser.add_argument("--varied", type=float, default=0.1, help="the share of documents a word's less frequent "
                        "first translation needs for its later uses to count (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--probe", action="store_true", help="probe what each memory variant's last checkpoint's "
                        "memory gives the context words")
    args = parser.parse_args(argv)
    try:
        args.shape = LongDocumentShape(**{name: getattr(args, name) for name in SHAPE_OPTIONS})
        check_lengths(args.shape, args.min_sentences, args.max_sentences)
        if args.short_documents:
            check_lengths(args.shape, args.min_sentences, args.short_max_sentences)
    except ValueError as error:
        parser.error(str(error))
    args.score_epochs = args.score_epochs or sorted({max(1, args.epochs // 2), args.epochs})
    if not all(1 <= epoch <= args.epochs for epoch in args.score_epochs):
        parser.error(f"--score-epochs: give epochs from 1 to --epochs {args.epochs}")
    check_paths(parser, workdirs=[("--workdir", args.workdir)])
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # fairseq's INFO lines would bury the table
    work = args.workdir
    data, documents, target_tokens = prepare(args, work)
    variants = {name: (SYSTEMS[name], []) for name in args.variants}
    variants.update((name, (MEMORY_SYSTEM, options)) for name, options in args.variant)
    results, seconds, probes = {}, {}, {}
    for variant, (system, options) in variants.items():
        directory = work / variant
        print(f"{variant}:", flush=True)
        train_from_scratch("training", data, directory, [*system, *options], args, args.epochs)
        seconds[variant] = training_seconds(directory / "train.log")
        for epoch in args.score_epochs:
            results[variant, epoch] = score(args, data, directory, system, epoch, documents["test"])
        if args.probe and system is MEMORY_SYSTEM:
            last = directory / "checkpoints" / f"checkpoint{args.epochs}.pt"
            probes[variant] = probed(args, data, last, documents["test"])
    table = format_corpus(documents, args.shape) + "\n\n" + format_results(results, target_tokens, seconds)
    if probes:
        table += "\n\n" + format_probes({variant: probe["reads"] for variant, probe in probes.items()})
        pushed = {variant: probe["pushes"] for variant, probe in probes.items() if "pushes" in probe}
        if pushed:
            table += "\n\n" + format_pushes(pushed)
            table += "\n\n" + format_found({variant: probe["found"] for variant, probe in probes.items()
                                             if "found" in probe})
    print(table)
    (work / "phenomena.txt").write_text(table + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    try:
        main()
    except StepError as error:
        sys.exit(f"document_phenomena.py: {error}")
