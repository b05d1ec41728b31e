"""The recurrent memory unit of one layer (paper section 3): initial memory, Update and Output Attention.

A unit holds no state between calls. The memory of a batch of documents is a tensor of shape
``(memory_size, lanes, embed_dim)`` that its owner (the criterion in training, the generator
in decoding, see ``carry.py``) passes in and gets back:

- ``initial(lanes)``: the trainable memory every document starts from;
- ``write(memory, states, padding_mask)``: Update Attention. The slots, with a sinusoidal
  position encoding added, attend over one sentence's states (``M~ = AddNorm(MHA(M, h, h))``)
  and pass a feed-forward block (``M' = AddNorm(FFN(M~))``), whose inner activation drops out at
  ``--activation-dropout`` like the feed-forward blocks of fairseq's layers (0 by default; the
  paper does not say), the rest at ``--dropout``;
- with ``--memory-update gated`` (not in the paper), ``write`` then keeps each slot's feature
  where a learned gate says the sentence does not replace it: ``M' = g * M_written + (1 - g) *
  M``, ``g = sigmoid(W [M; M_written] + b)``, ``b`` starting at ``GATE_BIAS`` (a quarter or so of
  each slot rewritten per sentence), as an LSTM's forget gate starts leaning to keep;
- with ``--memory-update competitive`` (not in the paper), the slots compete for the sentence's
  tokens instead: each token's attention is a softmax over the slots and a learned ``null_query``
  (Slot Attention's normalisation, Locatello et al. 2020, with a slot that writes nowhere), a slot
  receives the mean of the values of the tokens that chose it, and the written slot replaces the
  old one in the share of a token it received (at most one): ``M' = s * M_written + (1 - s) * M``,
  so a slot that no token chooses is kept as it is, and a sentence rewrites only the slots its
  tokens choose;
- with ``--memory-update queue`` (not in the paper), a sentence is written into one new slot
  instead: the Update Attention of a learned ``push_query`` over its states and the feed-forward
  block give the new slot, which is pushed in front of the others in the share ``p`` a learned
  gate gives it, the others moving one place back (the last one out) in that share: ``M' = p *
  [new; M[:-1]] + (1 - p) * M``, ``p = sigmoid(w . new + b)``, ``b`` starting at ``GATE_BIAS``.
  Every sentence that is pushed keeps a slot of its own, so the slots hold several sentences side
  by side rather than one mix of them, and a sentence the gate closes on moves nothing;
- with ``--memory-update addressed`` (not in the paper), the sentence's new slot, made as the
  queue's is, is written into the slots in the shares ``a`` of a softmax over the slots and a
  null option that writes nowhere: ``M'_i = a_i * new + (1 - a_i) * M_i``, ``a_i`` from how well
  the new slot's address matches slot i's (``address_query(new) . address_key(M_i) / sqrt(C)``)
  less slot i's learned worth of keeping (``retain(M_i)``), the null option's score 0. A sentence
  replaces a slot holding the same kind of thing, or one not worth keeping, or nothing; unlike the
  queue's, every write is trained by what it overwrites, not only by what falls off the end;
- ``update`` is ``write`` with, for ``queue`` and ``addressed``, the share of the new slot the
  sentence wrote into the memory (the queue's ``p``, the sum of the addressed shares ``a_i``), which
  ``--memory-write-cost`` makes a training cost of (``model.py``);
- ``read(states, memory)``: Output Attention, ``h~ = MHA(h, M, M)``, which the layer adds to
  its residual stream (``layers.py``). Its output projection starts at zero, so a model built
  from a sentence-level transformer's weights computes exactly that transformer until
  finetuning moves it. With ``--memory-read-positions`` (not in the paper) its keys are the slots
  with the sinusoidal slot positions added (those the paper's Update Attention adds to its slots'
  queries), ``MHA(h, M + P, M)`` (``read_keys``), so that
  a read can tell the slots apart by place as well as by content: a queue's newer slots from its
  older ones (the most recent of several sentences of one kind, a noun for a pronoun or the topic
  in force), which the paper's read, whose keys are the slots' contents alone, cannot.

In a pre-norm layer (``normalizes_its_input``) the unit also has ``read_layer_norm``, with which
the layer normalises its residual stream into the states ``h`` (``layers.py``).
"""
from typing import Dict, NamedTuple, Optional

