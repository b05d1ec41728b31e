"""Quickstart: a sentence-level transformer, a 2-to-1 concatenation model, the recurrent-memory
model, the Associated Memory Network and the local+global model side by side, on CPU.

Generates synthetic documents whose translation needs earlier sentences
(``memory_nmt_tools/synthetic_documents.py``), binarizes them with fairseq-preprocess, trains a
sentence-level ``transformer``, a ``transformer_context_concat`` reading the previous source
sentence, a ``transformer_recurrent_memory``, a ``transformer_associated_memory`` reading the
previous source sentence and a ``transformer_local_global`` (chunks of 20 sentences: whole
documents here), all of the same size, each on its own training batches for the same EPOCHS
(the same target tokens: the memory model in lanes that refill, the others one batch an update),
translates the test documents with each, and prints s-BLEU, d-BLEU, how much of its context each
uses (CXMI on the test references, ``memory_nmt_tools/context_usage.py``) and the accuracy on the
context-dependent words by how far back their cue is (also written to WORK/results.txt), with a
paragraph on what the table shows. Takes about 4 minutes on 2 CPU cores.

    python examples/quickstart.py [--workdir quickstart] [--seed 1] [--force]

Steps whose outputs exist are skipped, so a rerun resumes after an interruption (fairseq
resumes training from checkpoint_last.pt); ``--force`` deletes the working directory first.
"""
import argparse
import json
import logging
import re
import shutil
import sys
from pathlib import Path

from memory_nmt_tools.context_usage import shown_bits, split_cxmi
from memory_nmt_tools.document_bleu import score_documents
from memory_nmt_tools.experiments import MODEL_ARGS, StepError, fairseq_command, preprocess, run_echoing, skip
from memory_nmt_tools.generate_texts import read_hypotheses
from memory_nmt_tools.paths import check_paths
from memory_nmt_tools.synthetic_documents import context_accuracy, contrastive_items, generate_documents, write_documents
from memory_nmt_tools.text_files import TextFileError

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "memory_nmt"

SPLITS = {"train": 1000, "valid": 100, "test": 100}  # documents per split
SPLIT_SEED_OFFSET = {"train": 0, "valid": 1000, "test": 2000}
EPOCHS = 6
MAX_TOKENS = 512
TRAINING_ARGS = [
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "1.0",
    "--lr", "2e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100",
    "--warmup-init-lr", "1e-7", "--label-smoothing", "0.1",
    "--max-tokens", str(MAX_TOKENS), "--max-epoch", str(EPOCHS),
    "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "20", "--cpu",
]
# Every system loads the plugin: it also lets fairseq load its checkpoints under torch >= 2.6.
SENTENCE = {
    "name": "sentence",
    "task": ["--user-dir", str(PLUGIN), "--task", "translation",
             "--required-batch-size-multiple", "1"],
    "train": ["--arch", "transformer", "--criterion", "label_smoothed_cross_entropy"],
}


def document_system(name, *arch_options):
    """A system of the document task: its --arch and options, trained with the document criterion
    on its own training batches (the memory model in the task's default window of sentence steps,
    each of --max-tokens)."""
    return {
        "name": name,
        "task": ["--user-dir", str(PLUGIN), "--task", "document_translation"],
        "train": [*arch_options, "--criterion", "document_label_smoothed_cross_entropy"],
    }


CONCAT = document_system("concat", "--arch", "transformer_context_concat_small",
                         "--source-context", "1", "--target-context", "0")
MEMORY = document_system("memory", "--arch", "transformer_recurrent_memory_small")
AMN = document_system("amn", "--arch", "transformer_associated_memory_small", "--context-sentences", "1")
LOCAL_GLOBAL = document_system("local_global", "--arch", "transformer_local_global_small")
SYSTEMS = (SENTENCE, CONCAT, MEMORY, AMN, LOCAL_GLOBAL)
GENERATE_LINE = re.compile(r"[STHDP]-\d+\t")


def write_corpus(work, documents):
    corpus = work / "corpus"
    if skip(corpus / "test.docids", "writing the corpus"):  # written last
        return
    print(f"\n==> writing the corpus to {corpus}")
    for split, docs in documents.items():
        write_documents(docs, str(corpus / split))
        print(f"{split}: {len(docs)} documents, {sum(len(d.source) for d in docs)} sentences")
    items = contrastive_items(documents["test"])
    (work / "contrastive.json").write_text(json.dumps(items, indent=1) + "\n", encoding="utf-8")
    print(f"test: {len(items)} contrastive items in {work / 'contrastive.json'}")


def train(work, model, seed):
    log, title = work / f"train-{model['name']}.log", f"training the {model['name']} model"
    if skip(log, title):
        return
    command = (fairseq_command("train") + [str(work / "data-bin")] + model["task"] + model["train"]
               + MODEL_ARGS + TRAINING_ARGS
               + ["--seed", str(seed), "--save-dir", str(work / "checkpoints" / model["name"])])
    run_echoing(title, command, log)


def translate(work, model):
    """fairseq-generate's output for the test split (kept in WORK/generate-NAME.txt)."""
    output = work / f"generate-{model['name']}.txt"
    title = f"translating the test set with the {model['name']} model"
    if not skip(output, title):
        run_echoing(title, fairseq_command("generate") + [str(work / "data-bin")] + model["task"] + [
            "--path", str(work / "checkpoints" / model["name"] / "checkpoint_best.pt"),
            "--gen-subset", "test", "--beam", "5", "--max-tokens", "2048", "--cpu",
        ], output, show=lambda line: not GENERATE_LINE.match(line))
    return output


