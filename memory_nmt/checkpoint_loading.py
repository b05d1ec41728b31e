"""Lets fairseq load its own checkpoints under torch >= 2.6.

torch 2.6 made ``torch.load`` default to ``weights_only=True``, which refuses the
``argparse.Namespace`` and omegaconf objects every fairseq checkpoint holds, and fairseq
0.12.x calls ``torch.load`` without saying otherwise. Importing this plugin (``--user-dir
memory_nmt`` or ``import memory_nmt``) gives fairseq's checkpoint module a ``torch`` whose
``load`` defaults to ``weights_only=False``; every other ``torch.load`` in the process is left
as it is. Only load checkpoints you trust: unpickling can run code.
"""
import functools
import types

import torch
from fairseq import checkpoint_utils


class _TorchLoadingFairseqCheckpoints(types.ModuleType):
    """``torch`` as fairseq's checkpoint code sees it: the same module, but ``load`` trusts the file."""

    def __init__(self):
        super().__init__("torch")
        self.load = functools.partial(torch.load, weights_only=False)

    def __getattr__(self, name):
        return getattr(torch, name)


def allow_fairseq_checkpoints():
    """Make ``fairseq.checkpoint_utils`` load full checkpoints (idempotent)."""
    if not isinstance(checkpoint_utils.torch, _TorchLoadingFairseqCheckpoints):
        checkpoint_utils.torch = _TorchLoadingFairseqCheckpoints()
