"""Training speed and memory of the document systems against fairseq's ``transformer``, each in its own batches.

Every model, of the same size, trains on the same documents (synthetic ones, binarized once with
fairseq-preprocess into --workdir, or --data) at the same --max-tokens, through fairseq's own
``Trainer`` and ``train_step``: the plain transformer on fairseq's ``translation`` task (its usual
batches of similar-length sentences), the systems on the plugin's ``document_translation`` task,
each in the batches it trains on (``memory_nmt/pipeline/system.py``'s training units): the memory
model on documents in lanes that refill (--optimization-window steps per update, --lane-rows),
the concatenation model (2-to-1) and the associated memory on sentences with their context, the
local+global model on whole chunks of 20 sentences (--systems picks these three; one whose batches
cannot be made at --max-tokens, such as a chunk of 20 long sentences, is printed as not measured,
with the task's reason, and the others are measured). A row of the plain transformer on the
memory model's lanes (each sentence alone, ``--training-batches lanes``) tells the cost of the
lanes from the cost of the memory. After --warmup updates each, --updates
updates of each are timed in --repeats alternating rounds (A B C A B C ...), each model going on
through its epochs. Printed side by side, per model:

- target tokens/s (real target tokens trained on, divided by the timed seconds) and the ratio
  to the transformer's ('x plain'; the memory model's target >= 0.75, the transformer's in the
  memory model's batches >= 0.93);
- real (non-padding) tokens per forward pass, source and target together, and the padding
  fraction of the padded batches (the sentences trained on; the context a system reads with
  them counts in the arithmetic only; the memory model's target <= 0.08); forward passes per
  update;
- peak memory while training (each model in a fresh process: ``peak_memory.py``) and the ratio;
- the arithmetic each model does per target token over --updates more updates: the FLOPs of
  matrix products and attention (forward, backward and the gradient to the previous sentences;
  padding included), counted with torch's formulas (``arithmetic.py``), and the ratio
  to the transformer's ('x arith'; the memory model's target <= 1.35). At equal FLOP rates the
  tokens/s ratio cannot exceed its inverse, the 'ceiling'; 'of ceiling' is the tokens/s ratio
  over it: what a system costs by its design apart from what its implementation costs.

The memory model trains once per --gradient-reaches mode (``window``: every earlier sentence of
the window, one backward pass a window; K: exactly K sentences back, ``memory_nmt/pipeline/
truncation.py``; the first is the one the ratios and targets are for), each sending nothing into
the window before (``--gradient-across-windows drop``, the default; ``recompute`` with windows of
one step, where drop is refused), and once more for the first recomputing the window before's last
step (K steps with K) at the next window's start (``recompute``): what the reach and the
recomputation cost in speed, memory and arithmetic; with --checkpoint-activations, once more for
the first with ``--checkpoint-activations`` (every layer's forward run again in the backward pass):
what that saves in peak memory and costs; with each --variant NAME=OPTIONS, once more for the first
with those options (``--variant gated='--memory-update gated'``): what a variant of the memory costs
against it. (Passes/update counts the data's forward passes;
recomputed passes show in the time and the arithmetic.) Then the arithmetic of each memory mode but
the checkpointed one is decomposed, in units of F, the transformer's forward pass per target token
on its own batches (its forward and backward are about 3F): the transformer's forward and backward,
the padding of the memory model's batches (the transformer on them, less the transformer on its
own), the memory's reading and writing (the memory model with a reach of 0, less the transformer on
the same batches: needs 0 among --gradient-reaches) and the gradient machinery (the mode, less a
reach of 0: the backward pass through the states a window's sentences pass on, the recomputed step
with ``recompute``, and with a reach of K the gradient passes and second backward passes of
``truncation.py``).

--profile also prints where each model's time goes over --updates more updates of each: the
named parts of a step (forward, the memory's Update Attention in "sentence context", "gradient
to the previous sentence", backward, optimizer, ...) and torch.profiler's top operators.

CPU (the settings of docs/speed.md: the quickstart's 128/256 model and documents, --max-tokens 512;
about a minute), and on real documents binarized by a recipe (its WORK_DIR/data-bin):
    python scripts/benchmark_training.py [--profile]
    python scripts/benchmark_training.py --data WORK_DIR/data-bin --size medium --max-tokens 2048
GPU:
    python scripts/benchmark_training.py --device cuda --size base --max-tokens 4096 --fp16  # or --amp-bf16
"""
import argparse
import logging
import os
import shutil
import sys
import time
from contextlib import nullcontext
from typing import Dict, List, Tuple

