"""Transformer layers that read and record the memory, which they take as an argument.

A memory layer is fairseq's encoder or decoder layer (its submodules and state-dict names) with a
``RecurrentMemory`` attached, read right after the self-attention block, before the encoder's
feed-forward block or the decoder's cross-attention:

- post-norm (transformer-base, the paper's): the states ``h`` after the block's layer norm are
  recorded for the memory update, and the Output Attention's read ``MHA(h, M, M)`` (its keys
  ``M + P`` with ``--memory-read-positions``, ``memory.py``) is added to them;
- pre-norm (``--encoder/--decoder-normalize-before``: mBART, NLLB), where the block ends in its
  residual sum and no layer norm follows it: the memory's own layer norm (``read_layer_norm``)
  normalises the residual stream there into the states ``h`` that are recorded and read with, and
  the read is added to the residual stream, as every pre-norm sublayer adds its output. The read
  thus sits where the paper's does, and the memory sees normalised states in both layouts.

Either way the read starts at zero (``memory.py``), so the layer computes what fairseq's layer
computes until finetuning moves it. During beam search a decoder layer keeps its states of
every step, and the beams' reorderings, in the incremental state, so that a finished
hypothesis's states need no second pass over it (``recorded_states``).

The encoder and decoder (``model.py``) run their layers through the plugin's passes
(``pipeline/transformer_pass.py``), which hand every memory layer the call's ``MemoryRead`` as its
``reads`` argument; a memory layer returns the states it recorded, as its record, beside its output.
In a batch of packed rows (``pipeline/packing.py``) the read lays each row's sentences' memories side
by side and confines each token's read to its own sentence's; the passes hand the layers the masks
that confine their attention (``masks``).
"""
from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple

import torch
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from torch import Tensor

from ...pipeline.layer_blocks import (
    AttentionMasks,
    ReadingDecoderLayer,
    ReadingEncoderLayer,
    feed_forward_block,
    self_attention_block,
    source_attention_block,
)
from ...pipeline.packing import PackedRows
from .memory import RecurrentMemory


@dataclass(frozen=True)
class MemoryRead:
    """The memory one encoder or decoder call's memory layers read, by layer name."""

    memory: Dict[str, Tensor]
    rows: Optional[Tensor] = None  # beam search: the memory row each batch row reads
    packed_rows: Optional[PackedRows] = None  # packed rows: the memory is each sentence's
    side: str = "source"  # of the packed rows: "source" in the encoder, "target" in the decoder

    def reordered(self, new_order: Tensor) -> "MemoryRead":
        """Beam search's rows ``new_order`` of the batch: the memory stays one per lane, and the index
        of the memory row each batch row reads moves."""
        return replace(self, rows=new_order if self.rows is None else self.rows.index_select(0, new_order))

    def memory_of(self, name: str) -> Tuple[Tensor, Optional[Tensor]]:
        """The memory the batch's rows read, and, for packed rows, the (rows x heads, tokens, slots)
        mask that keeps each token to its own sentence's slots (else None)."""
        memory = self.memory[name]
        if self.packed_rows is not None:
            per_row, slot_sentences = self.packed_rows.per_row(memory)
            return per_row, self.packed_rows.other_sentences(self.side, slot_sentences)
        return (memory if self.rows is None else memory.index_select(1, self.rows)), None


class MemoryLayer:
    """Attaches a ``RecurrentMemory`` to a fairseq layer, read after self-attention."""

    def attach_memory(self, name: str, side_cfg, cfg, memory_size: int):
        self.memory_name = name
        self.memory = RecurrentMemory(
            embed_dim=side_cfg.embed_dim,
            attention_heads=side_cfg.attention_heads,
            ffn_embed_dim=side_cfg.ffn_embed_dim,
            memory_size=memory_size,
            dropout=cfg.dropout,
            attention_dropout=cfg.attention_dropout,
            activation_dropout=self.activation_dropout_module.p,  # fairseq's, --relu-dropout included
            activation_fn=cfg.activation_fn,
            normalizes_its_input=self.normalize_before,
            update=cfg.memory_update,
            read_positions=cfg.memory_read_positions,
        )

    def read_memory(self, x: Tensor, reads: MemoryRead, incremental_state=None) -> Tuple[Tensor, Tensor]:
        """The residual stream ``x`` after the self-attention block with the memory's read added, and
        the states ``h`` it read with (post-norm: ``x`` itself, after the block's LayerNorm; pre-norm:
        ``x`` through the memory's ``read_layer_norm``), which the memory update writes. In beam search
        they are also kept step by step (``record_step``, which only decoder layers have: the encoder
        is never called with an incremental state)."""
        states = self.memory.read_layer_norm(x) if self.normalize_before else x
        if incremental_state is not None:
            self.record_step(states, incremental_state)
        if incremental_state is not None and self.memory.has_cached_read(incremental_state):
            memory, forbidden = None, None
        else:
            memory, forbidden = reads.memory_of(self.memory_name)
        return x + self.memory.read(states, memory, incremental_state, forbidden), states


