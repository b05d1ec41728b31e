"""The associated memory's encoder: fairseq's, whose top layer hands the encoder what its self-attention block made.

The CAMN reads x', the top encoder layer's self-attention block output (``model.py`` says where
that is in post-norm and pre-norm layers: in both, what the block hands the feed-forward block).
fairseq's encoder layer runs its two blocks in one ``forward``; ``TwoBlockEncoderLayer`` is that
layer (the same submodules and state-dict names, so every checkpoint loads as into fairseq's) with
its self-attention block as a method of its own (the feed-forward block:
``systems/layer_blocks.py``), and ``AssociatedMemoryEncoder.encode`` runs the layers itself, taking
x' between the top layer's two blocks as a value. Both are written around fairseq's submodules and
compute exactly what fairseq's encoder computes.
"""
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.models.transformer import TransformerEncoderBase
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor

from ..layer_blocks import feed_forward_block
from .context_network import ContextualAssociatedMemory


class TwoBlockEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer, its self-attention block and its feed-forward block called one after the other."""

    def self_attention_block(self, x: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
        """The residual stream after the self-attention block (after its LayerNorm, post-norm)."""
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=padding_mask, need_weights=False)
        x = self.residual_connection(self.dropout_module(x), residual)
        return x if self.normalize_before else self.self_attn_layer_norm(x)

    def forward(self, x, encoder_padding_mask: Optional[Tensor]):
        return feed_forward_block(self, self.self_attention_block(x, encoder_padding_mask))


class AssociatedMemoryEncoder(TransformerEncoderBase):
    def __init__(self, cfg, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        self.context_network = ContextualAssociatedMemory(cfg)

    def build_encoder_layer(self, cfg):
        return TwoBlockEncoderLayer(cfg)

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
        encoder_out, self_attention_output = self.encode(src_tokens, return_all_hiddens, token_embeddings)
        present = None if context_tokens is None else context_tokens.ne(self.padding_idx).any(-1)
        rows = None if present is None else present.any(1).nonzero().squeeze(1)
        if rows is None or not rows.numel():
            return encoder_out
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

    def encode(self, src_tokens, return_all_hiddens: bool,
               token_embeddings: Optional[Tensor]) -> Tuple[Dict[str, List[Tensor]], Tensor]:
        """fairseq's encoder output dict for ``src_tokens``, and the top layer's self-attention block
        output (T x B x C), x'."""
        padding = src_tokens.eq(self.padding_idx)
        padded = bool(padding.any())
        x, embedding = self.forward_embedding(src_tokens, token_embeddings)
        if padded:
            x = x * (1 - padding.unsqueeze(-1).type_as(x))
        x = x.transpose(0, 1)
        states = [x] if return_all_hiddens else []
        for layer in self.layers[:-1]:
            x = layer(x, encoder_padding_mask=padding if padded else None)
            states += [x] if return_all_hiddens else []
        self_attention_output = self.layers[-1].self_attention_block(x, padding if padded else None)
        x = feed_forward_block(self.layers[-1], self_attention_output)
        states += [x] if return_all_hiddens else []
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        lengths = src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1).contiguous()
        return {
            "encoder_out": [x],
            "encoder_padding_mask": [padding],
            "encoder_embedding": [embedding],
            "encoder_states": states,
            "fc_results": [None] * (len(states) - 1) if return_all_hiddens else [],
            "src_tokens": [],
            "src_lengths": [lengths],
        }, self_attention_output

    def embed_context(self, tokens: Tensor) -> Tensor:
        """The context's embeddings (L x P x C): scaled token embeddings for the GRU, which
        orders the words itself, or with positions added for the self-attention alone."""
        if self.context_network.reads_with_rnn:
            embedded = self.dropout_module(self.embed_scale * self.embed_tokens(tokens))
        else:
            embedded, _ = self.forward_embedding(tokens)
        return embedded.transpose(0, 1)