import fairseq
import torch
from fairseq import options, tasks, utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer
from fairseq_cli import preprocess

from memory_nmt.pipeline.data import DocumentDataError, parse_window
from memory_nmt.pipeline.errors import InputError
from memory_nmt.pipeline.option_ranges import OptionError, refusing_unreadable
from memory_nmt.pipeline.samples import passes_in, read_sample
from memory_nmt.pipeline.task_config import DEFAULT_WINDOW, LANE_ROWS, DocumentTranslationConfig
from memory_nmt.pipeline.truncation import (
    DEFAULT_ACROSS_WINDOWS, WINDOW, drop_cuts_every_gradient, parse_gradient_reach,
)

from ..experiments import named_options
from ..paths import check_paths
from ..synthetic_documents import generate_documents, write_documents
from .arithmetic import ArithmeticCounter
from .options import (add_precision, as_declared, at_least, check_precision, comma_separated, precision_name,
                      refuse_missing_cuda)
from .peak_memory import (
    MiB, measured_or_exit, peak_name, peak_since, print_figures, start_peak,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN = os.path.join(ROOT, "memory_nmt")

SIZES = {  # embed_dim, ffn_dim, heads, layers (each side)
    "small": (128, 256, 4, 2),
    "medium": (256, 1024, 4, 3),
    "base": (512, 2048, 8, 6),
}
PLAIN = ["--task", "translation", "--arch", "transformer",
         "--criterion", "label_smoothed_cross_entropy", "--required-batch-size-multiple", "1"]
PLAIN_DOCUMENTS = ["--task", "document_translation", "--arch", "transformer",
                   "--criterion", "document_label_smoothed_cross_entropy", "--training-batches", "lanes"]
MEMORY = ["--task", "document_translation", "--arch", "transformer_recurrent_memory",
          "--criterion", "document_label_smoothed_cross_entropy"]
OTHER_SYSTEMS = {  # name: (row label, fairseq-train options), each in its own training batches
    "concat": ("concatenation 2-to-1", ["--task", "document_translation", "--arch", "transformer_context_concat",
                                        "--criterion", "document_label_smoothed_cross_entropy",
                                        "--source-context", "1", "--target-context", "0"]),
    "amn": ("associated memory", ["--task", "document_translation", "--arch", "transformer_associated_memory",
                                  "--criterion", "document_label_smoothed_cross_entropy", "--context-sentences", "1"]),
    "local_global": ("local+global, chunks of 20", ["--task", "document_translation", "--arch", "transformer_local_global",
                                                   "--criterion", "document_label_smoothed_cross_entropy",
                                                   "--chunk-sentences", "20"]),
}
COMPARED_WITH = ("plain", "plain_documents", "memory")  # the rows every ratio and target is over
REGIONS = (  # named by fairseq's trainer and task, and by the plugin's criterion
    "forward", "sentence context", "carry out", "gradient to the previous sentence", "backward",
    "multiply-grads", "clip-grads", "optimizer",
)


def reach_label(reach) -> str:
    return "window" if reach == WINDOW else f"reach {reach}"


def memory_row(reach, across: str) -> Tuple[str, List[str]]:
    """The memory model's row label and options with ``--gradient-reach reach`` and
    ``--gradient-across-windows across`` (named in the label where it is not the default)."""
    named = "" if across == DEFAULT_ACROSS_WINDOWS else f", {across}"
    return (f"memory, {reach_label(reach)}{named}",
            MEMORY + ["--gradient-reach", str(reach), "--gradient-across-windows", across])


def systems_of(args) -> Dict[str, Tuple[str, List[str]]]:
    """The models compared, by name: the row label and the fairseq-train options. "memory" is
    the memory model with the first of --gradient-reaches and the default across windows
    (``recompute`` where ``drop`` would cut every gradient across sentences, as the task refuses),
    "memory_recompute" the same recomputing the window before, "memory_checkpointed" the first with
    --checkpoint-activations."""
    across = {reach: "recompute" if drop_cuts_every_gradient(args.window, reach) else DEFAULT_ACROSS_WINDOWS
              for reach in args.gradient_reaches}
    first, *others = args.gradient_reaches
    systems = {
        "plain": ("transformer", PLAIN),
        "plain_documents": ("transformer, document batches", PLAIN_DOCUMENTS),
        "memory": memory_row(first, across[first]),
    }
    if first != 0 and across[first] != "recompute":  # nothing to recompute at a reach of 0
        systems["memory_recompute"] = memory_row(first, "recompute")
    label, arguments = systems["memory"]
    if args.checkpoint_activations:
        systems["memory_checkpointed"] = (f"{label}, checkpointed", arguments + ["--checkpoint-activations"])
    for name, variant_options in args.variant:
        systems[f"memory_variant_{name}"] = (f"{label}, {name}", arguments + variant_options)
    for reach in others:
        systems[f"memory_reach{reach}"] = memory_row(reach, across[reach])
    systems.update({name: OTHER_SYSTEMS[name] for name in args.systems})
    return systems


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    add_precision(parser, "bfloat16 under torch.autocast, cuda or cpu: the document task's --amp-bf16, and the "
                          "plain transformer's steps (fairseq's translation task has no such option) autocast alike "
                          "by the benchmark")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--max-tokens", type=at_least(1), default=512)
    parser.add_argument("--optimization-window", default=DEFAULT_WINDOW,
                        help="the document task's steps per update (default: %(default)s, the task's)")
    parser.add_argument("--passes-per-step", type=as_declared(DocumentTranslationConfig, "passes_per_step"),
                        default=1, help="the document task's forward passes per sentence step (see "
                        "memory_nmt/pipeline/refilled_lanes.py)")
    parser.add_argument("--lane-rows", choices=LANE_ROWS, default="packed",
                        help="the document task's rows in lanes (default: %(default)s)")
    parser.add_argument("--gradient-reaches", default="window,1,0",
                        type=comma_separated(refusing_unreadable(parse_gradient_reach)),
                        help="the memory model's --gradient-reach values to train with (comma-separated, "
                        "the first is the one the ratios are for; 0, no gradient to earlier sentences, "
                        "tells what reading and writing the memory cost from what the gradient costs)")
    parser.add_argument("--systems", default="concat,amn,local_global",
                        type=lambda text: [name for name in text.split(",") if name],
                        help=f"the other systems to train beside the transformer and the memory model, each in "
                        f"its own batches (comma-separated, of {', '.join(OTHER_SYSTEMS)}; '' for none)")
    parser.add_argument("--checkpoint-activations", action="store_true",
                        help="also train the memory model (its first row) with --checkpoint-activations, every "
                        "layer's forward run again in the backward pass: what that saves in peak memory and "
                        "costs in time and arithmetic")
    parser.add_argument("--variant", type=named_options(()),
                        action="append", default=[], metavar="NAME=OPTIONS",
                        help="also train the memory model (its first row) with these fairseq-train options, e.g. "
                        "gated='--memory-update gated': what they cost against it (repeatable)")
    parser.add_argument("--data", help="binarized documents to train on (a fairseq-preprocess "
                        "directory with train.SRC-TGT.docids) instead of synthetic ones")
    parser.add_argument("--documents", type=at_least(1), default=1000, help="synthetic training documents")
    parser.add_argument("--warmup", type=at_least(0), default=10, help="untimed updates of each model first")
    parser.add_argument("--updates", type=at_least(1), default=20, help="timed updates of each model per round")
    parser.add_argument("--repeats", type=at_least(1), default=3, help="alternating timed rounds")
    parser.add_argument("--profile", action="store_true", help="also profile both models")
    parser.add_argument("--workdir", default=os.path.join(ROOT, "runs", "benchmark_training"),
                        help="where the synthetic documents are binarized, created if missing (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--measure-peak", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    refuse_missing_cuda(parser, args.device)
    check_precision(parser, args)
    try:
        args.window = parse_window(args.optimization_window)
    except OptionError as error:
        parser.error(str(error))
    unknown = [name for name in args.systems if name not in OTHER_SYSTEMS]
    if unknown:
        parser.error(f"--systems {','.join(args.systems)}: {unknown[0]} is none of {', '.join(OTHER_SYSTEMS)}")
    check_paths(parser, inputs=[("--data", args.data, "directory", "binarized documents (a fairseq-preprocess "
                                 "directory with train.SRC-TGT.docids)")],
                workdirs=[] if args.data else [("--workdir", args.workdir)])  # the synthetic data goes there
    return args


def binarized_documents(args) -> str:
    """--data, or the synthetic training documents, binarized with their .docids, in WORKDIR."""
    if args.data:
        return args.data
    data = os.path.join(args.workdir, f"data-bin-{args.documents}-{args.seed}")
    if os.path.exists(os.path.join(data, "train.en-de.docids")):  # written last
        return data
    corpus = os.path.join(args.workdir, "corpus", "train")
    write_documents(generate_documents(args.documents, args.seed), corpus)
    shutil.rmtree(data, ignore_errors=True)
    preprocess.main(options.get_preprocessing_parser().parse_args([
        "--source-lang", "en", "--target-lang", "de", "--joined-dictionary",
        "--trainpref", corpus + ".flat", "--destdir", data, "--workers", "1",
    ]))
    shutil.copyfile(corpus + ".docids", os.path.join(data, "train.en-de.docids"))
    return data


def trainer_of(system, data, args) -> Trainer:
    """fairseq's Trainer for ``system``, configured as fairseq-train would configure it."""
    embed, ffn, heads, layers = SIZES[args.size]
    dims = []
    for side in ("encoder", "decoder"):
        dims += [f"--{side}-embed-dim", str(embed), f"--{side}-ffn-embed-dim", str(ffn),
                 f"--{side}-attention-heads", str(heads), f"--{side}-layers", str(layers)]
    system_options = systems_of(args)[system][1]
    command = [
        data, "--user-dir", PLUGIN, *dims, "--share-all-embeddings",
        "--dropout", "0.1", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "1.0",
        "--lr", "2e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100",
        "--label-smoothing", "0.1", "--max-tokens", str(args.max_tokens), "--seed", str(args.seed),
        "--num-workers", "0",
    ]
    if system not in OTHER_SYSTEMS and "document_translation" in system_options:  # in lanes; the others in their own batches
        command += ["--optimization-window", args.optimization_window,
                    "--passes-per-step", str(args.passes_per_step), "--lane-rows", args.lane_rows]
    command += {"cpu": ["--cpu"], "cuda": []}[args.device]
    command += ["--fp16"] if args.fp16 else []
    command += ["--amp-bf16"] if args.amp_bf16 and "document_translation" in system_options else []
    command += system_options  # last: a --variant's own --optimization-window or --max-tokens wins
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), command))
    utils.import_user_module(cfg.common)
    utils.set_torch_seed(args.seed)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    return Trainer(cfg, task, model, task.build_criterion(cfg.criterion))