class MemoryEncoderLayer(MemoryLayer, ReadingEncoderLayer):
    def __init__(self, cfg, name: str, memory_size: int):
        super().__init__(cfg)
        self.attach_memory(name, cfg.encoder, cfg, memory_size)

    def forward(self, x, encoder_padding_mask: Optional[Tensor], *, masks: Optional[AttentionMasks] = None,
                reads: MemoryRead) -> Tuple[Tensor, Tensor]:
        """The layer's output and the states it recorded for the memory update."""
        x = self_attention_block(self, x, encoder_padding_mask, masks.self_attention if masks is not None else None)
        x, states = self.read_memory(x, reads)
        return feed_forward_block(self, x), states


class MemoryDecoderLayer(FairseqIncrementalState, MemoryLayer, ReadingDecoderLayer):
    def __init__(self, cfg, name: str, memory_size: int, no_encoder_attn: bool = False):
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)
        self.attach_memory(name, cfg.decoder, cfg, memory_size)

    def forward(self, x, encoder_out: Optional[Tensor] = None, encoder_padding_mask: Optional[Tensor] = None,
                incremental_state=None, prev_self_attn_state=None, prev_attn_state=None,
                self_attn_mask: Optional[Tensor] = None, self_attn_padding_mask: Optional[Tensor] = None,
                need_attn: bool = False, need_head_weights: bool = False, *, masks: Optional[AttentionMasks] = None,
                reads: MemoryRead) -> Tuple[Tensor, Optional[Tensor], Tensor]:
        """fairseq's decoder layer's output and attention, the memory read between its self-attention and
        its attention to the source, and the states it recorded for the memory update; ``masks``, where
        given, replace ``self_attn_mask`` and confine the attention to the source."""
        if prev_self_attn_state is not None or prev_attn_state is not None:
            raise ValueError("the memory decoder layer keeps its attention states in the incremental state")
        x = self_attention_block(self, x, self_attn_padding_mask,
                                 masks.self_attention if masks is not None else self_attn_mask, incremental_state)
        x, states = self.read_memory(x, reads, incremental_state)
        x, attention = source_attention_block(self, x, encoder_out, encoder_padding_mask,
                                              masks.source_attention if masks is not None else None,
                                              incremental_state, need_attn, need_head_weights)
        return feed_forward_block(self, x), attention, states

    def record_step(self, states: Tensor, incremental_state):
        """Keeps one decoding step's states (1 x rows x C)."""
        record = self.get_incremental_state(incremental_state, "memory_states")
        if record is None:
            record = {"steps": [], "reorders": []}
            self.set_incremental_state(incremental_state, "memory_states", record)
        record["steps"].append(states)

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Beam search moved (or dropped) rows: keeps where each row came from, so the states
        are gathered only for the hypotheses that end (``recorded_states``), not moved every step."""
        record = self.get_incremental_state(incremental_state, "memory_states")
        if record is not None:
            record["reorders"].append(new_order)

    def recorded_states(self, incremental_state, rows: Tensor) -> Tensor:
        """The states of every step decoded so far (steps x len(rows) x C) of the hypotheses now at
        beam rows ``rows``, followed back through the beams' reorderings."""
        record = self.get_incremental_state(incremental_state, "memory_states")
        steps, reorders = record["steps"], record["reorders"]
        gathered = []
        for step in reversed(range(len(steps))):
            gathered.append(steps[step].index_select(1, rows))
            if step:
                rows = reorders[step - 1].index_select(0, rows)
        return torch.cat(gathered[::-1])
