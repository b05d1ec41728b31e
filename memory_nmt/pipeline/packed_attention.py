"""Each sentence of packed rows (``packing.py``) attending only to itself, in any fairseq transformer.

fairseq's transformer layers attend over a whole row and number positions along it. For a batch of
packed rows to compute what its sentences padded one a row compute, ``confined_to_sentences``
holds, for one call of the model:

- the positions of the encoder's and the decoder's tokens restart at each sentence (the
  positional embedding of each token is looked up at its position within its sentence);
- every self-attention of the encoder's layers, and of the decoder's (causal), attends
  only to the query's own sentence, and the decoder's cross-attention only to the same sentence's
  source.

It does so from outside the model, with forward hooks it adds to the embeddings of positions and to
the attention modules of the layers and removes when the call returns, so fairseq's own
``transformer`` trains on packed rows as well as the plugin's systems; attention the layers do
besides (a memory's, ``systems/recurrent_memory``) is the system's to confine. The attentions
take a mask per row, which fairseq's ``MultiheadAttention`` passes on to PyTorch's attention in
training; its cross-attention is told its keys are not static (what matters only when decoding
step by step, which packed rows are not for).

A layer that runs forward again in the backward pass (``--checkpoint-activations``) runs after the
call's hooks are gone. fairseq's own wrapper (``checkpoint_wrapper``) would then attend across the
packed sentences: a model of such layers trains one sentence a row (``why_not_confinable``). A
layer the plugin recomputes itself (the memory model's, ``systems/recurrent_memory/
recomputed_layers.py``, marked ``RECOMPUTES_CONFINED``) takes the masks of its first run
(``confinement_of``) and runs again under them (``confined_again``).
"""
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Dict, Optional

import torch.nn.functional as F
from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import Tensor, nn

from .packing import PackedRows

POSITIONS = (SinusoidalPositionalEmbedding, LearnedPositionalEmbedding)
RECOMPUTES_CONFINED = "recomputes_confined_to_sentences"  # on a layer whose recomputation keeps the masks
# the call's attention modules, each with the hook that gives it its mask, while confined_to_sentences is open
_MASK_HOOKS_OF_THE_CALL: ContextVar[Optional[Dict[nn.Module, Callable]]] = ContextVar("mask_hooks", default=None)


def why_not_confinable(model) -> Optional[str]:
    """Why the attention of ``model`` (a fairseq encoder-decoder model, or a data-parallel wrapper
    around one) cannot be confined to packed sentences, or None when it can: every layer of its
    encoder and decoder must be fairseq's transformer layer, none of them run forward again in the
    backward pass without the masks (fairseq's ``--checkpoint-activations``: they are gone by then),
    its positions sinusoidal or learned."""
    model = unwrapped(model)
    for side, layer_type in (("encoder", TransformerEncoderLayerBase), ("decoder", TransformerDecoderLayerBase)):
        part = getattr(model, side, None)
        layers = getattr(part, "layers", None)
        if layers is None or not all(isinstance(layer, layer_type) for layer in layers):
            return f"its {side} is not made of fairseq's transformer layers"
        if any(hasattr(layer, "precheckpoint_forward") and not getattr(layer, RECOMPUTES_CONFINED, False)
               for layer in layers):  # fairseq's checkpoint_wrapper
            return (f"its {side}'s layers run forward again in the backward pass, without the masks "
                    "(fairseq's --checkpoint-activations)")
        positions = getattr(part, "embed_positions", None)
        if positions is not None and not isinstance(positions, POSITIONS):
            return f"its {side}'s positions are a {type(positions).__name__}"
    return None


def unwrapped(model):
    """The model inside fairseq's data-parallel wrappers (each holds the next in ``module``)."""
    while not hasattr(model, "encoder") and hasattr(model, "module"):
        model = model.module
    return model


def per_head(forbidden: Tensor, heads: int) -> Tensor:
    """A (rows x queries x keys) mask as PyTorch's attention takes it per row: (rows x heads) first."""
    return forbidden.repeat_interleave(heads, dim=0)


def embeddings_at(module, positions: Tensor, like: Tensor) -> Tensor:
    """``module``'s positional embeddings at ``positions`` (fairseq's numbering), as ``like``'s dtype and device."""
    if isinstance(module, LearnedPositionalEmbedding):
        return F.embedding(positions, module.weight, module.padding_idx)
    weights = module.weights
    if int(positions.max()) >= weights.size(0):
        weights = SinusoidalPositionalEmbedding.get_embedding(int(positions.max()) + 1, module.embedding_dim,
                                                              module.padding_idx)
    return weights.to(like).index_select(0, positions.reshape(-1)).view(*positions.shape, -1).detach()


@contextmanager
def confined_to_sentences(model, rows: PackedRows):
    """While open, ``model``'s encoder and decoder compute each of the packed sentences of ``rows``
    as if it were alone in its row (see the module's docstring)."""
    model = unwrapped(model)
    handles, mask_hooks = [], {}

    def positions_of(side):
        positions = getattr(rows, f"{side}_positions")

        def one_column(module, inputs):  # fairseq's own positions are not used: the cheapest valid call
            return (inputs[0][:, :1],) + tuple(inputs[1:])

        def restarted(module, inputs, output):
            return embeddings_at(module, positions, output)

        return one_column, restarted

    def confine(attention, forbidden: Tensor, cross: bool = False):
        mask = per_head(forbidden, attention.num_heads)

        def with_mask(module, args, kwargs):
            kwargs = {**kwargs, "attn_mask": mask}
            if cross:
                kwargs["static_kv"] = False
            return args, kwargs

        handles.append(attention.register_forward_pre_hook(with_mask, with_kwargs=True))
        mask_hooks[attention] = with_mask

    call = _MASK_HOOKS_OF_THE_CALL.set(mask_hooks)
    try:
        for side, part in (("source", model.encoder), ("target", model.decoder)):
            if part.embed_positions is not None:
                one_column, restarted = positions_of(side)
                handles.append(part.embed_positions.register_forward_pre_hook(one_column))
                handles.append(part.embed_positions.register_forward_hook(restarted))
        for layer in model.encoder.layers:
            confine(layer.self_attn, rows.other_sentences("source", "source"))
        for layer in model.decoder.layers:
            confine(layer.self_attn, rows.other_sentences("target", "target", causal=True))
            if layer.encoder_attn is not None:
                confine(layer.encoder_attn, rows.other_sentences("target", "source"), cross=True)
        yield
    finally:
        for handle in handles:
            handle.remove()
        _MASK_HOOKS_OF_THE_CALL.reset(call)


def confinement_of(layer: nn.Module) -> Dict[nn.Module, Callable]:
    """The hooks that confine ``layer``'s attention modules to the packed sentences of the call now
    running (none outside ``confined_to_sentences``)."""
    mask_hooks = _MASK_HOOKS_OF_THE_CALL.get() or {}
    return {module: mask_hooks[module] for module in layer.modules() if module in mask_hooks}


@contextmanager
def confined_again(confinement: Dict[nn.Module, Callable]):
    """While open, the attention modules of ``confinement`` (``confinement_of``) are confined as they
    were: a layer run again in the backward pass computes what its first run computed."""
    handles = [module.register_forward_pre_hook(hook, with_kwargs=True) for module, hook in confinement.items()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
