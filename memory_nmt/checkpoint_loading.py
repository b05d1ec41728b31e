"""Lets fairseq load its own checkpoints under torch >= 2.6, and names a file that is not one.

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
"""
import pickle
import types

import torch
from fairseq import checkpoint_utils

from .pipeline.errors import InputError


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


def allow_fairseq_checkpoints():
    """Make ``fairseq.checkpoint_utils`` load full checkpoints (idempotent)."""
    if not isinstance(checkpoint_utils.torch, _TorchLoadingFairseqCheckpoints):
        checkpoint_utils.torch = _TorchLoadingFairseqCheckpoints()
