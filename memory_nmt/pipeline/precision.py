"""fairseq's precision options where the document task meets them: a precision the run cannot
train in is refused on one line, before fairseq builds its trainer, and one that decoding does not
use is named.

What fairseq 0.12 does with them, and the task therefore checks:

- ``--fp16`` (``--memory-efficient-fp16`` implies it) halves the model wherever it runs. Without a
  CUDA GPU (``--cpu``, or none visible) fairseq-train's fp16 optimizer asks CUDA for a device and
  fails ("Torch not compiled with CUDA enabled"); with ``--fp16-no-flatten-grads`` or
  ``--memory-efficient-fp16`` it does not ask, and trains a float16 model on the CPU. Training in
  float16 is refused there: it is a GPU's precision (fairseq-generate ``--fp16`` still decodes
  in float16 wherever it runs).
- ``--bf16`` (``--memory-efficient-bf16`` implies it) is TPU training in fairseq 0.12: its
  options set ``--tpu``, and fairseq-train asks torch_xla for its device ("'NoneType' object has
  no attribute 'xla_device'" where torch_xla is not installed); such a run is refused, naming
  ``--amp-bf16`` (below), and ``--fp16`` and ``--amp`` on a GPU. fairseq-generate and fairseq-interactive do nothing with it
  (they halve a model only for ``--fp16``, and run on the GPU or the CPU): they decode in
  float32, and the task says so in a warning.

The document task's ``--amp-bf16`` is bfloat16 that runs on a CUDA GPU and on the CPU: training's
forward and backward passes and decoding run under ``torch.autocast`` in bfloat16 (``autocast``),
while the weights, the gradients and the optimizer stay in float32; bfloat16 keeps float32's range,
so no loss scaler is needed. Validation runs in float32, as fairseq validates with ``--amp``. It
goes with none of fairseq's precisions (``--fp16``, ``--bf16``, ``--amp``), which are refused beside it.
"""
import importlib.util
import logging
from contextlib import nullcontext

import torch
from fairseq.optim.amp_optimizer import AMPOptimizer

from .option_ranges import OptionError
from .task_config import from_the_run

logger = logging.getLogger(__name__)

PRECISION_OPTIONS = ("amp_bf16", "fp16", "memory_efficient_fp16", "bf16", "memory_efficient_bf16", "amp", "tpu", "cpu")


def given(options: dict, *names: str) -> str:
    """The flag of the first of ``names`` given, the most specific first (--memory-efficient-fp16
    before the --fp16 it implies)."""
    return next(f"--{name.replace('_', '-')}" for name in names if options.get(name))


def check_training_precision(options: dict):
    """Refuse fairseq-train's precision ``options`` (``PRECISION_OPTIONS``: name to value, None
    where unknown) where this machine cannot train in it."""
    if options.get("amp_bf16") and any(options.get(name) for name in ("fp16", "bf16", "amp", "tpu")):
        flag = given(options, "memory_efficient_fp16", "fp16", "memory_efficient_bf16", "bf16", "amp", "tpu")
        raise OptionError(f"--amp-bf16 with {flag}: give one precision (--amp-bf16 computes in bfloat16 on a "
                          "CUDA GPU or the CPU, its weights in float32)")
    if options.get("bf16") or options.get("tpu"):
        if importlib.util.find_spec("torch_xla") is None:
            flag = given(options, "memory_efficient_bf16", "bf16", "tpu")
            tpu = (f"fairseq 0.12 trains in bfloat16 only on a TPU ({flag} sets --tpu)" if flag != "--tpu"
                   else "fairseq trains on a TPU")
            raise OptionError(
                f"{flag}: {tpu}, through torch_xla, which is not installed; give --amp-bf16 to train in bfloat16 on "
                f"a CUDA GPU or the CPU, --fp16 or --amp to train in float16 on a CUDA GPU, or leave out {flag} to "
                "train in float32"
            )
    elif options.get("fp16") and (options.get("cpu") or not torch.cuda.is_available()):
        flag = given(options, "memory_efficient_fp16", "fp16")
        raise OptionError(
            f"{flag}: training in float16 needs a CUDA GPU, and this run has none ("
            f"{'--cpu' if options.get('cpu') else 'no GPU is visible'}); leave out {flag} to train in float32 "
            "on the CPU"
        )


def warn_of_decoding_precision(options: dict):
    """Name a --bf16 that fairseq-generate, fairseq-interactive or the hub does not decode in."""
    if options.get("bf16"):
        flag = given(options, "memory_efficient_bf16", "bf16")
        logger.warning(
            "%s is not used in decoding: fairseq decodes in float32 with it (fairseq 0.12's --bf16 is TPU "
            "training); give --amp-bf16 to decode in bfloat16 (on a CUDA GPU or the CPU), or --fp16 to decode in "
            "float16 on a CUDA GPU", flag,
        )


def autocast(amp_bf16: bool, optimizer, device: torch.device):
    """The precision a training step or a decoding step on ``device`` runs in: bfloat16 for
    ``--amp-bf16``, float16 for fairseq's ``--amp`` (its ``AMPOptimizer``), else as the model is."""
    if amp_bf16:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if isinstance(optimizer, AMPOptimizer):
        return torch.autocast("cuda")
    return nullcontext()


def loss_scale_of(optimizer) -> float:
    """The factor fairseq's ``optimizer.backward`` multiplies the loss by (fp16, AMP), else 1."""
    if isinstance(optimizer, AMPOptimizer):
        return float(optimizer.scaler.get_scale())
    scaler = getattr(optimizer, "scaler", None)
    return float(scaler.loss_scale) if scaler is not None else 1.0


def run_precision(cfg) -> dict:
    """The run's precision options, as the task's config ``cfg`` has them (``PRECISION_OPTIONS``), None
    where it has none."""
    return {name: from_the_run(cfg, name) for name in PRECISION_OPTIONS}
