"""Document-level systems side by side on the same documents: quality, context accuracy, speed, memory.

For every ``--system NAME=CHECKPOINT`` (any system of the plugin, or fairseq's plain
``transformer``, which the document task runs sentence by sentence), on the same binarized data:

1. translates ``--gen-subset`` with fairseq-generate (``--task document_translation``, the same
   ``--beam`` for every system, and by default the same batches: ``--batch-size`` documents
   each; ``--max-tokens`` instead counts the previous sentences a system reads with each
   sentence, so a concatenation model's batches then hold fewer documents), keeps its output
   and log in WORKDIR/generate-NAME.{txt,log}, scores s-BLEU and d-BLEU with sacrebleu
   (``document_bleu.py``), and reads fairseq's own speed: sentences/s over its inference steps;
2. measures how much of its context it uses, CXMI (``context_usage.py``): its cross-entropy on
   the split's references, teacher-forced, without its context (every sentence its own
   document) minus with it, in bits per token;
3. with ``--contrastive FORMAT FILE...``, scores contrastive items in context
   (``contrastive_eval.py``): accuracy overall and by antecedent distance, and the correct
   candidate's log-probability per token with its context minus without, in bits (CXMI on the
   items), overall and by distance;
4. decodes single documents of ``--lengths`` sentences (the split's source sentences in corpus
   order, repeated as needed), each in a fresh process, and measures the peak memory while
   decoding (``peak_memory.py``) and the time per sentence.

Every system is loaded and the split batched for it as fairseq-generate will, before anything
is translated (``not_measurable``): what would stop it (a checkpoint that does not load, a sentence
wider than ``--max-tokens``, random context on a split of one document) stops the run there,
naming the system. Each figure goes to ``--json`` as it comes (``complete`` false until the
last); a failed step prints the table so far, '-' where nothing was measured, before its error.

An associated memory whose data chooses its context (``--context-choice next`` or ``random``,
``memory_nmt/pipeline/chosen_context.py``) is measured where it can be and reads n/a elsewhere,
the reason under the table: no contrastive scores, since an item holds neither its next
sentences nor other documents' (the scorer refuses it); with ``random``, no CXMI on the split,
whose copy without context still gives it random sentences. Its documents of ``--lengths`` draw
their random context from the split's sentences, as its translation does. Skipped, not refused:
these models are compared as the paper's Table 4 compares them, beside the previous-sentence
model in one table, and no option would give them the figure.

``--model-overrides NAME=DICT`` decodes system NAME with options other than its checkpoint's, as
fairseq's ``--model-overrides`` does: the same checkpoint twice under two names shows, say, how the
local+global model's cost grows with its chunks (``--system lg=CKPT --system lg-5=CKPT
--model-overrides "lg-5={'chunk_sentences': 5}"``).

Prints one table, a row per system (and, with contrastive items, a second one of CXMI by
distance); ``--json FILE`` writes every figure, ``--plot FILE`` draws them. Times are comparable
within one run on one machine only.

    python scripts/compare_systems.py --data quickstart/data-bin \\
        --system sentence=quickstart/checkpoints/sentence/checkpoint_best.pt \\
        --system concat=quickstart/checkpoints/concat/checkpoint_best.pt \\
        --system memory=quickstart/checkpoints/memory/checkpoint_best.pt \\
        --system amn=quickstart/checkpoints/amn/checkpoint_best.pt \\
        --system local_global=quickstart/checkpoints/local_global/checkpoint_best.pt \\
        --contrastive voita quickstart/contrastive.json --cpu --plot compare.png
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from . import context_usage
from .context_usage import shown_bits
from .document_bleu import read_docids, score_documents
from .generate_texts import read_hypotheses, read_references
from .paths import check_paths
from .text_files import TextFileError

PLUGIN = Path(__file__).resolve().parents[1] / "memory_nmt"

SPEED_LINE = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s")
MiB = 2**20
CONTRASTIVE_CXMI = "; on the items: the correct candidate, context sentences dropped"
UNMEASURED = {"cxmi": "CXMI on the split", "contrastive": "contrastive scores"}  # not_measurable's reasons


class ComparisonError(RuntimeError):
    """A step failed; the message names the system, the command or file, and what went wrong."""


def parse_system(spec):
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{spec!r}: give NAME=CHECKPOINT, e.g. memory=checkpoints/checkpoint_best.pt")
    if "/" in name or os.sep in name or name in (".", ".."):
        raise argparse.ArgumentTypeError(
            f"{spec!r}: the name {name} names files in WORKDIR (generate-{name}.txt); give a name without '/'"
        )
    if not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"{spec!r}: no checkpoint file {path}")
    return name, path


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", required=True, help="the binarized data (fairseq-preprocess output with .docids)")
    parser.add_argument("--system", dest="systems", type=parse_system, action="append", required=True,
                        metavar="NAME=CHECKPOINT", help="a system to compare (repeat); NAME labels its row")
    parser.add_argument("--gen-subset", default="test", help="the split to translate (default: test)")
    parser.add_argument("--beam", type=positive, default=5)
    parser.add_argument("--batch-size", type=positive, help="documents per batch, the same batches for "
                        "every system (default: 32 unless --max-tokens)")
    parser.add_argument("--max-tokens", type=positive, help="tokens per sentence step, counting the "
                        "context each system reads")
    parser.add_argument("--generate-args", default="", help="more fairseq-generate options for every "
                        "system, e.g. \"--post-process subword_nmt --tokenizer moses\"")
    parser.add_argument("--reference", help="raw reference of the split, one sentence a line, to "
                        "score against instead of the T- lines (e.g. the untokenized text)")
    parser.add_argument("--docids", help="document index of the split (default: DATA/SPLIT.*.docids)")
    parser.add_argument("--contrastive", nargs="+", metavar="FORMAT FILE",
                        help="a contrastive test set: its format (contrapro, bawden, context-files, "
                        "voita, voita-lines; see contrastive_eval.py) and its files")
    parser.add_argument("--context-size", type=int, default=1, help="context lines per candidate "
                        "line of the contrastive context files (default 1)")
    parser.add_argument("--group-size", type=int, help="candidates per contrastive item "
                        "(context-files, voita-lines)")
    parser.add_argument("--moses", action="store_true", help="Moses-tokenize the contrastive text first")
    parser.add_argument("--bpe-codes", help="apply these BPE codes to the contrastive text first")
    parser.add_argument("--lengths", type=parse_lengths, default="10,100,1000",
                        help="sentences of the documents whose decoding peak memory is measured, "
                        "separated by commas, measured shortest first (default: 10,100,1000)")
    parser.add_argument("--cpu", action="store_true", help="decode on the CPU even if there is a GPU")
    parser.add_argument("--fp16", action="store_true", help="decode in half precision (GPU)")
    parser.add_argument("--workdir", type=Path, help="keep the generate outputs and logs here, created if "
                        "missing (default: a temporary directory, deleted at the end unless a step failed)")
    parser.add_argument("--json", type=Path, help="write every figure to this file (its folder must exist)")
    parser.add_argument("--plot", type=Path, help="draw the comparison to this image file (its folder must exist)")
    parser.add_argument("--model-overrides", dest="overrides", type=parse_overrides, action="append", default=[],
                        metavar="NAME=DICT", help="decode system NAME with these options instead of its "
                        "checkpoint's, a Python dict as fairseq's --model-overrides takes (repeat)")
    parser.add_argument("--measure", type=parse_system, help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.max_tokens is None and args.batch_size is None:
        args.batch_size = 32
    names = [name for name, _ in args.systems]
    if len(set(names)) != len(names):
        parser.error(f"--system names must differ: {', '.join(names)}")
    unknown = [name for name, _ in args.overrides if name not in names]
    if unknown:
        parser.error(f"--model-overrides {unknown[0]}=...: no --system is named {unknown[0]}")
    args.overrides = dict(args.overrides)
    if args.measure:  # the child measuring one document: its parent checked the paths
        return args
    check_paths(
        parser,
        inputs=[("--data", args.data, "directory", "the binarized data (fairseq-preprocess's --destdir)"),
                ("--reference", args.reference, "file", "the raw reference of the split"),
                ("--docids", args.docids, "file", "the docids file of the split"),
                ("--bpe-codes", args.bpe_codes, "file", "the BPE codes of the training data")],
        outputs=[("--json", args.json)], plots=[("--plot", args.plot)], workdirs=[("--workdir", args.workdir)],
    )
    return args


def positive(text):
    """A whole number of 1 or more (``--beam``, ``--batch-size``, ``--max-tokens``)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, 1 or more")
    return number


