"""The steps of ``compare_systems``, system by system: checked before anything is translated
(``not_measurable``), translated by fairseq-generate and scored (``translate``), its CXMI on the
split (``context_usage.py``) and its contrastive scores (``contrastive_eval.py``), and its
documents of ``--lengths`` sentences decoded each in a fresh process (``long_document_cost.py``);
and the run that takes the steps in turn (``compare_and_report``), printing and writing the
figures as they come (``comparison_report.py``).

It imports fairseq and the plugin, which ``compare_systems`` imports once its command line is
accepted.
"""
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import torch
from fairseq import utils
from tqdm import tqdm

from memory_nmt.evaluation import contrastive
from memory_nmt.pipeline.errors import InputError
from memory_nmt.pipeline.system import document_system

from . import context_usage, contrastive_eval
from .benchmarks.peak_memory import FreshProcessError, measured_in_fresh_process
from .comparison_report import UNMEASURED, plot, table, tables, unmeasured_cells, write_json
from .document_bleu import read_docids, score_documents
from .generate_texts import read_hypotheses, read_references
from .long_document_cost import load_for_decoding
from .subword_pieces import SEGMENTATIONS, dictionary_segmentation, fairseq_post_process
from .text_files import TextFileError

PLUGIN = Path(__file__).resolve().parents[1] / "memory_nmt"
ADD_POST_PROCESS = "add --post-process {0} to --generate-args"
SPEED_LINE = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s")


class ComparisonError(RuntimeError):
    """A step failed; the message names the system, the command or file, and what went wrong."""


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
    if not found:
        check_split_held(args.data, args.gen_subset)
    if len(found) != 1:
        raise ComparisonError(
            f"{args.data}: expected one {args.gen_subset}.SRC-TGT.docids, found {len(found)}; give --docids"
        )
    return str(found[0])


def check_split_held(data, split):
    """Refuse a --gen-subset of which ``data`` holds no file (SPLIT.SRC-TGT.*), naming the splits it holds."""
    held = sorted({path.name.split(".")[0] for path in Path(data).glob("*.*-*.*")})
    if split not in held:
        raise ComparisonError(f"--gen-subset {split}: {data} holds no split {split!r} (it holds: "
                              f"{', '.join(held) or 'none'}); give --gen-subset one of those")