class Batches:
    """A trainer's training batches, epoch after epoch, with what each holds. The first epoch is
    planned at once: batches that cannot be made (a chunk wider than --max-tokens) are refused
    here, with the task's ``DocumentDataError``, before anything is timed."""

    def __init__(self, trainer: Trainer, args):
        self.trainer = trainer
        self.epoch = 0
        self.iterator = self.next_epoch()
        # --amp-bf16 for a trainer whose task does not autocast (fairseq's translation task): the device to autocast on
        self.autocast_on = args.device if args.amp_bf16 and not getattr(trainer.task.cfg, "amp_bf16", False) else None

    def precision(self):
        """What each training step runs under here: autocast in bfloat16 where the benchmark does it for the task."""
        return torch.autocast(self.autocast_on, dtype=torch.bfloat16) if self.autocast_on else nullcontext()

    def next_epoch(self):
        self.epoch += 1
        epoch_itr = self.trainer.get_train_iterator(self.epoch)
        self.trainer.begin_epoch(self.epoch)
        return epoch_itr.next_epoch_itr(shuffle=True)

    def __next__(self):
        sample = next(self.iterator, None)
        if sample is None:
            self.iterator = self.next_epoch()
            sample = next(self.iterator)
        return sample


def contents(sample, pad) -> dict:
    """Forward passes, real target tokens, and real and padded tokens (both sides) of a batch."""
    batch = read_sample(sample)  # None: fairseq's own batch (--task translation)
    passes = [rows.batch for rows in passes_in(batch)] if batch is not None else [sample]
    counts = {"passes": len(passes), "target": 0, "real": 0, "padded": 0}
    for rows in passes:
        for tokens in (rows["net_input"]["src_tokens"], rows["target"]):
            counts["real"] += int(tokens.ne(pad).sum())
            counts["padded"] += tokens.numel()
        counts["target"] += rows["ntokens"]
    return counts