def context_use(work, model):
    """The model's CXMI on the test split in bits per token (kept in WORK/cxmi-NAME.json): its
    cross-entropy on the references with every sentence its own document minus with the documents."""
    output, title = work / f"cxmi-{model['name']}.json", f"measuring how much context the {model['name']} model uses"
    if not skip(output, title):
        print(f"\n==> {title} (CXMI on the test split)", flush=True)
        checkpoint = work / "checkpoints" / model["name"] / "checkpoint_best.pt"
        cxmi = split_cxmi(checkpoint, work / "data-bin", "test", work, max_tokens=2048)
        output.write_text(json.dumps(cxmi, indent=1) + "\n", encoding="utf-8")
    return json.loads(output.read_text(encoding="utf-8"))["bits_per_token"]


def evaluate(documents, hypotheses):
    """BLEU and context-word accuracy of flat ``hypotheses`` of ``documents``."""
    references = [s for doc in documents for s in doc.target]
    docids = [i for i, doc in enumerate(documents) for _ in doc.target]
    bleu = score_documents(hypotheses, references, docids)
    by_document, start = [], 0
    for doc in documents:
        by_document.append(hypotheses[start:start + len(doc.target)])
        start += len(doc.target)
    return bleu, context_accuracy(documents, by_document)


COLUMNS = {  # accuracy key -> column title
    "pronoun d=1": "pronoun, prev.",
    "pronoun d>1": "pronoun, 2-3 back",
    "sense d=1": "sense, prev.",
    "sense d>1": "sense, 2+ back",
    "all": "all",
}
CHANCE = {"pronoun d=1": "33.3%", "pronoun d>1": "33.3%", "sense d=1": "50.0%", "sense d>1": "50.0%"}
MEANING = """\
How to read it: CXMI is how much the context lowers the model's cross-entropy on the test
references, in bits per token (0 for a model that reads no context). The columns on the right
count the words whose translation depends on an earlier sentence (a system with all of them
right and an s-BLEU below 100 got other words wrong).
"pronoun" is "it" -> er/sie/es, decided by a noun in the previous sentence (prev.) or 2-3
sentences back; "sense" is an ambiguous noun (plant -> pflanze/fabrik) decided only by the
document's first sentence, which is the previous sentence (prev.) only for the second sentence of
a document. The sentence model sees no context and guesses (chance: 1/3, 1/2). The 2-to-1
concatenation model sees exactly the previous source sentence: right where the cue is there,
guessing beyond. The memory model carries what it needs from sentence to sentence, however far
back. The Associated Memory Network (amn) sees the previous source sentence too, like 2-to-1
concat, but through its memory network: the current sentence attends to it and a gate mixes what
it finds into the encoder output. The local+global model reads every source sentence of its chunk
(here the whole document) before translating any of them."""


def results_table(scores):
    """``scores``: model name -> (bleu, accuracy, cxmi)."""
    header = f"{'model':<12} {'s-BLEU':>7} {'d-BLEU':>7} {'CXMI':>7} " + " ".join(f"{t:>19}" for t in COLUMNS.values())
    lines = [header, "-" * len(header)]
    for name, (bleu, accuracy, cxmi) in scores.items():
        cells = [f"{100 * c / t:5.1f}% ({c}/{t})" for c, t in (accuracy[k] for k in COLUMNS)]
        lines.append(f"{name:<12} {bleu['s_bleu']:7.2f} {bleu['d_bleu']:7.2f} {shown_bits(cxmi):>7} "
                     + " ".join(f"{c:>19}" for c in cells))
    chance = f"{'chance':<12} {'':>7} {'':>7} {'':>7} " + " ".join(f"{CHANCE.get(k, ''):>19}" for k in COLUMNS)
    lines += [chance.rstrip(), "",
              f"sacrebleu: {next(iter(scores.values()))[0]['signature']}", "", MEANING]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("quickstart"),
                        help="where the corpus, checkpoints and outputs go, created if missing (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--force", action="store_true", help="delete the working directory first")
    args = parser.parse_args(argv)
    check_paths(parser, workdirs=[("--workdir", args.workdir)])
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)  # the synthetic text is tokenized
    work = args.workdir.resolve()
    if args.force and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    documents = {split: generate_documents(count, seed=args.seed + SPLIT_SEED_OFFSET[split])
                 for split, count in SPLITS.items()}
    try:
        write_corpus(work, documents)
        preprocess(work)
        for model in SYSTEMS:
            train(work, model, args.seed)
        num_test = sum(len(doc.source) for doc in documents["test"])
        scores = {}
        for model in SYSTEMS:
            hypotheses = read_hypotheses(translate(work, model), num_test, "H")
            scores[model["name"]] = (*evaluate(documents["test"], hypotheses), context_use(work, model))
    except (StepError, TextFileError) as error:
        sys.exit(f"\nerror: {error}")
    table = results_table(scores)
    (work / "results.txt").write_text(table + "\n", encoding="utf-8")
    print(f"\n{table}\n\n(written to {work / 'results.txt'})")
    systems = " ".join(f"--system {m['name']}={work / 'checkpoints' / m['name'] / 'checkpoint_best.pt'}" for m in SYSTEMS)
    print(f"\nDecoding speed, peak memory and contrastive accuracy of the same systems, side by side:\n"
          f"  python {ROOT / 'scripts' / 'compare_systems.py'} --data {work / 'data-bin'} {systems} "
          f"--contrastive voita {work / 'contrastive.json'} --cpu")


if __name__ == "__main__":
    main()