def parse_lengths(text):
    """``--lengths``: "10,100,1000" -> [10, 100, 1000], shortest first (the last column times the longest)."""
    try:
        lengths = [int(n) for n in text.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1 or len(set(lengths)) < len(lengths):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give numbers of sentences (1 or more, each once) separated by commas, e.g. 10,100,1000"
        )
    return sorted(lengths)


def parse_overrides(spec):
    """``NAME=DICT`` -> (NAME, the dict), checked as fairseq will read it."""
    import ast

    name, sep, text = spec.partition("=")
    try:
        overrides = ast.literal_eval(text) if sep and name else None
    except (ValueError, SyntaxError):
        overrides = None
    if not isinstance(overrides, dict):
        raise argparse.ArgumentTypeError(
            f"{spec!r}: give NAME=DICT, e.g. \"lg-5={{'chunk_sentences': 5}}\" (a Python dict of model options)"
        )
    return name, overrides


def decoding_options(args, name, path):
    """fairseq-generate's options for system ``name`` (checkpoint ``path``): those shared by every
    system, and its ``--model-overrides``."""
    options = ["--user-dir", str(PLUGIN), "--task", "document_translation", "--path", path,
               "--gen-subset", args.gen_subset, "--beam", str(args.beam)]
    if name in args.overrides:
        options += ["--model-overrides", repr(args.overrides[name])]
    if args.max_tokens is not None:
        options += ["--max-tokens", str(args.max_tokens)]
    if args.batch_size is not None:
        options += ["--batch-size", str(args.batch_size)]
    options += ["--cpu"] * args.cpu + ["--fp16"] * args.fp16
    return options + shlex.split(args.generate_args)