def train_updates(trainer, batches, updates, device, totals=None) -> float:
    """Seconds for ``updates`` updates; adds each batch's ``contents`` to ``totals``."""
    pad = trainer.task.target_dictionary.pad()
    seconds = 0.0
    for _ in range(updates):
        sample = next(batches)
        if totals is not None:
            for key, value in contents(sample, pad).items():
                totals[key] = totals.get(key, 0) + value
        start = time.perf_counter()
        with batches.precision():
            trainer.train_step([sample])
        if device == "cuda":
            torch.cuda.synchronize()
        seconds += time.perf_counter() - start
    return seconds


def measure_peak(args):
    """(Subprocess mode.) Train one model; print its peak memory during the updates as JSON."""
    trainer = trainer_of(args.measure_peak, binarized_documents(args), args)
    batches = Batches(trainer, args)
    train_updates(trainer, batches, 1, args.device)
    before = start_peak(args.device)
    train_updates(trainer, batches, args.updates, args.device)
    print_figures({"peak_bytes": peak_since(args.device, before)})


def peak_in_subprocess(args, system) -> int:
    """Peak bytes of training ``system`` (``measure_peak``), measured in a fresh process; the
    command ends with its message if that process fails."""
    return measured_or_exit(
        [sys.executable, "-m", "memory_nmt_tools.benchmarks.training", *args.argv, "--measure-peak", system]
    )["peak_bytes"]


