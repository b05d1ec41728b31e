"""Lets fairseq load its checkpoints under torch >= 2.6 with torch's safe unpickling, names a file that is not one, refuses another system's.

fairseq 0.12.x calls ``torch.load`` without ``weights_only``, so torch (>= 2.6) reads with its
safe unpickling, which refuses the few classes fairseq's checkpoints hold besides tensors,
containers and numbers. Importing this plugin adds exactly those to torch's allow-list
(``torch.serialization.add_safe_globals`` of ``pipeline/checkpoint_files.FAIRSEQ_CHECKPOINT_CLASSES``),
so every ``torch.load`` fairseq makes stays safe and reads fairseq's checkpoints: its checkpoint
loader's, and the one with which every data-parallel worker but the first reads the checkpoint
that the first sent it (fairseq's ``broadcast_object``, in fairseq-train's trainer).

fairseq's checkpoint loader (``fairseq.checkpoint_utils``) reads through the plugin's
``load_checkpoint_file``, which refuses on one line, naming the file, one that holds other
classes, is cut short, or was not written by fairseq (``pipeline/checkpoint_files.py``).

fairseq-train's trainer loads a checkpoint (``--finetune-from-model``, or the run it resumes)
inside a ``try`` that turns any error into "please ensure that the architectures match", with
both tracebacks. Before that, the plugin reads what the checkpoint holds (its tensors mapped,
not read) and refuses, on one line, another system's (``systems/checkpoint_fit.check_system``) and one
built with other model options that does not fit (``check_options``, which names them).
"""
import functools
import os
import types
import zipfile

import torch
from fairseq import checkpoint_utils
from fairseq.trainer import Trainer

from .pipeline.checkpoint_files import FAIRSEQ_CHECKPOINT_CLASSES, load_checkpoint_file
from .systems.checkpoint_fit import check_options, check_system


class _TorchLoadingFairseqCheckpoints(types.ModuleType):
    """``torch`` as fairseq's checkpoint code sees it: the same module, but ``load`` refuses what is not
    a fairseq checkpoint, on one line."""

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
    """Let torch's safe unpickling read fairseq's checkpoints, ``fairseq.checkpoint_utils`` refuse a file
    that is not one, and fairseq's trainer refuse another system's (idempotent)."""
    torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_CLASSES)
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
