"""Lets fairseq load its checkpoints under torch >= 2.6, names a file that is not one, refuses another system's.

torch 2.6 made ``torch.load`` default to ``weights_only=True``, which refuses the
``argparse.Namespace`` and omegaconf objects every fairseq checkpoint holds, and fairseq
0.12.x calls ``torch.load`` without saying otherwise. Importing this plugin (``--user-dir
memory_nmt`` or ``import memory_nmt``) gives fairseq's checkpoint module a ``torch`` whose
``load`` reads with ``weights_only=False``; every other ``torch.load`` in the process is left
as it is. Only load checkpoints you trust: unpickling can run code.

That ``load`` also refuses, naming the file, one that is empty or cut short (a copy or a run
interrupted while writing it), or that torch wrote but fairseq did not (no ``model`` in it),
where fairseq would fail with ``EOFError``, ``UnpicklingError``, ``OSError`` or
``KeyError: 'best_loss'`` from deep inside its loader.

fairseq-train's trainer loads a checkpoint (``--finetune-from-model``, or the run it resumes)
inside a ``try`` that turns any error into "please ensure that the architectures match", with
both tracebacks. Before that, the plugin reads what the checkpoint holds (its tensors mapped,
not read) and refuses, on one line, another system's (``systems/checkpoint_fit.check_system``) and one
built with other model options that does not fit (``check_options``, which names them).
"""
import functools
import os
import pickle
import types
import zipfile

import torch
from fairseq import checkpoint_utils
from fairseq.trainer import Trainer

from .pipeline.errors import InputError
from .systems.checkpoint_fit import check_options, check_system


class CheckpointFileError(InputError):
    """A file given as a checkpoint is not a whole fairseq checkpoint; the message names it."""


def load_checkpoint_file(f, *args, **kwargs):
    """``torch.load`` of a fairseq checkpoint (an open file or a path), trusting its contents."""
    name = getattr(f, "name", f)
    try:
        state = torch.load(f, *args, weights_only=False, **kwargs)
    except (EOFError, OSError, RuntimeError, pickle.UnpicklingError) as error:
        raise CheckpointFileError(
            f"{name}: cannot be read as a checkpoint ({type(error).__name__}: {error}); an empty or "
            "cut-short file (a copy, or a run stopped while writing it): copy or write it again"
        ) from error
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointFileError(
            f"{name}: torch can read it, but it is not a fairseq checkpoint (no 'model' in it): give a "
            "checkpoint that fairseq-train wrote (checkpoint_best.pt, checkpoint_last.pt, ...)"
        )
    return state


class _TorchLoadingFairseqCheckpoints(types.ModuleType):
    """``torch`` as fairseq's checkpoint code sees it: the same module, but ``load`` trusts the file."""

    def __init__(self):
        super().__init__("torch")
        self.load = load_checkpoint_file

    def __getattr__(self, name):
        return getattr(torch, name)


def starts_from_weights(checkpoint_cfg, filename: str, reset_optimizer: bool) -> bool:
    """Whether fairseq-train takes only the weights of ``filename``: --finetune-from-model, or
    fairseq's older idiom for it, --restore-file with --reset-optimizer and --reset-dataloader (a
    resume with --reset-optimizer alone goes on with the run's epoch and updates)."""
    finetuned = checkpoint_cfg.finetune_from_model
    if finetuned and os.path.exists(finetuned) and os.path.samefile(finetuned, filename):
        return True
    return reset_optimizer and checkpoint_cfg.reset_dataloader


def allow_fairseq_checkpoints():
    """Make ``fairseq.checkpoint_utils`` load full checkpoints, and fairseq's trainer refuse another
    system's (idempotent)."""
    if not isinstance(checkpoint_utils.torch, _TorchLoadingFairseqCheckpoints):
        checkpoint_utils.torch = _TorchLoadingFairseqCheckpoints()
    fairseq_load = Trainer.load_checkpoint
    if getattr(fairseq_load, "checks_the_system", False):
        return

    @functools.wraps(fairseq_load)
    def load_checkpoint(self, filename, reset_optimizer=False, *args, **kwargs):
        if os.path.isfile(filename):
            state = load_checkpoint_file(filename, map_location="cpu", mmap=zipfile.is_zipfile(filename))
            saved_with = (state.get("cfg") or {}).get("model") or state.get("args")
            resumed_from = (None if starts_from_weights(self.cfg.checkpoint, filename, reset_optimizer)
                            else "--save-dir" if self.cfg.checkpoint.restore_file == "checkpoint_last.pt"
                            else "--restore-file")
            check_system(filename, saved_with, state["model"], self.get_model(), self.cfg.model, resumed_from)
            check_options(filename, saved_with, state["model"], self.get_model(), self.cfg.model)
        return fairseq_load(self, filename, reset_optimizer, *args, **kwargs)

    load_checkpoint.checks_the_system = True
    Trainer.load_checkpoint = load_checkpoint
