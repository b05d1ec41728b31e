"""The Contextual Associated Memory Network (CAMN; Jiang et al., section 4.3) that turns a sentence's context into its encoder output.

It reads, for the rows of a batch that have context: the current sentence's self-attention
output x' (the top encoder layer's, eq. 5), the encoder's output H_source, and the embedded
context sequences (one per row when the context sentences are joined, one per context sentence
when they are read in parallel; ``model.py`` embeds and selects them). In pre-norm layers
(``--encoder-normalize-before``) no layer norm ends the self-attention block: the CAMN reads the
residual stream there through a LayerNorm of its own (``source_layer_norm``, only in pre-norm
models) into x' (``model.py`` says why). Its parts:

- ``ContextEncoder`` (eq. 6-7): a unidirectional single-layer GRU over the context's embeddings
  (eq. 7, "the hidden state at each time step can represent the relation from the first word to
  the current word", is a forward recurrence; a GRU as in Wang et al.'s document RNN, which
  section 4.2 follows), of the embedding's size, then one multi-head self-attention block
  (attention, residual, LayerNorm: the paper's post-norm block, in pre-norm models too, so that
  c' is normalised as x' is) giving c'. The context is
  right-padded, so a forward GRU's states at real words never depend on the padding after them:
  no packing is needed, and the padding is masked as keys. Without the GRU (``rnn=False``, the
  ablation "the multi-head attention works directly on the context embedding"), the block reads
  the embeddings, which then carry positions (attention alone is order-blind).
- ``InterSentenceAttention`` (eq. 10-13): multi-head attention of x' over c'. Per head, raw
  scores M_raw = (W_q x')(W_k c')^T / sqrt(d_head) (eq. 10), a softmax over the context's words
  with the padding masked (eq. 11-12), a_ij the α-weighted sum of W_v c' (eq. 13), then an
  output projection. It also returns g(M_raw_j), the mean raw score over heads, the current
  sentence's words and the context's words, padding excluded, which weights several context
  sentences read in parallel (eq. 14-15: β = softmax_j g(M_raw_j), a_i = Σ_j β_j a_ij; context
  sentences a row lacks take no part in its softmax). fairseq's ``MultiheadAttention`` does not
  return raw scores, hence a module of its own.
- ``UniformContext``: the ablation without inter-sentence attention: every word's context
  vector is the masked mean of c' over the context's words, and several context sentences weigh
  alike. The paper's ablation also gave the model a random training sentence as context; the
  CAMN reads whatever context sentences it is given, so only the attention is removed here.
- ``StackedContextEncoder``: the ablation without both (Table 3's "w/o RNN Context &
  Inter-sentence Attention") as section 6.2 describes it: "the context attention is produced by
  the word embedding of randomly selected context sentence and the context encoder with a stack
  of N multi-head attention and feed-forward layers is as the same as the source encoder". In
  place of the GRU and the self-attention block, N = ``--encoder-layers`` layers of the source
  encoder's kind (fairseq's encoder layers, its sizes, dropouts and activation) read the
  context's embeddings with positions, and every word reads the mean of their output
  (``UniformContext``). "As the same as the source encoder" is read as the same kind of stack
  with parameters of its own, as the CAMN's other parts have (sharing the source encoder's
  weights would be the other reading); in pre-norm models the stack ends, as the source
  encoder does, in a layer norm of its own.
- H_context: a_i through a feed-forward block of its own (fc1, activation, fc2, residual,
  LayerNorm, as the paper's post-norm encoder's, in pre-norm models too: H_context is
  normalised, as H_source is), "after the feed-forward operation" (section 4.3).
- ``ContextGate`` (eq. 16-17): g = σ(W_g [H_source; H_context] + b_g), H = g ⊙ H_source +
  (1 − g) ⊙ H_context, the encoder output the decoder's encoder-decoder attention reads.
  b_g starts at ``GATE_BIAS``, a gate mostly open to the source; see ``ContextGate``.

All its parameters are context parameters (``pipeline/context_parameters.py``): a plain
transformer's checkpoint lacks them, and ``two_rate_inverse_sqrt`` trains them at --context-lr.
"""
import math

import torch
from fairseq import utils
from fairseq.modules import FairseqDropout, LayerNorm, MultiheadAttention
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor, nn

from ...pipeline.context_parameters import tag_context_parameters

GATE_BIAS = 3.0