import torch
from fairseq import utils
from fairseq.modules import FairseqDropout, LayerNorm, MultiheadAttention
from fairseq.modules.sinusoidal_positional_embedding import SinusoidalPositionalEmbedding
from torch import Tensor, nn

from ...pipeline.context_parameters import tag_context_parameters

# the paper's; with a gate; slots competing for tokens; a new slot a sentence, pushed in front or
# written where its address points
MEMORY_UPDATES = ("attention", "gated", "competitive", "queue", "addressed")
NEW_SLOT_UPDATES = ("queue", "addressed")  # a sentence's write is one new slot, in a share ``update`` gives
GATE_BIAS = -1.0  # sigmoid(-1) = 0.27: the share of a slot a sentence rewrites before training
NOTHING_RECEIVED = 1e-4  # the least a slot's received share is divided by, in the mean of its values


class MemoryWrite(NamedTuple):
    """What a sentence's write gives: the memory after it, the Update Attention's weights when
    asked for (``RecurrentMemory.write``), and for an update that writes a new slot (``queue``,
    ``addressed``) the share of it written into the memory, per lane (B,); else None."""

    memory: Tensor
    weights: Optional[Tensor]
    new_slot_share: Optional[Tensor]


class RecurrentMemory(nn.Module):
    """Memory slots of one layer, and the two attentions that write and read them."""

    def __init__(
        self,
        embed_dim: int,
        attention_heads: int,
        ffn_embed_dim: int,
        memory_size: int,
        dropout: float,
        attention_dropout: float,
        activation_dropout: float = 0.0,
        activation_fn: str = "relu",
        normalizes_its_input: bool = False,
        update: str = "attention",
        read_positions: bool = False,
    ):
        super().__init__()
        self.read_positions = read_positions
        self.initial_memory = nn.Parameter(torch.empty(memory_size, embed_dim))
        nn.init.normal_(self.initial_memory, mean=0.0, std=embed_dim**-0.5)
        self.register_buffer(
            "slot_positions",
            SinusoidalPositionalEmbedding.get_embedding(memory_size, embed_dim).unsqueeze(1),
            persistent=False,
        )
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.activation_dropout_module = FairseqDropout(activation_dropout, module_name=self.__class__.__name__)
        self.activation_fn = utils.get_activation_fn(activation_fn)

        self.update_attn = MultiheadAttention(
            embed_dim, attention_heads, dropout=attention_dropout, encoder_decoder_attention=True
        )
        self.update_attn_layer_norm = LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, ffn_embed_dim)
        self.fc2 = nn.Linear(ffn_embed_dim, embed_dim)
        self.update_ffn_layer_norm = LayerNorm(embed_dim)

        self.read_attn = MultiheadAttention(
            embed_dim, attention_heads, dropout=attention_dropout, encoder_decoder_attention=True
        )
        nn.init.zeros_(self.read_attn.out_proj.weight)
        nn.init.zeros_(self.read_attn.out_proj.bias)
        if normalizes_its_input:
            self.read_layer_norm = LayerNorm(embed_dim)
        if update not in MEMORY_UPDATES:
            raise ValueError(f"memory update {update!r}: give one of {', '.join(MEMORY_UPDATES)}")
        self.update_gate = nn.Linear(2 * embed_dim, embed_dim) if update == "gated" else None
        if self.update_gate is not None:
            nn.init.constant_(self.update_gate.bias, GATE_BIAS)
        head_dim = embed_dim // attention_heads
        self.null_query = nn.Parameter(torch.zeros(attention_heads, head_dim)) if update == "competitive" else None
        self.push_query = self.push_gate = None
        if update in NEW_SLOT_UPDATES:
            self.push_query = nn.Parameter(torch.empty(1, embed_dim))
            nn.init.normal_(self.push_query, mean=0.0, std=embed_dim**-0.5)
        if update == "queue":
            self.push_gate = nn.Linear(embed_dim, 1)
            nn.init.constant_(self.push_gate.bias, GATE_BIAS)
        self.address_query = self.address_key = self.retain = None
        if update == "addressed":
            self.address_query = nn.Linear(embed_dim, embed_dim)
            self.address_key = nn.Linear(embed_dim, embed_dim)
            self.retain = nn.Linear(embed_dim, 1)
        tag_context_parameters(self)

    @property
    def memory_size(self) -> int:
        return self.initial_memory.size(0)

    def initial(self, lanes: int) -> Tensor:
        """The memory of ``lanes`` documents at their first sentence: ``(memory_size, lanes, C)``."""
        return self.initial_memory.unsqueeze(1).expand(-1, lanes, -1)

    def write(
        self, memory: Tensor, states: Tensor, padding_mask: Optional[Tensor], need_weights: bool = False
    ):
        """Update Attention: the memory after a sentence whose states are ``states`` (T x B x C).

        Returns the new memory, and the attention of each slot over the tokens
        (B x slots x T, averaged over heads; with ``queue`` or ``addressed``, the new slot's: B x 1 x T) when
        ``need_weights``.
        """
        written = self.update(memory, states, padding_mask, need_weights)
        return (written.memory, written.weights) if need_weights else written.memory

    def update(
        self, memory: Tensor, states: Tensor, padding_mask: Optional[Tensor], need_weights: bool = False
    ) -> MemoryWrite:
        """``write``'s memory and weights, and the share of a new slot the sentence wrote."""
        if self.push_query is None:
            query = memory + self.slot_positions.to(memory)
        else:
            query = self.push_query.unsqueeze(1).expand(-1, memory.size(1), -1).to(memory)
        if padding_mask is not None and not padding_mask.any():
            padding_mask = None  # as fairseq's encoder does: nothing to mask, cheaper attention
        share = new_slot_share = None  # the paper's update: every slot rewritten whole
        if self.null_query is None:
            attended, weights = self.update_attn(
                query, states, states, key_padding_mask=padding_mask, need_weights=need_weights
            )
        else:
            attended, weights, share = self.compete(query, states, padding_mask, need_weights)
        updated = self.update_attn_layer_norm(query + self.dropout_module(attended))
        transformed = self.fc2(self.activation_dropout_module(self.activation_fn(self.fc1(updated))))
        written = self.update_ffn_layer_norm(updated + self.dropout_module(transformed))
        if self.update_gate is not None:
            share = torch.sigmoid(self.update_gate(torch.cat([memory, written], -1)))
        elif self.push_gate is not None:
            share = torch.sigmoid(self.push_gate(written))
            new_slot_share = share[0, :, 0]
            written = torch.cat([written, memory[:-1]])
        elif self.address_query is not None:
            share = self.address(memory, written)
            new_slot_share = share.sum(0)[:, 0]
        if share is not None:  # the memory takes the written share and keeps the rest
            written = share * written + (1 - share) * memory
        return MemoryWrite(written, weights, new_slot_share)

    def address(self, memory: Tensor, new: Tensor) -> Tensor:
        """The share of each slot that the new slot (1 x B x C) replaces (slots x B x 1): a softmax
        over the slots and a null option scored 0, a slot scored by how well its key matches the
        new slot's query, less its own learned worth of keeping."""
        matched = (self.address_key(memory) * self.address_query(new)).sum(-1) / memory.size(-1) ** 0.5
        scores = matched - self.retain(memory).squeeze(-1)
        with_null = torch.cat([scores, scores.new_zeros(1, scores.size(1))])
        return utils.softmax(with_null, dim=0).type_as(scores)[:-1].unsqueeze(-1)

    def compete(self, query: Tensor, states: Tensor, padding_mask: Optional[Tensor], need_weights: bool):
        """The slots competing for the tokens, with the Update Attention's projections: what each
        slot receives (slots x B x C), each token's share given to each slot (B x slots x T,
        averaged over heads; None unless ``need_weights``) and each slot's received share, at most
        one (slots x B x 1)."""
        attention = self.update_attn
        slots, lanes, _ = query.shape
        heads, head_dim = attention.num_heads, attention.head_dim

        def by_head(projected):  # (length, B, C) -> (B * heads, length, head_dim)
            return projected.reshape(projected.size(0), lanes * heads, head_dim).transpose(0, 1)

        queries = by_head(attention.q_proj(query) * attention.scaling)
        keys, values = by_head(attention.k_proj(states)), by_head(attention.v_proj(states))
        null = (self.null_query * attention.scaling).repeat(lanes, 1).unsqueeze(1)  # (B * heads, 1, head_dim)
        scores = torch.bmm(torch.cat([queries, null.to(queries)], 1), keys.transpose(1, 2))
        shares = utils.softmax(scores, dim=1).type_as(scores)[:, :slots]  # each token over slots and null
        if padding_mask is not None:
            shares = shares.masked_fill(padding_mask.repeat_interleave(heads, dim=0).unsqueeze(1), 0.0)
        received = shares.sum(-1, keepdim=True)
        gathered = torch.bmm(attention.dropout_module(shares), values) / received.clamp(min=NOTHING_RECEIVED)
        attended = attention.out_proj(gathered.transpose(0, 1).reshape(slots, lanes, heads * head_dim))
        by_lane = received.view(lanes, heads, slots).mean(1).clamp(max=1.0)
        weights = shares.view(lanes, heads, slots, -1).mean(1) if need_weights else None
        return attended, weights, by_lane.transpose(0, 1).unsqueeze(-1)

    def read(
        self,
        states: Tensor,
        memory: Optional[Tensor],
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        forbidden: Optional[Tensor] = None,
    ) -> Tensor:
        """Output Attention: what the memory adds to each state (T x B x C).

        During incremental decoding the memory's keys and values are projected once per
        sentence and kept in ``incremental_state``, as fairseq does for encoder attention;
        once they are (``has_cached_read``), ``memory`` may be None. With ``read_positions``
        the unit puts them there itself (``cache_read``) from the memory it is given, and the
        layer gives it none once they are there: fairseq's cache of an encoder-decoder
        attention would project the keys it is given as its values too, and here the two differ.
        ``forbidden`` (B x T x slots), for packed rows, is True where a state may not read a
        slot (another sentence's).
        """
        if self.read_positions and incremental_state is not None and memory is not None:
            self.cache_read(memory, incremental_state)
            memory = None  # the read takes the cached keys and values, as at the later steps
        attended, _ = self.read_attn(
            states,
            self.read_keys(memory),
            memory,
            incremental_state=incremental_state,
            static_kv=incremental_state is not None,
            need_weights=False,
            attn_mask=None if forbidden is None else forbidden.repeat_interleave(self.read_attn.num_heads, dim=0),
        )
        return self.dropout_module(attended)

    def cache_read(self, memory: Tensor, incremental_state: Dict[str, Dict[str, Optional[Tensor]]]):
        """Projects ``memory``'s keys (``read_keys``) and values (the slots) once for a sentence's
        decoding steps, into the Output Attention's ``incremental_state`` in the layout fairseq's
        attention keeps its own (lanes x heads x slots x head_dim), where its later steps find them."""
        attention = self.read_attn
        slots, lanes, _ = memory.shape

        def by_head(projected):
            return projected.view(slots, lanes, attention.num_heads, attention.head_dim).permute(1, 2, 0, 3)

        attention._set_input_buffer(incremental_state, {
            "prev_key": by_head(attention.k_proj(self.read_keys(memory))),
            "prev_value": by_head(attention.v_proj(memory)),
            "prev_key_padding_mask": None,
        })

    def read_weights(self, states: Tensor, memory: Tensor) -> Tensor:
        """The Output Attention's weights of ``states`` (T x B x C) over ``memory``'s slots
        (B x T x slots, averaged over heads), as ``read`` attends: for the probes and maps."""
        _, weights = self.read_attn(states, self.read_keys(memory), memory, need_weights=True)
        return weights

    def read_keys(self, memory: Optional[Tensor]) -> Optional[Tensor]:
        """The Output Attention's keys for ``memory`` (slots x B x C, or, laid out per row for packed
        rows, K blocks of slots one after the other): the slots, with ``read_positions`` each block's
        slot positions added."""
        if memory is None or not self.read_positions:
            return memory
        return memory + self.slot_positions.to(memory).repeat(memory.size(0) // self.memory_size, 1, 1)

    def has_cached_read(self, incremental_state) -> bool:
        return "prev_key" in (self.read_attn._get_input_buffer(incremental_state) or {})
