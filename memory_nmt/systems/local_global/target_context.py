"""The decoder's target context (Zheng et al., 2020, section 4.2): self-attention that also reads the previous sentence.

As in Transformer-XL (Dai et al., 2019), with each sentence as a segment: in every decoder layer
the self-attention of sentence k reads, before its own words, the states that layer took as
input for sentence k−1 of the chunk, with no gradient into them (stop-gradient):
``s~ = [SG(s^{l-1}_{k-1}); s^{l-1}_k]``. Their relative distances enter the scores as
Transformer-XL's do, ``(q + u) k + (q + v) W_R R_{i-j}`` with sinusoidal ``R`` and learned ``u``,
``v``, ``W_R`` (``RelativePositions``), so a word knows how far back a word of the previous sentence
lies. Choices the paper leaves open, and why:

- fairseq's absolute word positions stay in the decoder's input, restarting at every sentence
  (the relative terms add the distances across the boundary). ``u``, ``v`` and ``W_R`` start at
  zero, so with no previous sentence the layer computes what fairseq's self-attention computes (up
  to the order of float sums): a sentence-level transformer's checkpoint starts the model as that
  transformer, and a chunk's first sentence is decoded as by a sentence model with those weights.
- the previous sentence is that of the same chunk; a chunk's first sentence reads none.
- pre-norm layers (``--decoder-normalize-before``: NLLB's, mBART's): a layer's self-attention
  reads its input through the layer's ``self_attn_layer_norm``; what it reads of the previous
  sentence is what it read for that sentence (its ``query``, recorded or taken from the previous
  sentence's row), normalised by the same LayerNorm as the current sentence's states, so that the
  keys of both sentences come from states of one kind (in a post-norm layer, the layer's input
  itself, as in Transformer-XL).

Where the previous sentence's states come from, for one decoder call (``PreviousTarget``, which the
model's ``encode`` gives the decoder, and the ``PreviousSentence`` the decoder makes of it):
training on whole chunks has every sentence of a chunk in the batch, so a layer reads the
previous sentence's row of its own input (``previous_rows``), detached; decoding one sentence at a
time reads the states carried from the previous sentence (``memory``, one tensor per layer, its
words aligned to the right, next to the current sentence). A whole-sentence call records each
layer's input (``states``) for the next sentence. In incremental decoding the previous
sentence's keys and values are computed at the first step and kept with the words' own.

How it reaches the self-attention: as an argument. The decoder makes one ``PreviousSentence`` a
call and runs its layers itself (``pipeline/transformer_pass.py``), handing it to each layer, which hands
it to its self-attention (``decoder.py``); nothing of one call is left for the next. In beam search
each step is a decoder call with the ``PreviousTarget`` reordered with the beams, and the keys and
values kept from the first step are reordered with the incremental state, as fairseq's are.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq import utils
from fairseq.modules import MultiheadAttention
from fairseq.modules.sinusoidal_positional_embedding import SinusoidalPositionalEmbedding
from torch import Tensor, nn


def aligned_right(states: Tensor, padding: Optional[Tensor]):
    """``states`` (T, B, C) with each row's real words moved to the end, in order; and the padding
    mask (B, T) that goes with them. ``padding`` None: no padding."""
    if padding is None:
        return states, torch.zeros(states.size(1), states.size(0), dtype=torch.bool, device=states.device)
    order = torch.sort((~padding).long(), dim=1, stable=True).indices  # padding first, words in order
    return states.gather(0, order.t().unsqueeze(-1).expand(-1, -1, states.size(-1))), padding.gather(1, order)


@dataclass(frozen=True, eq=False)
class PreviousTarget:
    """What the decoder reads of each row's previous sentence in one sentence step (the model's
    ``encode`` gives it): in a batch of whole chunks, the row holding it (``previous_rows``, (B,),
    -1: none); sentence by sentence, the states carried from it (``memory``, per layer (M, B, C),
    aligned right, and ``memory_padding`` (B, M)); neither: no previous sentence."""

    previous_rows: Optional[Tensor] = None
    memory: Optional[List[Tensor]] = None
    memory_padding: Optional[Tensor] = None

    def reordered(self, new_order: Tensor) -> "PreviousTarget":
        """Beam search's rows ``new_order``: the carried states move with them (whole chunks are not
        decoded: their rows are dropped)."""
        if self.memory is None:
            return PreviousTarget()
        return PreviousTarget(None, [states.index_select(1, new_order) for states in self.memory],
                              self.memory_padding.index_select(0, new_order))

    def of_layer(self, layer: int, inputs: Tensor, padding: Optional[Tensor]):
        """(states (M, B, C), padding (B, M)) that layer ``layer`` reads before the sentence's own
        words, whose self-attention reads ``inputs`` (T, B, C) with ``padding`` (B, T)."""
        if self.previous_rows is not None:
            has_previous = self.previous_rows.ge(0)
            rows = self.previous_rows.clamp(min=0)
            states = inputs.detach().index_select(1, rows)
            own_padding = padding if padding is not None else torch.zeros_like(inputs[:, :, 0].t(), dtype=torch.bool)
            previous_padding = own_padding.index_select(0, rows) | ~has_previous.unsqueeze(1)
            return aligned_right(states, previous_padding)
        if self.memory is not None:
            return self.memory[layer], self.memory_padding
        return inputs.new_zeros(0, inputs.size(1), inputs.size(2)), torch.zeros(
            inputs.size(1), 0, dtype=torch.bool, device=inputs.device
        )


@dataclass
class PreviousSentence:
    """One decoder call's reading of the previous sentence: what its self-attention layers read
    (``read``) and, where ``record`` (whole sentences), what each of them read of its own sentence
    (``states``, by layer), for the next sentence."""

    read: PreviousTarget = field(default_factory=PreviousTarget)
    record: bool = False
    states: Dict[int, Tensor] = field(default_factory=dict)


class RelativePositions(nn.Module):
    """Transformer-XL's relative position terms of one attention: ``u``, ``v`` and ``W_R``, zero at first."""

    def __init__(self, embed_dim: int, heads: int):
        super().__init__()
        head_dim = embed_dim // heads
        self.content_bias = nn.Parameter(torch.zeros(heads, head_dim))  # u
        self.position_bias = nn.Parameter(torch.zeros(heads, head_dim))  # v
        self.projection = nn.Parameter(torch.zeros(embed_dim, embed_dim))  # W_R

    def projected(self, distances: int, heads: int) -> Tensor:
        """``W_R R_d`` for d = 0 .. distances-1: (distances, heads, head_dim)."""
        sinusoids = SinusoidalPositionalEmbedding.get_embedding(distances, self.projection.size(1))
        return (sinusoids.to(self.projection) @ self.projection.t()).view(distances, heads, -1)


