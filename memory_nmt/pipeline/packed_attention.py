"""Each sentence of packed rows (``packing.py``) attending only to itself, in fairseq's transformer and the plugin's systems.

fairseq's transformer layers attend over a whole row and number positions along it. For a batch of
packed rows to compute what its sentences padded one a row compute, a ``Confinement`` of the rows,
handed to the encoder's and decoder's passes (``transformer_pass.py``) as an argument, gives

- the positional embedding of each token at its position within its sentence;
- every self-attention of the encoder's layers, and of the decoder's (causal), the masks that keep
  it to the query's own sentence, and the decoder's attention to the source the same sentence's
  source; PyTorch's attention takes them per row and head (fairseq's ``MultiheadAttention`` hands
  them on in training).

A system of the plugin's runs those passes itself and confines what its layers read besides
(a memory's read, ``systems/recurrent_memory``); fairseq's own model, whose forward takes no
packing, is run by ``packed_forward`` (fairseq's ``transformer`` and mBART's layers train on
packed rows too) where its passes and layers are fairseq's own (``why_not_confinable``). fairseq's
``--checkpoint-activations`` recomputes a layer by wrapping its ``forward``, which a confined pass
computes block by block without calling: such a model trains one sentence a row; the memory model
recomputes its layers' calls through the passes, masks included.
"""
from typing import Dict, Optional, Tuple

import torch.nn.functional as F
from fairseq.models.bart import BARTModel
from fairseq.models.transformer import TransformerDecoderBase, TransformerEncoderBase, TransformerModelBase
from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import Tensor

from .layer_blocks import AttentionMasks
from .packing import PackedRows
from .system import unwrapped
from .transformer_pass import decoder_features, encoder_features

POSITIONS = (SinusoidalPositionalEmbedding, LearnedPositionalEmbedding)
# fairseq's methods that ``packed_forward`` computes in its own words (``transformer_pass.py``)
PASSES = {"encoder": ("forward", "forward_scriptable", "forward_embedding"),
          "decoder": ("forward", "extract_features", "extract_features_scriptable")}
# fairseq's model passes that run the encoder, then the decoder, which ``packed_forward`` does in their stead
MODEL_PASSES = (TransformerModelBase.forward, BARTModel.forward)


def why_not_confinable(model) -> Optional[str]:
    """Why ``model`` (fairseq's encoder-decoder model, or a data-parallel wrapper around one) cannot be
    run on packed sentences by ``packed_forward``, or None when it can: its encoder and decoder must be
    fairseq's transformer's, the model's, their passes and their layers' forward fairseq's own
    (``packed_forward`` computes them), none of the layers wrapped by fairseq's
    ``--checkpoint-activations``, its positions sinusoidal or learned, and its decoder's
    self-attention not reading the source (``--cross-self-attention``)."""
    model = unwrapped(model)
    if type(model).forward not in MODEL_PASSES:
        return f"{type(model).__name__} computes its own forward"
    for side, part_type, layer_type in (("encoder", TransformerEncoderBase, TransformerEncoderLayerBase),
                                        ("decoder", TransformerDecoderBase, TransformerDecoderLayerBase)):
        part = getattr(model, side, None)
        layers = getattr(part, "layers", None)
        if not isinstance(part, part_type) or layers is None or not all(isinstance(layer, layer_type)
                                                                         for layer in layers):
            return f"its {side} is not made of fairseq's transformer layers"
        overridden = next((name for name in PASSES[side] if getattr(type(part), name) is not getattr(part_type, name)),
                          None)
        if overridden is not None:
            return f"its {side} computes its own {overridden}"
        if any(type(layer).forward is not layer_type.forward for layer in layers):
            return f"its {side}'s layers compute their own forward"
        if any(hasattr(layer, "precheckpoint_forward") for layer in layers):  # fairseq's checkpoint_wrapper
            return (f"its {side}'s layers are recomputed in the backward pass by fairseq's "
                    "--checkpoint-activations, through the forward a packed pass does not call")
        positions = getattr(part, "embed_positions", None)
        if positions is not None and not isinstance(positions, POSITIONS):
            return f"its {side}'s positions are a {type(positions).__name__}"
    if model.decoder.cross_self_attention:
        return "its decoder's self-attention reads the source (--cross-self-attention)"
    return None


class Confinement:
    """What the passes over packed ``rows`` need to compute each sentence alone: its tokens'
    positions and the layers' masks (made once a call for each number of heads)."""

    def __init__(self, rows: PackedRows):
        self.rows = rows
        self._masks: Dict[Tuple[str, int], Tensor] = {}

    def positions(self, module, side: str, like: Tensor) -> Tensor:
        """``module``'s positional embeddings of the tokens of ``side`` ("source" or "target") at their
        positions within their sentences (fairseq's numbering), as ``like``'s dtype and device."""
        positions = getattr(self.rows, f"{side}_positions")
        if isinstance(module, LearnedPositionalEmbedding):
            return F.embedding(positions, module.weight, module.padding_idx)
        weights = module.weights
        if int(positions.max()) >= weights.size(0):
            weights = SinusoidalPositionalEmbedding.get_embedding(int(positions.max()) + 1, module.embedding_dim,
                                                                  module.padding_idx)
        return weights.to(like).index_select(0, positions.reshape(-1)).view(*positions.shape, -1).detach()

    def encoder_masks(self, heads: int) -> AttentionMasks:
        return AttentionMasks(self._per_head("source", heads))

    def decoder_masks(self, heads: int, source_heads: Optional[int]) -> AttentionMasks:
        return AttentionMasks(self._per_head("target", heads),
                              None if source_heads is None else self._per_head("target to source", source_heads))

    def _per_head(self, attention: str, heads: int) -> Tensor:
        """The mask of ``attention`` ("source", "target" or "target to source"), per row and head."""
        key = (attention, heads)
        if key not in self._masks:
            if attention == "source":
                forbidden = self.rows.other_sentences("source", "source")
            elif attention == "target":
                forbidden = self.rows.other_sentences("target", "target", causal=True)
            else:
                forbidden = self.rows.other_sentences("target", "source")
            self._masks[key] = forbidden.repeat_interleave(heads, dim=0)
        return self._masks[key]


def packed_forward(model, net_input: Dict[str, Tensor], rows: PackedRows, features_only: bool = False):
    """fairseq's ``model``'s output (``(logits or features, extra)``, as its forward gives it with
    ``return_all_hiddens``) on the packed ``rows`` of ``net_input``, each sentence computed alone.
    It runs the model's encoder and decoder itself, inside fairseq's data-parallel wrappers: with
    fairseq's ``legacy_ddp``, the one the document task trains several workers with, gradients are
    reduced after the backward pass whichever modules the forward pass called."""
    model = unwrapped(model)
    confinement = Confinement(rows)
    encoder_out, _ = encoder_features(model.encoder, net_input["src_tokens"], return_all_hiddens=True,
                                      confinement=confinement)
    tokens = net_input["prev_output_tokens"]
    features, extra, _ = decoder_features(model.decoder, tokens, tokens.size(1), encoder_out,
                                          confinement=confinement)
    return (features if features_only else model.decoder.output_layer(features)), extra
