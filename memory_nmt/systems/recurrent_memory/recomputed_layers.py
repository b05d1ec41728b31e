"""``--checkpoint-activations`` for the memory model: each layer's forward runs again in the backward pass.

fairseq's own wrapper (``fairseq.modules.checkpoint_activations``) cannot serve this model: it is
PyTorch's reentrant kind, which refuses ``torch.autograd.grad`` (the criterion's hop one sentence
back, ``--gradient-reach K``), a memory layer recomputed in the backward pass would find its
memory access closed (``layers.py``: the access lives for one encoder or decoder call), and a
layer of packed rows would attend across their sentences (``pipeline/packed_attention.py``: the
masks live for one call too). So the encoder and decoder (``model.py``) build their layers without
it and wrap each one here, in PyTorch's non-reentrant checkpoint: a layer keeps only its inputs,
and recomputes the rest when the backward pass needs it, reading what its first run read: the
memory of the call that ran it (recording nothing the second time) and the masks that confined its
attention to each packed sentence. The gradients are those of the uncheckpointed model, packed
rows or not.

A wrapped layer keeps its own forward in ``precheckpoint_forward``, as fairseq's wrapper does (so
fairseq's ``unwrap_checkpoint`` undoes it), and is marked as recomputing under its masks, so that
packed rows go on (``packed_attention.why_not_confinable``).
"""
from contextlib import contextmanager
from dataclasses import replace
from typing import Optional

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ...pipeline.packed_attention import RECOMPUTES_CONFINED, confined_again, confinement_of
from .layers import MemoryAccess, MemoryLayer


def recompute_in_backward(layer: nn.Module):
    """Make ``layer`` keep only its inputs for the backward pass, which runs it again."""
    forward = layer.forward

    def checkpointed(*args, **kwargs):
        if not torch.is_grad_enabled():
            return forward(*args, **kwargs)
        return checkpoint(as_first_run(layer, forward), *args, use_reentrant=False, **kwargs)

    layer.precheckpoint_forward = forward
    layer.forward = checkpointed
    setattr(layer, RECOMPUTES_CONFINED, True)


def as_first_run(layer: nn.Module, forward):
    """``forward`` of ``layer``, which, when the backward pass runs it again, reads what the first run
    read: the masks that confined its attention, and a memory layer's memory."""
    confinement = confinement_of(layer)
    access = layer.memory_access if isinstance(layer, MemoryLayer) else None
    runs = 0

    def run(*args, **kwargs):
        nonlocal runs
        runs += 1
        if runs == 1:
            return forward(*args, **kwargs)
        with confined_again(confinement), memory_read_again(layer, access):
            return forward(*args, **kwargs)

    return run


@contextmanager
def memory_read_again(layer: nn.Module, access: Optional[MemoryAccess]):
    """While open, a memory layer reads ``access``, its first run's memory, into a record of states
    nobody reads (the first run's were passed on); nothing for another layer (``access`` None)."""
    if access is None:
        yield
        return
    outside = layer.memory_access
    layer.memory_access = replace(access, states={})
    try:
        yield
    finally:
        layer.memory_access = outside
