"""``--checkpoint-activations`` for the memory model: each layer's forward runs again in the backward pass.

fairseq's own wrapper (``fairseq.modules.checkpoint_activations``) cannot serve this model: it is
PyTorch's reentrant kind, which refuses ``torch.autograd.grad`` (the criterion's hop one sentence
back, ``--gradient-reach K``), and a memory layer recomputed in the backward pass would find its
memory access closed (``layers.py``: the access lives for one encoder or decoder call). So the
encoder and decoder (``model.py``) build their layers without it and wrap each one here, in
PyTorch's non-reentrant checkpoint: a layer keeps only its inputs, and recomputes the rest when
the backward pass needs it. A memory layer recomputes with the memory of the call that ran it,
recording nothing the second time. The gradients are those of the uncheckpointed model.

A wrapped layer keeps its own forward in ``precheckpoint_forward``, as fairseq's wrapper does, so
that what looks for checkpointed layers (``pipeline/packed_attention.py``: a packed row's masks
are gone by the backward pass) finds these too.
"""
from dataclasses import replace

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .layers import MemoryLayer


def recompute_in_backward(layer: nn.Module):
    """Make ``layer`` keep only its inputs for the backward pass, which runs it again."""
    forward = layer.forward

    def checkpointed(*args, **kwargs):
        if not torch.is_grad_enabled():
            return forward(*args, **kwargs)
        run = with_this_calls_memory(layer, forward) if isinstance(layer, MemoryLayer) else forward
        return checkpoint(run, *args, use_reentrant=False, **kwargs)

    layer.precheckpoint_forward = forward
    layer.forward = checkpointed


def with_this_calls_memory(layer: MemoryLayer, forward):
    """``forward`` of ``layer``, which, when the backward pass runs it again, reads the memory the
    first run read (into a record of states nobody reads: the first run's were passed on)."""
    access, runs = layer.memory_access, 0

    def run(*args, **kwargs):
        nonlocal runs
        runs += 1
        outside = layer.memory_access
        layer.memory_access = access if runs == 1 else replace(access, states={})
        try:
            return forward(*args, **kwargs)
        finally:
            layer.memory_access = outside

    return run