def docids_path(args):
    if args.docids:
        return args.docids
    found = sorted(Path(args.data).glob(f"{args.gen_subset}.*.docids"))
    if len(found) != 1:
        raise ComparisonError(
            f"{args.data}: expected one {args.gen_subset}.SRC-TGT.docids, found {len(found)}; give --docids"
        )
    return str(found[0])


def load_for_decoding(args, name, path):
    """(cfg, task, model) of system ``name`` as fairseq-generate loads it with ``decoding_options``."""
    from fairseq import checkpoint_utils, options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_generation_parser()
    given = options.parse_args_and_arch(parser, [args.data, *decoding_options(args, name, path)])
    cfg = convert_namespace_to_omegaconf(given)
    utils.import_user_module(cfg.common)
    task = tasks.setup_task(cfg.task)
    (model,), _ = checkpoint_utils.load_model_ensemble([path], arg_overrides=args.overrides.get(name), task=task)
    return cfg, task, model


@contextmanager
def named_errors(name, kind=None):
    """The plugin's errors of ``kind`` (by default any about what the user gave: data, options) as a
    ``ComparisonError`` naming ``name``, the system or the option they come from."""
    from memory_nmt.pipeline.errors import InputError

    try:
        yield
    except kind or InputError as error:
        raise ComparisonError(f"{name}: {error}") from None


def not_measurable(args, name, path):
    """What system ``name`` is not measured on, and why ({"cxmi" or "contrastive": reason}; see the
    module doc), read from its model with its ``--model-overrides``; the split is loaded and
    batched for it as fairseq-generate will, so that what would stop its translation stops the
    comparison before anything is translated."""
    from fairseq import utils

    from memory_nmt.pipeline.system import document_system

    with named_errors(name):
        cfg, task, model = load_for_decoding(args, name, path)
        task.load_dataset(args.gen_subset)
        task.get_batch_iterator(
            task.dataset(args.gen_subset), max_tokens=cfg.dataset.max_tokens, max_sentences=cfg.dataset.batch_size,
            max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        )
    choice = document_system(model).context_choice()
    if choice is None:
        return {}
    sentences = {"next": "the next sentences of its document", "random": "random sentences of other documents"}
    reads = f"it reads {sentences[choice.kind]} ({choice.option()})"
    reasons = {"contrastive": f"{reads}, which a contrastive item does not have"} if args.contrastive else {}
    if choice.kind == "random":
        reasons["cxmi"] = (f"{reads}, and would read them still without its context: in the split's copy without "
                           "context every other sentence is another document")
    return reasons