def flops_per_target_token(trainer, batches, args) -> float:
    """Matrix-product and attention FLOPs per target token over ``args.updates`` updates."""
    totals = {}
    with ArithmeticCounter() as counter:
        train_updates(trainer, batches, args.updates, args.device, totals)
    return counter.flops / totals["target"]


def forward_flops_per_target_token(trainer, batches, args) -> float:
    """F: the FLOPs of the model's forward pass alone per target token, over ``args.updates`` of
    its batches (the plain transformer's on fairseq's batches: the unit of the decomposition)."""
    model, target, device = trainer.model, 0, torch.device(args.device)
    with torch.no_grad(), ArithmeticCounter() as counter:
        for _ in range(args.updates):
            sample = utils.apply_to_sample(lambda t: t.to(device), next(batches))
            model(**sample["net_input"])
            target += sample["ntokens"]
    return counter.flops / target


def decomposition(flops: Dict[str, float], forward: float, systems) -> str:
    """Each memory mode's arithmetic per target token in parts, in units of F (``forward``)."""
    modes = [name for name in systems
             if name.startswith("memory") and name not in ("memory_reach0", "memory_checkpointed")]
    parts = [("the transformer's forward and backward", lambda mode: flops["plain"])]
    parts.append(("padding of the memory model's batches", lambda mode: flops["plain_documents"] - flops["plain"]))
    if "memory_reach0" in flops:
        parts.append(("the memory, read and written", lambda mode: flops["memory_reach0"] - flops["plain_documents"]))
        parts.append(("the gradient to earlier sentences", lambda mode: flops[mode] - flops["memory_reach0"]))
    else:
        parts.append(("the memory and the gradient to earlier sentences",
                      lambda mode: flops[mode] - flops["plain_documents"]))
    width = max(len(name) for name, _ in parts) + 2
    column = max(26, *(len(systems[mode][0]) + 2 for mode in modes))
    lines = [f"arithmetic per target token in F = {forward / 1e6:.2f} MFLOP, the transformer's forward pass per "
             "target token on its own batches:",
             f"  {'part':<{width}}" + "".join(f"{systems[mode][0]:>{column}}" for mode in modes)]
    for name, part in parts:
        lines.append(f"  {name:<{width}}" + "".join(f"{part(mode) / forward:>{column}.2f}" for mode in modes))
    totals = [f"{flops[mode] / forward:.2f} ({flops[mode] / flops['plain']:.2f}x)" for mode in modes]
    lines.append(f"  {'total':<{width}}" + "".join(f"{total:>{column}}" for total in totals))
    return "\n".join(lines)