def failed(name, step, log, stderr):
    """A ``ComparisonError`` for system ``name``'s ``step`` whose process failed: the last line it
    printed (its error, which the plugin's tools print on one line) and its log, where the rest is."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return ComparisonError(f"{name}: {step} failed: {lines[-1] if lines else 'it printed nothing'} (its log: {log})")


def check_checkpoint_kept(name, path):
    """Refuse to go on with system ``name`` once its checkpoint is gone (removed or moved during the run)."""
    if not Path(path).is_file():
        raise ComparisonError(f"{name}: its checkpoint {path} is gone (it was there when the comparison began): "
                              "put it back, and run the comparison again")


@contextmanager
def named_errors(name, kind=InputError):
    """The plugin's errors of ``kind`` (by default any about what the user gave: data, options) as a
    ``ComparisonError`` naming ``name``, the system or the option they come from."""
    try:
        yield
    except kind as error:
        raise ComparisonError(f"{name}: {error}") from None


def check_segmentation(args, name, path, cfg, task, items):
    """System ``name``'s data segmented into subword pieces (``subword_pieces.dictionary_segmentation``)
    must be undone by fairseq-generate (its ``--post-process``, or its ``--bpe``) before BLEU, and the
    contrastive ``items`` it scores (None: none) read as its data was segmented
    (``contrastive_eval.check_model_reads``)."""
    segmentation = dictionary_segmentation(task.target_dictionary)
    undone = {fairseq_post_process(cfg.common_eval.post_process), cfg.bpe._name if cfg.bpe else None}
    if segmentation and segmentation not in undone:
        raise ComparisonError(
            f"{name}: its target dictionary holds {SEGMENTATIONS[segmentation]} pieces, which fairseq-generate "
            f"would leave in its translations: {ADD_POST_PROCESS.format(segmentation)}"
        )
    if items is not None:
        with named_errors(name, contrastive.ContrastiveDataError):
            contrastive_eval.check_model_reads(path, task, items, args.spm_model)


def not_measurable(args, name, path, items):
    """What system ``name`` is not measured on, and why ({"cxmi" or "contrastive": reason}; see
    ``compare_systems``' doc), read from its model with its ``--model-overrides``; the split is loaded and
    batched for it as fairseq-generate will, and its segmentation checked against the options and
    the contrastive ``items`` (``check_segmentation``), so that what would stop its translation or
    spoil its scores stops the comparison before anything is translated."""
    with named_errors(name):
        cfg, task, model = load_for_decoding([args.data, *decoding_options(args, name, path)])
        task.load_dataset(args.gen_subset)
        task.get_batch_iterator(
            task.dataset(args.gen_subset), max_tokens=cfg.dataset.max_tokens, max_sentences=cfg.dataset.batch_size,
            max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        )
    choice = document_system(model).context_choice()
    check_segmentation(args, name, path, cfg, task, items if choice is None else None)  # a choice: no items scored
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
        raise failed(name, "fairseq-generate", log, done.stderr)
    speed = SPEED_LINE.search(done.stdout + done.stderr)
    if speed is None:
        raise ComparisonError(f"{name}: fairseq-generate printed no 'Translated ... sentences/s' line ({log})")
    hypotheses = read_hypotheses(str(output), len(docids), fix=ADD_POST_PROCESS)
    references = read_references(str(output), len(docids), args.reference, fix=ADD_POST_PROCESS)
    bleu = score_documents(hypotheses, references, docids)
    return {**bleu, "sentences_per_second": float(speed[4]), "generate_output": str(output)}


def contrastive_options(args):
    """contrastive_eval.py's options, from ours."""
    return SimpleNamespace(
        format=args.contrastive[0], files=args.contrastive[1:], context_size=args.context_size,
        group_size=args.group_size, moses=args.moses, bpe_codes=args.bpe_codes, spm_model=args.spm_model,
        max_tokens=4096,
    )


def contrastive_items(args):
    """The items of ``--contrastive FORMAT FILE...`` and how their text is segmented
    (``contrastive_eval.segmenter``, its sentencepiece model loaded first), or (None, None) without it."""
    if not args.contrastive:
        return None, None
    expected = contrastive_eval.FILES.get(args.contrastive[0])
    if expected is None or len(args.contrastive) - 1 != len(expected):
        raise ComparisonError(
            f"--contrastive {' '.join(args.contrastive)}: give a format and its files: "
            + "; ".join(f"{name} {' '.join(files)}" for name, files in contrastive_eval.FILES.items())
        )
    options = contrastive_options(args)
    segment = contrastive_eval.segmenter(options)
    with named_errors("--contrastive", contrastive.ContrastiveDataError):
        items = contrastive_eval.read_items(options)
        contrastive_eval.check_unsegmented(items, segment)
    return items, segment


def contrastive_scores(args, name, path, items, segment, use_cuda):
    """(accuracy, CXMI) of system ``name`` on the contrastive items, their text segmented by ``segment``
    (``contrastive_items``), each {"all" or distance: ...} (``contrastive.accuracy``,
    ``context_usage.contrastive_context_use``), or (None, None) without items."""
    if items is None:
        return None, None
    with named_errors("--contrastive", contrastive.ContrastiveDataError):
        model, task, _ = contrastive_eval.load(path, args.data, use_cuda, args.overrides.get(name))
        model_items = contrastive_eval.preprocessed(items, segment, task.cfg.source_lang, task.cfg.target_lang)
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
    """Peak memory and seconds per sentence of system ``name`` decoding one ``length``-sentence
    document (``long_document_cost.py``), in a fresh process; its log in ``workdir`` if it fails."""
    command = [sys.executable, "-m", "memory_nmt_tools.long_document_cost", str(length), args.data,
               *decoding_options(args, name, path)]
    try:
        return measured_in_fresh_process(command)
    except FreshProcessError as error:
        log = workdir / f"measure-{name}-{length}.log"
        log.write_text(error.stderr, encoding="utf-8")
        raise failed(name, f"measuring a {length}-sentence document", log, error.stderr) from None


def compare(args, workdir, device, results):
    """Measure every system into ``results`` (its figures as soon as they exist, in ``--json``
    too), after checking them all."""
    docids, (items, segment) = read_docids(docids_path(args)), contrastive_items(args)  # before translating anything
    unmeasured = {name: not_measurable(args, name, path, items) for name, path in args.systems}
    for name, reasons in unmeasured.items():
        for key, reason in reasons.items():
            print(f"==> {name}: no {UNMEASURED[key]}: {reason}", file=sys.stderr)
    use_cuda = device == "cuda"
    for name, path in args.systems:
        check_checkpoint_kept(name, path)
        figures = results[name] = {**translate(args, name, path, workdir, docids), "checkpoint": path,
                                   "model_overrides": args.overrides.get(name), "not_measured": unmeasured[name]}
        write_json(args, device, results)
        print(f"==> {name}: CXMI, contrastive items and documents of {args.lengths} sentences", file=sys.stderr,
              flush=True)
        check_checkpoint_kept(name, path)
        with named_errors(name):
            figures["cxmi"] = None if "cxmi" in unmeasured[name] else split_cxmi(args, name, path, workdir, use_cuda)
            write_json(args, device, results)
            scored = None if "contrastive" in unmeasured[name] else items
            figures["contrastive"], figures["contrastive_cxmi"] = contrastive_scores(
                args, name, path, scored, segment, use_cuda)
            write_json(args, device, results)
        figures["long_documents"] = {}
        for length in args.lengths:
            check_checkpoint_kept(name, path)
            figures["long_documents"][length] = measure_in_subprocess(args, name, path, length, workdir)
            write_json(args, device, results)
        print(f"\n{table(results, args)}\n", file=sys.stderr, flush=True)


def stopped(args, device, results, error):
    """What was measured before ``error`` stopped the comparison: its table, what it lacks, and ``--json``."""
    if not results:
        return
    systems = [name for name, _ in args.systems if name not in results]  # not in the table
    lacking = "'-' was not measured" if unmeasured_cells(results, args) else ""
    if systems:
        verb = "were" if len(systems) > 1 else "was"
        lacking += f", nor {verb} {', '.join(systems)}" if lacking else f"{', '.join(systems)} {verb} not measured"
    kept = f"; every figure above is in {args.json}" if args.json else ""
    print(f"\n{tables(results, args, device)}\nstopped by the error below{': ' if lacking else ''}{lacking}{kept}")
    write_json(args, device, results, error=error)


def compare_and_report(args):
    """Compare the systems of ``compare_systems``' parsed command line, and print (and write, and
    plot) their figures; the figures so far, and the error, if a step fails."""
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