def translate(args, name, path, workdir, docids):
    """BLEU and speed of one system on the split, from fairseq-generate's output."""
    output = workdir / f"generate-{name}.txt"
    command = [sys.executable, "-m", "fairseq_cli.generate", args.data, *decoding_options(args, name, path)]
    print(f"\n==> {name}: translating {args.gen_subset}\n{shlex.join(command)}", file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    output.write_text(done.stdout, encoding="utf-8")
    log = output.with_suffix(".log")
    log.write_text(done.stderr, encoding="utf-8")
    if done.returncode:
        raise ComparisonError(f"{name}: fairseq-generate failed (its log: {log}):\n{done.stderr[-3000:]}")
    speed = SPEED_LINE.search(done.stdout + done.stderr)
    if speed is None:
        raise ComparisonError(f"{name}: fairseq-generate printed no 'Translated ... sentences/s' line ({log})")
    hypotheses = read_hypotheses(str(output), len(docids))
    references = read_references(str(output), len(docids), args.reference)
    bleu = score_documents(hypotheses, references, docids)
    return {**bleu, "sentences_per_second": float(speed[4]), "generate_output": str(output)}


def contrastive_options(args):
    """contrastive_eval.py's options, from ours."""
    return SimpleNamespace(
        format=args.contrastive[0], files=args.contrastive[1:], context_size=args.context_size,
        group_size=args.group_size, moses=args.moses, bpe_codes=args.bpe_codes, max_tokens=4096,
    )


def contrastive_items(args):
    """The items of ``--contrastive FORMAT FILE...``, or None without it."""
    if not args.contrastive:
        return None
    from memory_nmt.evaluation.contrastive import ContrastiveDataError

    from . import contrastive_eval

    expected = contrastive_eval.FILES.get(args.contrastive[0])
    if expected is None or len(args.contrastive) - 1 != len(expected):
        raise ComparisonError(
            f"--contrastive {' '.join(args.contrastive)}: give a format and its files: "
            + "; ".join(f"{name} {' '.join(files)}" for name, files in contrastive_eval.FILES.items())
        )
    with named_errors("--contrastive", ContrastiveDataError):
        return contrastive_eval.read_items(contrastive_options(args))


def contrastive_scores(args, name, path, items, use_cuda):
    """(accuracy, CXMI) of system ``name`` on the contrastive items, each {"all" or distance: ...}
    (``contrastive.accuracy``, ``context_usage.contrastive_context_use``), or (None, None) without items."""
    if items is None:
        return None, None
    from tqdm import tqdm

    from memory_nmt.evaluation import contrastive

    from . import contrastive_eval

    with named_errors("--contrastive", contrastive.ContrastiveDataError):
        model, task, _ = contrastive_eval.load(path, args.data, use_cuda, args.overrides.get(name))
        model_items = contrastive_eval.preprocessed(items, contrastive_options(args), task.cfg.source_lang,
                                                    task.cfg.target_lang)
        scores, cxmi = context_usage.contrastive_context_use(
            model, task, model_items, max_tokens=4096,
            progress=lambda batches: tqdm(batches, desc=f"scoring with {path}", disable=None, file=sys.stderr),
        )
    return contrastive.accuracy(items, scores), cxmi


def split_cxmi(args, name, path, workdir, use_cuda):
    """CXMI of system ``name`` on the split (``context_usage.split_cxmi``), batched as it is decoded."""
    return context_usage.split_cxmi(
        path, args.data, args.gen_subset, workdir, max_tokens=args.max_tokens, batch_size=args.batch_size,
        use_cuda=use_cuda, model_overrides=args.overrides.get(name),
    )


def measure_in_subprocess(args, name, path, length, workdir):
    command = [sys.executable, "-m", "memory_nmt_tools.compare_systems", *args.argv,
               "--measure", f"{name}={path}", "--length", str(length)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        log = workdir / f"measure-{name}-{length}.log"
        log.write_text(done.stderr, encoding="utf-8")
        raise ComparisonError(f"{name}: measuring a {length}-sentence document failed (its log: {log}):\n"
                              f"{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def document_to_decode(sentences, length, split_sentences, stream):
    """A dataset of one document, ``stream``: the first ``length`` of ``sentences``, which end with
    the split's own, ``split_sentences`` of them. Only the document is decoded; a system that reads
    random sentences of other documents (``--context-choice random``) draws them from the split's,
    as when it translates the split (a dataset of one document has none to draw from)."""
    from memory_nmt.pipeline.data import Document, DocumentDataset

    class OneDocument(DocumentDataset):
        def choosing(self, choice, seed, epoch):
            split = Document("(the split's sentences)", length, split_sentences)
            with_split = DocumentDataset(self.pairs, [*self.documents, split], self.stream, self.docids_path)
            chosen = with_split.choosing(choice, seed, epoch).chosen
            return DocumentDataset(self.pairs, self.documents, self.stream, self.docids_path, chosen)

    return OneDocument(sentences, [Document(stream, 0, length)], stream, "(repeated source sentences)")


def measure(args):
    """(In the child process.) Peak memory and seconds per sentence of decoding one document of
    ``--length`` sentences with ``--measure``'s checkpoint, as fairseq-generate decodes, after a
    two-sentence warm-up document."""
    import torch
    from fairseq import utils
    from fairseq.data import LanguagePairDataset

    from memory_nmt.benchmarks.peak_memory import peak_since, start_peak

    cfg, task, model = load_for_decoding(args, *args.measure)
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    model = model.half() if args.fp16 else model
    model.eval().to(device)
    generator = task.build_generator([model], cfg.generation)
    task.load_dataset(args.gen_subset)
    sources = task.dataset(args.gen_subset).pairs.src
    split_sentences = [sources[i] for i in range(len(sources))]  # read before the peak is measured
    max_positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())

    def decode(length, stream):
        sentences = [sources[i % len(sources)] for i in range(length)] + split_sentences
        pairs = LanguagePairDataset(sentences, [s.numel() for s in sentences], task.source_dictionary)
        dataset = document_to_decode(pairs, length, len(split_sentences), stream)
        batches = task.get_batch_iterator(
            dataset, max_tokens=cfg.dataset.max_tokens, max_sentences=cfg.dataset.batch_size,
            max_positions=max_positions,
        ).next_epoch_itr(shuffle=False)
        for sample in batches:
            task.inference_step(generator, [model], utils.move_to_cuda(sample) if device == "cuda" else sample)

    before = start_peak(device)
    decode(2, "warm-up")
    start = time.perf_counter()
    decode(args.length, "document")
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({"peak_bytes": peak_since(device, before), "seconds_per_sentence": seconds / args.length}))


def distance_order(key):
    return (key == "all", int(key) if key.lstrip("-").isdigit() else float("inf"), key)


def shown(value, form):
    """A figure, or '-' for one not measured (yet)."""
    return "-" if value is None else format(value, form)


def cxmi_cell(figures):
    if "cxmi" in figures["not_measured"]:
        return "n/a"
    return shown_bits(figures["cxmi"]["bits_per_token"]) if figures.get("cxmi") else "-"


def contrastive_keys(results, figure, args):
    """"all" (with ``--contrastive``, even if no system could be scored) and the distances of ``figure``."""
    keys = {key for r in results.values() for key in (r.get(figure) or {})} | ({"all"} if args.contrastive else set())
    keys = sorted(keys, key=distance_order)
    return keys[-1:] + keys[:-1]


def table(results, args):
    """One row per system: BLEU, CXMI, contrastive accuracy, speed and peak memory; '-' where a
    figure is not measured (a run stopped by an error), n/a where it cannot be (the legend says why)."""
    distances, lengths = contrastive_keys(results, "contrastive", args), args.lengths
    columns = [("system", 12, "<"), ("s-BLEU", 7, ">"), ("d-BLEU", 7, ">"), ("CXMI", 7, ">")]
    columns += [("ctx " + key if key == "all" else f"d={key}", 7, ">") for key in distances]
    columns += [("sent/s", 8, ">")] + [(f"MiB@{n}", 9, ">") for n in lengths] + [(f"ms/sent@{lengths[-1]}", 14, ">")]
    lines = [" ".join(f"{title:{align}{width}}" for title, width, align in columns)]
    lines.append("-" * len(lines[0]))
    for name, r in results.items():
        cells = [name, f"{r['s_bleu']:.2f}", f"{r['d_bleu']:.2f}", cxmi_cell(r)]
        accuracy, skipped = r.get("contrastive") or {}, "contrastive" in r["not_measured"]
        for key in distances:
            right, total = accuracy.get(key, (0, 0))
            cells.append("n/a" if skipped else f"{100 * right / total:.1f}" if total else "-")
        cells.append(f"{r['sentences_per_second']:.1f}")
        measured = r.get("long_documents", {})
        cells += [shown(measured[n]["peak_bytes"] / MiB if n in measured else None, ".1f") for n in lengths]
        longest = measured.get(lengths[-1])
        cells.append(shown(1000 * longest["seconds_per_sentence"] if longest else None, ".1f"))
        lines.append(" ".join(f"{cell:{align}{width}}" for cell, (_, width, align) in zip(cells, columns)))
    return "\n".join(lines)


def contrastive_cxmi_table(results, args):
    """One row per system: the contrastive items' CXMI overall and by distance (bits per token)."""
    keys = contrastive_keys(results, "contrastive_cxmi", args)
    columns = [("system", 12, "<")] + [("CXMI " + key if key == "all" else f"d={key}", 9, ">") for key in keys]
    lines = [" ".join(f"{title:{align}{width}}" for title, width, align in columns)]
    lines.append("-" * len(lines[0]))
    for name, r in results.items():
        cxmi = r.get("contrastive_cxmi") or {}
        skipped = "contrastive" in r["not_measured"]
        cells = [name] + ["n/a" if skipped else shown_bits(cxmi[key]["bits_per_token"]) if key in cxmi else "-"
                          for key in keys]
        lines.append(" ".join(f"{cell:{align}{width}}" for cell, (_, width, align) in zip(cells, columns)))
    return "\n".join(lines)


def legend(results, args, device):
    first = next(iter(results.values()))
    items = ""
    if args.contrastive:
        scored = [r["contrastive"] for r in results.values() if r.get("contrastive")]
        counted = f"{scored[0]['all'][1]} items of " if scored else ""
        items = (f"; contrastive: {counted}{' '.join(args.contrastive[1:])}, % right "
                 "overall (ctx all) and by antecedent distance (d=N)")
    batch = f"--max-tokens {args.max_tokens}" if args.max_tokens else f"--batch-size {args.batch_size}"
    return (f"{args.gen_subset}: {first['sentences']} sentences in {first['documents']} documents; "
            f"beam {args.beam}, {batch}, {device}{' fp16' if args.fp16 else ''}{items}.\n"
            f"CXMI: cross-entropy on the references without context (every sentence its own document) minus "
            f"with it, bits per token{CONTRASTIVE_CXMI if items else ''}.\n"
            f"sent/s: fairseq-generate's sentences per second; MiB@N: peak memory decoding one N-sentence "
            f"document (fresh process each); ms/sent: time per sentence of the longest.\n"
            + "".join(f"{name}: --model-overrides {overrides!r}\n" for name, overrides in args.overrides.items())
            + "".join(f"{name}: no {UNMEASURED[key]}: {reason}\n"
                      for name, r in results.items() for key, reason in r["not_measured"].items())
            + f"sacrebleu: {first['signature']}")


def tables(results, args, device):
    """The table (and the contrastive items' CXMI table) with their legend."""
    shown_tables = table(results, args)
    if args.contrastive:
        shown_tables += f"\n\n{contrastive_cxmi_table(results, args)}"
    return f"{shown_tables}\n\n{legend(results, args, device)}"


def write_json(args, device, results, complete=False, error=None):
    """Every figure so far to ``--json`` (if given), replaced whole; ``complete`` once every system
    is measured, ``error`` the message of the failure that stopped the comparison."""
    if args.json is None:
        return
    figures = {"device": device, "complete": complete, "systems": results}
    if error is not None:
        figures["error"] = error
    written = args.json.with_name(args.json.name + ".partial")
    written.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    os.replace(written, args.json)


def plot(results, lengths, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    figure, ((bleu, context, cxmi), (speed, memory, context_cxmi)) = plt.subplots(2, 3, figsize=(16, 8))
    positions = range(len(names))
    bleu.bar([p - 0.2 for p in positions], [results[n]["s_bleu"] for n in names], 0.4, label="s-BLEU")
    bleu.bar([p + 0.2 for p in positions], [results[n]["d_bleu"] for n in names], 0.4, label="d-BLEU")
    bleu.set_xticks(list(positions), names)
    bleu.set_title("BLEU")
    bleu.legend()
    for name in names:
        accuracy = results[name]["contrastive"]
        if accuracy:
            keys = sorted((k for k in accuracy if k != "all"), key=distance_order)
            context.plot([int(k) for k in keys], [100 * accuracy[k][0] / accuracy[k][1] for k in keys],
                         marker="o", label=f"{name} (all {100 * accuracy['all'][0] / accuracy['all'][1]:.1f}%)")
        items = results[name]["contrastive_cxmi"]
        if items:
            keys = sorted((k for k in items if k != "all"), key=distance_order)
            context_cxmi.plot([int(k) for k in keys], [items[k]["bits_per_token"] for k in keys], marker="o",
                              label=f"{name} (all {items['all']['bits_per_token']:.3f})")
    context.set_title("contrastive accuracy by antecedent distance")
    context.set_xlabel("sentences back")
    context.set_ylabel("% right")
    context_cxmi.set_title("CXMI of the correct candidates by antecedent distance")
    context_cxmi.set_xlabel("sentences back")
    context_cxmi.set_ylabel("bits per token")
    if any(results[n]["contrastive"] for n in names):
        context.legend()
        context_cxmi.legend()
    cxmi.bar(list(positions), [results[n]["cxmi"]["bits_per_token"] if results[n]["cxmi"] else float("nan")
                               for n in names])
    cxmi.set_xticks(list(positions), names)
    cxmi.set_title("CXMI on the split (bits per token)")
    speed.bar(list(positions), [results[n]["sentences_per_second"] for n in names])
    speed.set_xticks(list(positions), names)
    speed.set_title("decoding speed (sentences/s)")
    for name in names:
        memory.plot(lengths, [results[name]["long_documents"][n]["peak_bytes"] / MiB for n in lengths], marker="o", label=name)
    memory.set_xscale("log")
    memory.set_ylim(bottom=0)
    memory.set_title("peak memory decoding one document")
    memory.set_xlabel("sentences in the document")
    memory.set_ylabel("MiB")
    memory.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def compare(args, workdir, device, results):
    """Measure every system into ``results`` (its figures as soon as they exist, in ``--json``
    too), after checking them all."""
    docids, items = read_docids(docids_path(args)), contrastive_items(args)  # before translating anything
    unmeasured = {name: not_measurable(args, name, path) for name, path in args.systems}
    for name, reasons in unmeasured.items():
        for key, reason in reasons.items():
            print(f"==> {name}: no {UNMEASURED[key]}: {reason}", file=sys.stderr)
    use_cuda = device == "cuda"
    for name, path in args.systems:
        figures = results[name] = {**translate(args, name, path, workdir, docids), "checkpoint": path,
                                   "model_overrides": args.overrides.get(name), "not_measured": unmeasured[name]}
        write_json(args, device, results)
        print(f"==> {name}: CXMI, contrastive items and documents of {args.lengths} sentences", file=sys.stderr,
              flush=True)
        with named_errors(name):
            figures["cxmi"] = None if "cxmi" in unmeasured[name] else split_cxmi(args, name, path, workdir, use_cuda)
            write_json(args, device, results)
            scored = None if "contrastive" in unmeasured[name] else items
            figures["contrastive"], figures["contrastive_cxmi"] = contrastive_scores(args, name, path, scored, use_cuda)
            write_json(args, device, results)
        figures["long_documents"] = {}
        for length in args.lengths:
            figures["long_documents"][length] = measure_in_subprocess(args, name, path, length, workdir)
            write_json(args, device, results)
        print(f"\n{table(results, args)}\n", file=sys.stderr, flush=True)


def stopped(args, device, results, error):
    """What was measured before ``error`` stopped the comparison: its table, and ``--json``."""
    if not results:
        return
    kept = f"; every figure above is in {args.json}" if args.json else ""
    print(f"\n{tables(results, args, device)}\nstopped by the error below: '-' was not measured{kept}")
    write_json(args, device, results, error=error)


def main(argv=None):
    args = parse_args(argv)
    if args.measure:
        return measure(args)
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="compare_systems-"))
    results = {}
    try:
        compare(args, workdir, device, results)
    except (ComparisonError, TextFileError) as error:
        stopped(args, device, results, str(error))
        if args.workdir is None and not any(workdir.iterdir()):
            workdir.rmdir()
        sys.exit(f"error: {error}")  # a temporary WORKDIR with files is kept: the error names its logs
    except BaseException as error:
        stopped(args, device, results, repr(error))
        if args.workdir is None:
            shutil.rmtree(workdir)
        raise
    if args.workdir is None:
        shutil.rmtree(workdir)
    print(f"\n{tables(results, args, device)}")
    write_json(args, device, results, complete=True)
    if args.plot:
        plot(results, args.lengths, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