def profile(system, trainer, batches, args):
    """Where ``args.updates`` more updates of ``trainer`` spend their time: the named parts of
    a training step (fairseq's and the criterion's), then torch.profiler's top operators."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if args.device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    totals = {}
    with torch.profiler.profile(activities=activities) as profiler:
        seconds = train_updates(trainer, batches, args.updates, args.device, totals)
    averages = {event.key: event for event in profiler.key_averages()}
    print(f"\nprofile of {systems_of(args)[system][0]}: {args.updates} updates, {seconds:.2f} s, {totals['target']} "
          f"target tokens, {totals['passes']} forward passes")
    print(f"  {'part of the step':<36}{'calls':>7}{'cpu s':>9}{'share':>8}" + ("  cuda s" if args.device == "cuda" else ""))
    for region in REGIONS:
        if region in averages:
            event = averages[region]
            row = f"  {region:<36}{event.count:>7}{event.cpu_time_total / 1e6:>9.2f}{event.cpu_time_total / 1e6 / seconds:>8.1%}"
            if args.device == "cuda":
                row += f"{event.device_time_total / 1e6:>8.2f}"
            print(row)
    sort = "self_cuda_time_total" if args.device == "cuda" else "self_cpu_time_total"
    print(profiler.key_averages().table(sort_by=sort, row_limit=12))


def batches_of(systems, data, args):
    """The batches (and with them the trainer) of each of ``systems`` that can train at
    --max-tokens, by name, and why each other one cannot (the task's message); a row of
    COMPARED_WITH that cannot stops the run with it, as does any row whose options are refused."""
    batches, unmeasured = {}, {}
    for system in systems:
        try:
            batches[system] = Batches(trainer_of(system, data, args), args)
        except DocumentDataError as error:
            if system in COMPARED_WITH:
                raise
            unmeasured[system] = str(error)
    return batches, unmeasured


def main(argv=None):
    args = parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # fairseq's INFO lines would bury the table
    data = binarized_documents(args)
    if args.measure_peak:
        return measure_peak(args)
    systems = systems_of(args)
    try:
        batches, unmeasured = batches_of(systems, data, args)
    except InputError as error:  # the task's or a system's refusal of what the command line gives
        sys.exit(f"{os.path.basename(sys.argv[0])}: error: {error}")
    trainers = {system: measured.trainer for system, measured in batches.items()}
    for system, trainer in trainers.items():
        train_updates(trainer, batches[system], args.warmup, args.device)
    seconds = dict.fromkeys(trainers, 0.0)
    totals = {system: {} for system in trainers}
    for _ in range(args.repeats):
        for system, trainer in trainers.items():
            seconds[system] += train_updates(trainer, batches[system], args.updates, args.device, totals[system])
    peaks = {system: peak_in_subprocess(args, system) for system in trainers}
    flops = {system: flops_per_target_token(trainer, batches[system], args) for system, trainer in trainers.items()}
    forward = forward_flops_per_target_token(trainers["plain"], batches["plain"], args)

    embed, ffn, heads, layers = SIZES[args.size]
    threads = f", {torch.get_num_threads()} threads" if args.device == "cpu" else ""
    gpu = f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""
    print(f"device {args.device}{gpu}{threads}, {precision_name(args)}; torch {torch.__version__}, fairseq {fairseq.__version__}")
    documents = args.data or f"{args.documents} synthetic documents"
    print(f"model {embed}/{ffn}, {heads} heads, {layers}+{layers} layers ({args.size}); "
          f"{documents}; --max-tokens {args.max_tokens}; lanes: --optimization-window "
          f"{args.optimization_window}, --lane-rows {args.lane_rows}, --passes-per-step {args.passes_per_step}")
    print(f"{args.repeats} alternating rounds of {args.updates} updates each, after {args.warmup} warm-up updates; "
          f"peak = {peak_name(args.device)} over {args.updates} updates, a fresh process each; "
          f"FLOPs of matrix products and attention over {args.updates} more updates\n")
    print("memory: transformer_recurrent_memory with --gradient-reach window or K, nothing sent into the window "
          "before (--gradient-across-windows drop, the default) unless 'recompute'; 'x plain' columns: tokens/s "
          "and peak memory over the transformer's; 'x arith': arithmetic per target token over the transformer's; "
          "'ceiling': 1 / x arith, the tokens/s ratio its arithmetic allows at equal FLOP rates; 'of ceiling': "
          "x plain over the ceiling\n")
    header = ("model", "tgt tok/s", "x plain", "real tok/pass", "padding", "passes/upd", "peak MiB", "x plain",
              "MFLOP/tgt tok", "x arith", "ceiling", "of ceiling")
    print(f"  {header[0]:<32}" + "".join(f"{h:>14}" for h in header[1:]))
    rate = {system: totals[system]["target"] / seconds[system] for system in trainers}
    for system, (label, _) in systems.items():
        if system in unmeasured:
            print(f"  {label:<32}  not measured at --max-tokens {args.max_tokens}: {unmeasured[system]}; give it "
                  f"a larger --max-tokens in a run of its own (--systems {system})")
            continue
        t = totals[system]
        speed, arithmetic = rate[system] / rate["plain"], flops[system] / flops["plain"]
        row = (f"{rate[system]:.0f}", f"{speed:.3f}", f"{t['real'] / t['passes']:.0f}",
               f"{1 - t['real'] / t['padded']:.3f}", f"{t['passes'] / (args.repeats * args.updates):.2f}",
               f"{peaks[system] / MiB:.1f}", f"{peaks[system] / peaks['plain']:.3f}", f"{flops[system] / 1e6:.2f}",
               f"{arithmetic:.3f}", f"{1 / arithmetic:.3f}", f"{speed * arithmetic:.3f}")
        print(f"  {label:<32}" + "".join(f"{cell:>14}" for cell in row))
    padding = 1 - totals["memory"]["real"] / totals["memory"]["padded"]
    print(f"\n  {systems['memory'][0]}/plain: tokens/s {rate['memory'] / rate['plain']:.3f} (target >= 0.75), "
          f"arithmetic {flops['memory'] / flops['plain']:.3f} (target <= 1.35), padding {padding:.3f} "
          f"(target <= 0.08), peak memory {peaks['memory'] / peaks['plain']:.3f}")
    print(f"  the transformer in the memory model's batches/plain: tokens/s "
          f"{rate['plain_documents'] / rate['plain']:.3f} (target >= 0.93)")
    if "memory_checkpointed" in trainers:
        checkpointed, padded = "memory_checkpointed", totals["memory_checkpointed"]
        print(f"  {systems[checkpointed][0]}/{systems['memory'][0]}: peak memory "
              f"{peaks[checkpointed] / peaks['memory']:.3f}, tokens/s {rate[checkpointed] / rate['memory']:.3f}, "
              f"arithmetic {flops[checkpointed] / flops['memory']:.3f} (every layer's forward again; padding "
              f"{1 - padded['real'] / padded['padded']:.3f})")
    for name, _ in args.variant:
        variant = f"memory_variant_{name}"
        if variant in trainers:
            print(f"  {systems[variant][0]}/{systems['memory'][0]}: tokens/s {rate[variant] / rate['memory']:.3f}, "
                  f"arithmetic {flops[variant] / flops['memory']:.3f}, peak memory {peaks[variant] / peaks['memory']:.3f}")
    for system in (name for name in args.systems if name in trainers):
        speed, arithmetic = rate[system] / rate["plain"], flops[system] / flops["plain"]
        print(f"  {systems[system][0]}/plain: tokens/s {speed:.3f}, arithmetic {arithmetic:.2f}, so "
              f"{speed * arithmetic:.3f} of the speed its arithmetic allows")
    print("\n" + decomposition(flops, forward, {system: systems[system] for system in trainers}))
    if args.profile:
        for system, trainer in trainers.items():
            profile(system, trainer, batches[system], args)


if __name__ == "__main__":
    main()
