"""The associated memory's encoder: fairseq's, whose top layer hands the encoder what its self-attention block made.

The CAMN reads x', the top encoder layer's self-attention block output (``model.py`` says where
that is in post-norm and pre-norm layers: in both, what the block hands the feed-forward block).
fairseq's encoder layer runs its two blocks in one ``forward``; ``SelfAttentionRecordingLayer`` is
that layer (the same submodules and state-dict names, so every checkpoint loads as into fairseq's),
computed block by block (``pipeline/layer_blocks.py``), that returns the block's output as its
record; the encoder runs the plugin's pass over its layers (``pipeline/transformer_pass.py``) and
takes the top layer's record. Both compute exactly what fairseq's encoder computes.
"""
from typing import Optional, Tuple

from fairseq.models.transformer import TransformerEncoderBase
from torch import Tensor

from ...pipeline.layer_blocks import AttentionMasks, ReadingEncoderLayer, feed_forward_block, self_attention_block
from ...pipeline.transformer_pass import encoder_features
from .context_network import ContextualAssociatedMemory


class SelfAttentionRecordingLayer(ReadingEncoderLayer):
    """fairseq's encoder layer, recording what its self-attention block hands its feed-forward block."""

    def forward(self, x, encoder_padding_mask: Optional[Tensor], *, masks: Optional[AttentionMasks] = None,
                reads=None) -> Tuple[Tensor, Tensor]:
        if masks is not None or reads is not None:
            raise ValueError("the associated memory's encoder layers read their sentence alone, one a row")
        x = self_attention_block(self, x, encoder_padding_mask)
        return feed_forward_block(self, x), x


class AssociatedMemoryEncoder(TransformerEncoderBase):
    def __init__(self, cfg, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        self.context_network = ContextualAssociatedMemory(cfg)

    def build_encoder_layer(self, cfg):
        return SelfAttentionRecordingLayer(cfg)

    def forward(
        self,
        src_tokens,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        context_tokens: Optional[Tensor] = None,
    ):
        """fairseq's encoder output; where a row has context in ``context_tokens`` (B, J, L: J
        right-padded sequences per row, all padding for a sequence it lacks), its ``encoder_out`` is
        the CAMN's gated H instead of fairseq's encoder output."""
        encoder_out, records = encoder_features(self, src_tokens, token_embeddings, return_all_hiddens)
        if context_tokens is None:
            return encoder_out
        present = context_tokens.ne(self.padding_idx).any(-1)
        rows = present.any(1).nonzero().squeeze(1)
        if not rows.numel():
            return encoder_out
        self_attention_output = records[-1]  # x', the top layer's self-attention block output (T x B x C)
        present = present.index_select(0, rows)
        sequences = context_tokens.index_select(0, rows)[present]
        sequences = sequences[:, : int(sequences.ne(self.padding_idx).sum(1).max())]
        source_output = encoder_out["encoder_out"][0]
        gated = self.context_network(
            self_attention_output.index_select(1, rows),
            encoder_out["encoder_padding_mask"][0].index_select(0, rows),
            source_output.index_select(1, rows),
            self.embed_context(sequences),
            sequences.eq(self.padding_idx),
            present,
        )
        encoder_out["encoder_out"] = [source_output.index_copy(1, rows, gated)]
        return encoder_out

    def embed_context(self, tokens: Tensor) -> Tensor:
        """The context's embeddings (L x P x C): scaled token embeddings for the GRU, which
        orders the words itself, or with positions added for the self-attention alone."""
        if self.context_network.reads_with_rnn:
            embedded = self.dropout_module(self.embed_scale * self.embed_tokens(tokens))
        else:
            embedded, _ = self.forward_embedding(tokens)
        return embedded.transpose(0, 1)