class ContextEncoder(nn.Module):
    """c' of eq. 6: the context's embeddings (K, P, C) through the GRU, then self-attention."""

    def __init__(self, embed_dim: int, attention_heads: int, dropout: float, attention_dropout: float, rnn: bool):
        super().__init__()
        self.rnn = nn.GRU(embed_dim, embed_dim) if rnn else None
        self.self_attn = MultiheadAttention(
            embed_dim, attention_heads, dropout=attention_dropout, self_attention=True
        )
        self.self_attn_layer_norm = LayerNorm(embed_dim)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def forward(self, embedded: Tensor, padding_mask: Tensor) -> Tensor:
        states = self.rnn(embedded)[0] if self.rnn is not None else embedded
        attended, _ = self.self_attn(states, states, states, key_padding_mask=padding_mask, need_weights=False)
        return self.self_attn_layer_norm(states + self.dropout_module(attended))


class StackedContextEncoder(nn.Module):
    """c' for the ablation without both the RNN and the inter-sentence attention: the context's
    embeddings (K, P, C, with positions) through a stack of encoder layers like the source's,
    pre-norm layers followed by a layer norm as in fairseq's pre-norm encoder."""

    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.ModuleList([TransformerEncoderLayerBase(cfg) for _ in range(cfg.encoder.layers)])
        self.layer_norm = LayerNorm(cfg.encoder.embed_dim) if cfg.encoder.normalize_before else None

    def forward(self, embedded: Tensor, padding_mask: Tensor) -> Tensor:
        states = embedded
        for layer in self.layers:
            states = layer(states, encoder_padding_mask=padding_mask)
        return self.layer_norm(states) if self.layer_norm is not None else states


class InterSentenceAttention(nn.Module):
    """Eq. 10-13: each word of the current sentence reads one context sequence; also g(M_raw)."""

    def __init__(self, embed_dim: int, attention_heads: int, attention_dropout: float):
        super().__init__()
        self.heads, self.head_dim = attention_heads, embed_dim // attention_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(embed_dim, embed_dim) for _ in range(4))
        for projection in (self.q_proj, self.k_proj, self.v_proj):  # as fairseq's attention
            nn.init.xavier_uniform_(projection.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.out_proj.bias)
        self.dropout_module = FairseqDropout(attention_dropout, module_name=self.__class__.__name__)

    def split_heads(self, states: Tensor) -> Tensor:
        """(T, P, C) -> (P, heads, T, head_dim)"""
        return states.view(states.size(0), states.size(1), self.heads, self.head_dim).permute(1, 2, 0, 3)

    def forward(self, query: Tensor, query_padding_mask: Tensor, context: Tensor, context_padding_mask: Tensor):
        """``query`` (S, P, C) reads ``context`` (K, P, C): a_ij (S, P, C) and g(M_raw_j) (P,)."""
        q = self.split_heads(self.q_proj(query))
        k = self.split_heads(self.k_proj(context))
        v = self.split_heads(self.v_proj(context))
        raw = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)  # (P, heads, S, K), eq. 10
        masked = raw.masked_fill(context_padding_mask[:, None, None, :], float("-inf"))
        weights = self.dropout_module(torch.softmax(masked, dim=-1))  # eq. 11-12
        attended = (weights @ v).permute(2, 0, 1, 3).reshape(query.size(0), query.size(1), -1)  # eq. 13
        real = (~query_padding_mask)[:, None, :, None] & (~context_padding_mask)[:, None, None, :]
        mean_raw = (raw * real).sum((1, 2, 3)) / (real.sum((1, 2, 3)) * self.heads)
        return self.out_proj(attended), mean_raw


class UniformContext(nn.Module):
    """Without inter-sentence attention: the mean of c' over the context's words, for every word."""

    def forward(self, query: Tensor, query_padding_mask: Tensor, context: Tensor, context_padding_mask: Tensor):
        real = (~context_padding_mask).t().unsqueeze(-1).type_as(context)  # (K, P, 1)
        mean = (context * real).sum(0) / real.sum(0)
        return mean.unsqueeze(0).expand(query.size(0), -1, -1), mean.new_zeros(mean.size(0))


