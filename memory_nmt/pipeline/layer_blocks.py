"""fairseq's transformer layers computed block by block around their own submodules, taking what a sentence reads besides itself as arguments.

fairseq's encoder and decoder layers run their blocks (self-attention, the decoder's attention to
the source, feed-forward) in one ``forward`` whose arguments fairseq fixed. The plugin needs more
between them or inside them: each packed sentence's attention confined to itself
(``packed_attention.py``: the masks come as ``AttentionMasks``), the recurrent memory read after
self-attention (``systems/recurrent_memory/layers.py``), the associated memory's view of the
self-attention block's output (``systems/associated_memory/encoder.py``), the local+global model's
previous sentence read by self-attention (``systems/local_global/decoder.py``). The blocks here
compute what fairseq's layers compute (tests/pipeline/test_transformer_pass.py), post-norm or
pre-norm, and the layers of the plugin's own are fairseq's layer classes (the same submodules and
state-dict names, so every checkpoint loads into them as into fairseq's) whose forward runs these
blocks and takes the rest as keyword arguments: a ``ReadingEncoderLayer`` or ``ReadingDecoderLayer``.
The translation transformer's configuration has none of NormFormer's scalings, which these blocks
leave out.
"""
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import Tensor


@dataclass(frozen=True)
class AttentionMasks:
    """The attention a layer's queries may not make (True: forbidden), per head as PyTorch's attention
    takes them ((rows x heads) x queries x keys): its self-attention's and, in a decoder layer, its
    attention to the source's."""

    self_attention: Tensor
    source_attention: Optional[Tensor] = None


class ReadingEncoderLayer(TransformerEncoderLayerBase):
    """An encoder layer of the plugin's own, which its subclass's ``forward`` computes."""

    def forward(self, x: Tensor, encoder_padding_mask: Optional[Tensor], *, masks: Optional[AttentionMasks] = None,
                reads: Any = None) -> Tuple[Tensor, Any]:
        """The layer's output for ``x`` and what it records of the sentence (None where nothing),
        attending under ``masks`` where given and reading ``reads``."""
        raise NotImplementedError


class ReadingDecoderLayer(TransformerDecoderLayerBase):
    """A decoder layer of the plugin's own, which its subclass's ``forward`` computes."""

    def forward(self, x: Tensor, encoder_out: Optional[Tensor] = None, encoder_padding_mask: Optional[Tensor] = None,
                incremental_state=None, prev_self_attn_state=None, prev_attn_state=None,
                self_attn_mask: Optional[Tensor] = None, self_attn_padding_mask: Optional[Tensor] = None,
                need_attn: bool = False, need_head_weights: bool = False, *, masks: Optional[AttentionMasks] = None,
                reads: Any = None) -> Tuple[Tensor, Optional[Tensor], Any]:
        """fairseq's decoder layer's arguments, and ``masks`` (which replace ``self_attn_mask`` where
        given) and ``reads``: the output, the attention weights where asked for, and what the layer
        records of the sentence (None where nothing)."""
        raise NotImplementedError


def self_attention_block(layer, x: Tensor, padding: Optional[Tensor], mask: Optional[Tensor] = None,
                         incremental_state=None, **attention_inputs) -> Tensor:
    """The residual stream after ``layer``'s self-attention block (after its LayerNorm, post-norm):
    attending under ``mask`` (a boolean mask per head, or a decoder's additive causal mask), with
    ``attention_inputs`` handed to a self-attention of the plugin's that takes more."""
    residual = x
    if layer.normalize_before:
        x = layer.self_attn_layer_norm(x)
    x, _ = layer.self_attn(query=x, key=x, value=x, key_padding_mask=padding, incremental_state=incremental_state,
                           need_weights=False, attn_mask=mask, **attention_inputs)
    x = layer.residual_connection(layer.dropout_module(x), residual)
    return x if layer.normalize_before else layer.self_attn_layer_norm(x)