class PreviousSentenceAttention(MultiheadAttention):
    """fairseq's decoder self-attention (its projections, so a transformer's weights load), reading
    first the states of the previous sentence it is given (``previous``); ``layer``, its index among the
    decoder's layers, is set by the decoder."""

    def __init__(self, embed_dim: int, heads: int, dropout: float):
        super().__init__(embed_dim, heads, dropout=dropout, self_attention=True)
        self.relative_positions = RelativePositions(embed_dim, heads)
        self.layer: Optional[int] = None

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor],
        value: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
        previous: Optional[PreviousSentence] = None,
    ):
        """Self-attention of ``query`` (T, B, C) over the states of the ``previous`` sentence and its
        own words (``attn_mask``: the causal mask of its own words; ``key_padding_mask``: their
        padding). Returns (output, None): no attention weights are given out."""
        if previous is None:
            raise ValueError("PreviousSentenceAttention reads the previous sentence it is given: give previous")
        length, batch, embed_dim = query.shape
        if previous.record:
            previous.states[self.layer] = query
        own_padding = key_padding_mask if key_padding_mask is not None else torch.zeros(
            batch, length, dtype=torch.bool, device=query.device
        )
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        if "prev_key" in saved:  # later incremental steps: the earlier keys were kept
            keys = torch.cat([saved["prev_key"], self._heads(self.k_proj(query))], dim=2)
            values = torch.cat([saved["prev_value"], self._heads(self.v_proj(query))], dim=2)
            padding = torch.cat([saved["prev_key_padding_mask"], own_padding], dim=1)
        else:
            memory, memory_padding = previous.read.of_layer(self.layer, query, key_padding_mask)
            both = torch.cat([memory, query], dim=0)
            keys, values = self._heads(self.k_proj(both)), self._heads(self.v_proj(both))
            padding = torch.cat([memory_padding, own_padding], dim=1)
        if incremental_state is not None:
            self._set_input_buffer(
                incremental_state, {"prev_key": keys, "prev_value": values, "prev_key_padding_mask": padding}
            )
        total = keys.size(2)
        q = self._heads(self.q_proj(query))  # (B, H, T, d)
        relative = self.relative_positions
        distance = (total - length + torch.arange(length, device=query.device)).unsqueeze(1) - torch.arange(
            total, device=query.device
        )  # (T, total): query word i's distance to key j; negative: a later word
        by_distance = torch.einsum(
            "bhtd,nhd->bhtn", q + relative.position_bias.unsqueeze(1), relative.projected(total, self.num_heads)
        )
        index = distance.clamp(min=0).expand(batch, self.num_heads, -1, -1)
        scores = ((q + relative.content_bias.unsqueeze(1)) @ keys.transpose(-1, -2) + by_distance.gather(-1, index))
        scores = scores * self.scaling
        if attn_mask is not None:
            scores = scores + torch.cat([attn_mask.new_zeros(length, total - length), attn_mask], dim=1)
        scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        weights = self.dropout_module(utils.softmax(scores, dim=-1).type_as(scores))
        attended = (weights @ values).permute(2, 0, 1, 3).reshape(length, batch, embed_dim)
        return self.out_proj(attended), None

    def _heads(self, x: Tensor) -> Tensor:
        """(L, B, C) -> (B, H, L, head_dim)."""
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).permute(1, 2, 0, 3)