class ContextGate(nn.Module):
    """Eq. 16-17. b_g starts at ``GATE_BIAS`` = 3 and W_g as fairseq's linear layers: the gate
    starts mostly open to the source (σ(3) ≈ 0.95), so a pretrained transformer's encoder output
    is kept at first when finetuning from it, and the context still gets its share and gradient.

    Measured on the quickstart's documents (docs/systems.md): started from its sentence model,
    the validation loss per token is the transformer's 0.1390 with b_g = 3 (0.1391), against
    0.1409 (b_g = 2), 0.1544 (1) and 0.2767 (0); finetuned from it for 2 epochs, b_g = 3 and 2
    both resolve every pronoun whose cue is the previous sentence, as b_g = 3 and 1 do trained
    from scratch for the quickstart's 6 epochs."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.proj = nn.Linear(2 * embed_dim, embed_dim)
        nn.init.constant_(self.proj.bias, GATE_BIAS)

    def forward(self, source: Tensor, context: Tensor) -> Tensor:
        gate = torch.sigmoid(self.proj(torch.cat([source, context], dim=-1)))
        return gate * source + (1 - gate) * context


class ContextualAssociatedMemory(nn.Module):
    """The CAMN: the gated encoder output H of rows that have context (see the module docstring).

    Sized as the encoder of ``cfg`` (a fairseq ``TransformerConfig``), with its dropouts and
    activation; ``cfg.no_context_rnn``, ``cfg.no_inter_sentence_attention`` and
    ``cfg.stacked_context_encoder`` (which comes with both) are the ablations. With pre-norm
    layers (``cfg.encoder.normalize_before``) it has ``source_layer_norm``, which turns the top
    layer's residual stream after its self-attention block into x'."""

    def __init__(self, cfg):
        super().__init__()
        embed_dim, heads = cfg.encoder.embed_dim, cfg.encoder.attention_heads
        self.source_layer_norm = LayerNorm(embed_dim) if cfg.encoder.normalize_before else None
        if cfg.stacked_context_encoder:
            self.context_encoder = StackedContextEncoder(cfg)
        else:
            self.context_encoder = ContextEncoder(
                embed_dim, heads, cfg.dropout, cfg.attention_dropout, rnn=not cfg.no_context_rnn
            )
        self.attention = (
            UniformContext() if cfg.no_inter_sentence_attention
            else InterSentenceAttention(embed_dim, heads, cfg.attention_dropout)
        )
        self.fc1 = nn.Linear(embed_dim, cfg.encoder.ffn_embed_dim)
        self.fc2 = nn.Linear(cfg.encoder.ffn_embed_dim, embed_dim)
        self.activation_fn = utils.get_activation_fn(cfg.activation_fn)
        self.activation_dropout_module = FairseqDropout(cfg.activation_dropout, module_name=self.__class__.__name__)
        self.dropout_module = FairseqDropout(cfg.dropout, module_name=self.__class__.__name__)
        self.final_layer_norm = LayerNorm(embed_dim)
        self.gate = ContextGate(embed_dim)
        tag_context_parameters(self)

    @property
    def reads_with_rnn(self) -> bool:
        return getattr(self.context_encoder, "rnn", None) is not None

    def context_vectors(
        self,
        source_states: Tensor,
        source_padding_mask: Tensor,
        context_embedded: Tensor,
        context_padding_mask: Tensor,
        present: Tensor,
    ) -> Tensor:
        """a_i (S, R, C) of eq. 15 for R rows: ``source_states`` x' (S, R, C) and its padding
        (R, S); the P context sequences embedded (K, P, C) with their padding (P, K), in the row
        order of ``present`` (R, J), true for each sequence j a row has (every row has one)."""
        rows_of = present.nonzero()[:, 0]  # the row of each sequence
        context = self.context_encoder(context_embedded, context_padding_mask)
        attended, mean_raw = self.attention(
            source_states.index_select(1, rows_of), source_padding_mask.index_select(0, rows_of),
            context, context_padding_mask,
        )
        scores = mean_raw.new_full(present.shape, float("-inf")).masked_scatter(present, mean_raw)
        beta = torch.softmax(scores, dim=1)[present]  # eq. 14, over the sequences each row has
        weighted = attended * beta.unsqueeze(-1).type_as(attended)
        return weighted.new_zeros(source_states.shape).index_add(1, rows_of, weighted)  # eq. 15 (autocast: in its type)

    def forward(
        self,
        source_states: Tensor,
        source_padding_mask: Tensor,
        source_output: Tensor,
        context_embedded: Tensor,
        context_padding_mask: Tensor,
        present: Tensor,
    ) -> Tensor:
        """H (S, R, C): ``source_output`` (H_source) gated with H_context; the other arguments
        as ``context_vectors``', except that in a pre-norm model ``source_states`` is the residual
        stream at x''s place, which ``source_layer_norm`` normalises into x'."""
        if self.source_layer_norm is not None:
            source_states = self.source_layer_norm(source_states)
        vectors = self.context_vectors(
            source_states, source_padding_mask, context_embedded, context_padding_mask, present
        )
        transformed = self.fc2(self.activation_dropout_module(self.activation_fn(self.fc1(vectors))))
        context_output = self.final_layer_norm(vectors + self.dropout_module(transformed))
        return self.gate(source_output, context_output)