def source_attention_block(layer, x: Tensor, encoded: Optional[Tensor], encoded_padding: Optional[Tensor],
                           mask: Optional[Tensor] = None, incremental_state=None, need_attn: bool = False,
                           need_head_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
    """The residual stream after a decoder ``layer``'s attention to the source ``encoded`` (none without
    one), and the attention weights where asked for. With ``mask`` (packed rows, whole sentences) the
    keys are not marked static, so that PyTorch's attention, which takes a boolean mask, computes it."""
    if layer.encoder_attn is None or encoded is None:
        return x, None
    residual = x
    if layer.normalize_before:
        x = layer.encoder_attn_layer_norm(x)
    x, attention = layer.encoder_attn(
        query=x, key=encoded, value=encoded, key_padding_mask=encoded_padding, incremental_state=incremental_state,
        static_kv=mask is None, attn_mask=mask,
        need_weights=need_attn or need_head_weights or (not layer.training and layer.need_attn),
        need_head_weights=need_head_weights,
    )
    x = layer.residual_connection(layer.dropout_module(x), residual)
    return (x if layer.normalize_before else layer.encoder_attn_layer_norm(x)), attention


def feed_forward_block(layer, x: Tensor) -> Tensor:
    """The residual stream after ``layer``'s feed-forward block, its input ``x`` (after the block's
    LayerNorm in a post-norm layer; the LayerNorm first in a pre-norm one)."""
    residual = x
    if layer.normalize_before:
        x = layer.final_layer_norm(x)
    x = layer.fc2(layer.activation_dropout_module(layer.activation_fn(layer.fc1(x))))
    x = layer.residual_connection(layer.dropout_module(x), residual)
    return x if layer.normalize_before else layer.final_layer_norm(x)


def encoder_layer_output(layer, x: Tensor, padding: Optional[Tensor], masks: Optional[AttentionMasks] = None,
                         reads: Any = None) -> Tuple[Tensor, Any]:
    """An encoder layer's output and its record: a ``ReadingEncoderLayer``'s forward with ``masks`` and
    ``reads``; fairseq's own layer's forward (no record), or its blocks under ``masks`` where given."""
    if isinstance(layer, ReadingEncoderLayer):
        return layer(x, padding, masks=masks, reads=reads)
    if masks is None:
        return layer(x, encoder_padding_mask=padding), None
    return feed_forward_block(layer, self_attention_block(layer, x, padding, masks.self_attention)), None


def decoder_layer_output(layer, x: Tensor, encoded: Optional[Tensor], encoded_padding: Optional[Tensor],
                         incremental_state=None, self_attn_mask: Optional[Tensor] = None,
                         self_attn_padding_mask: Optional[Tensor] = None, need_attn: bool = False,
                         need_head_weights: bool = False, masks: Optional[AttentionMasks] = None,
                         reads: Any = None) -> Tuple[Tensor, Optional[Tensor], Any]:
    """A decoder layer's output, attention and record, as ``encoder_layer_output`` chooses the forward;
    ``masks``, where given, replace the causal ``self_attn_mask``."""
    arguments = dict(self_attn_mask=self_attn_mask, self_attn_padding_mask=self_attn_padding_mask,
                     need_attn=need_attn, need_head_weights=need_head_weights)
    if isinstance(layer, ReadingDecoderLayer):
        return layer(x, encoded, encoded_padding, incremental_state, **arguments, masks=masks, reads=reads)
    if masks is None:
        x, attention, _ = layer(x, encoded, encoded_padding, incremental_state, **arguments)
        return x, attention, None
    x = self_attention_block(layer, x, self_attn_padding_mask, masks.self_attention, incremental_state)
    x, attention = source_attention_block(layer, x, encoded, encoded_padding, masks.source_attention,
                                          incremental_state, need_attn, need_head_weights)
    return feed_forward_block(layer, x), attention, None
