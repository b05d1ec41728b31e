"""The local+global model's decoder (Zheng et al., 2020, section 4.2): ``LocalGlobalDecoder``.

Decoder (section 4.2): fairseq's decoder whose self-attention also reads the previous target
sentence of the chunk, Transformer-XL style, with no gradient into it (``target_context.py``).
What it reads is its forward's ``reads`` (``PreviousTarget``, which the model's ``encode`` gives):
the previous sentence's row in a batch of whole chunks, or the states carried from it (sentence by
sentence). Each decoder call runs its layers itself (``pipeline/transformer_pass.py``) and hands
them the previous sentence as an argument, which each layer hands its self-attention; a call over
whole sentences returns what each layer's self-attention read (the layer's input; in pre-norm
layers, that input through the layer's ``self_attn_layer_norm``), which the model (``model.py``)
carries to the next sentence.
"""
from typing import Dict, List, Optional

from fairseq.models.transformer import TransformerDecoderBase
from torch import Tensor

from ...pipeline.context_parameters import tag_context_parameters
from ...pipeline.layer_blocks import (
    AttentionMasks,
    ReadingDecoderLayer,
    feed_forward_block,
    self_attention_block,
    source_attention_block,
)
from ...pipeline.transformer_pass import ReadingDecoder, decoder_features
from .target_context import PreviousSentence, PreviousSentenceAttention, PreviousTarget


class LocalGlobalDecoderLayer(ReadingDecoderLayer):
    """fairseq's decoder layer whose self-attention reads the previous sentence too (``reads``): its
    three blocks (self-attention, encoder attention, feed-forward) as fairseq computes them, around
    its submodules (``pipeline/layer_blocks.py``). It records nothing itself: its self-attention keeps
    what it read in ``reads``."""

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        return PreviousSentenceAttention(embed_dim, cfg.decoder.attention_heads, cfg.attention_dropout)

    def forward(self, x, encoder_out: Optional[Tensor] = None, encoder_padding_mask: Optional[Tensor] = None,
                incremental_state=None, prev_self_attn_state=None, prev_attn_state=None,
                self_attn_mask: Optional[Tensor] = None, self_attn_padding_mask: Optional[Tensor] = None,
                need_attn: bool = False, need_head_weights: bool = False, *, masks: Optional[AttentionMasks] = None,
                reads: Optional[PreviousSentence] = None):
        if prev_self_attn_state is not None or prev_attn_state is not None:
            raise ValueError("the local+global decoder layer keeps its attention states in the incremental state")
        if masks is not None:
            raise ValueError("the local+global decoder reads its previous sentence in the rows: it is not packed")
        x = self_attention_block(self, x, self_attn_padding_mask, self_attn_mask, incremental_state, previous=reads)
        x, attention = source_attention_block(self, x, encoder_out, encoder_padding_mask,
                                              incremental_state=incremental_state, need_attn=need_attn,
                                              need_head_weights=need_head_weights)
        return feed_forward_block(self, x), attention, None


class LocalGlobalDecoder(ReadingDecoder, TransformerDecoderBase):
    """fairseq's decoder of ``LocalGlobalDecoderLayer``s, each self-attention told its layer's index
    and its relative position terms tagged as context parameters."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn, output_projection=output_projection)
        for index, layer in enumerate(self.layers):
            layer.self_attn.layer = index
            tag_context_parameters(layer.self_attn.relative_positions)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return LocalGlobalDecoderLayer(cfg, no_encoder_attn)

    def extract_features(
        self,
        prev_output_tokens,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state=None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        reads: Optional[PreviousTarget] = None,
    ):
        """fairseq's decoder features, each self-attention reading the previous sentence ``reads``
        gives (None: none). On whole sentences (no ``incremental_state``) ``extra`` gains
        ``target_states`` (what each layer's self-attention read) and ``target_padding``, for the
        next sentence."""
        previous = PreviousSentence(reads if reads is not None else PreviousTarget(), record=incremental_state is None)
        new = prev_output_tokens.size(1) if incremental_state is None else 1
        features, extra, _ = decoder_features(
            self, prev_output_tokens, new, encoder_out, incremental_state, reads=previous,
            full_context_alignment=full_context_alignment, alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
        )
        if previous.record:
            extra["target_states"] = [previous.states[index] for index in range(len(self.layers))]
            extra["target_padding"] = prev_output_tokens.eq(self.padding_idx)
        return features, extra
