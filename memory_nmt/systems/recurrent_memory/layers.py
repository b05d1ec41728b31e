"""Transformer layers that read and record the memory, and the scope through which they get it.

A memory layer is fairseq's own encoder or decoder layer with a ``RecurrentMemory`` attached,
read right after the self-attention block, before the encoder's feed-forward block or the
decoder's cross-attention:

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

fairseq's encoder and decoder call their layers with a fixed signature, so the memory to read
reaches the layers through a ``MemoryAccess`` that the encoder or decoder opens around one
forward call (``open_memory_access``) and closes when the call returns; a layer called
outside such a call fails loudly instead of reading stale memory. In a batch of packed rows
(``pipeline/packing.py``) the access lays each row's sentences' memories side by side and
confines each token's read to its own sentence's.
"""
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterable, Optional, Tuple

import torch
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from fairseq.modules.transformer_layer import (
    TransformerDecoderLayerBase,
    TransformerEncoderLayerBase,
)
from torch import Tensor

from ...pipeline.packing import PackedRows
from .memory import RecurrentMemory


@dataclass
class MemoryAccess:
    """The memory one encoder or decoder call reads, and the states it records for the update."""

    memory: Dict[str, Tensor]
    rows: Optional[Tensor] = None  # beam search: the memory row each batch row reads
    incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None
    states: Dict[str, Tensor] = field(default_factory=dict)
    packed_rows: Optional[PackedRows] = None  # packed rows: the memory is each sentence's
    side: str = "source"  # of the packed rows: "source" in the encoder, "target" in the decoder

    def memory_of(self, name: str) -> Tuple[Tensor, Optional[Tensor]]:
        """The memory the batch's rows read, and, for packed rows, the (rows x heads, tokens, slots)
        mask that keeps each token to its own sentence's slots (else None)."""
        memory = self.memory[name]
        if self.packed_rows is not None:
            per_row, slot_sentences = self.packed_rows.per_row(memory)
            return per_row, self.packed_rows.other_sentences(self.side, slot_sentences)
        return (memory if self.rows is None else memory.index_select(1, self.rows)), None


@contextmanager
def open_memory_access(layers: Iterable["MemoryLayer"], access: MemoryAccess):
    layers = list(layers)
    for layer in layers:
        layer.memory_access = access
    try:
        yield access
    finally:
        for layer in layers:
            layer.memory_access = None


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
        self.memory_access: Optional[MemoryAccess] = None
        self.self_attention_ended = False  # pre-norm: the next residual sum is the self-attention block's
        if self.normalize_before:
            self.self_attn.register_forward_hook(self._mark_self_attention_end)
        else:
            self.self_attn_layer_norm.register_forward_hook(self._read_after_layer_norm)

    def _read_after_layer_norm(self, layer_norm, inputs, states: Tensor) -> Tensor:
        """Post-norm: the hook after the self-attention block's layer norm."""
        return states + self.read_memory(states)

    def _mark_self_attention_end(self, attention, inputs, outputs):
        self.self_attention_ended = True

    def residual_connection(self, x, residual):
        """fairseq's residual sum; in a pre-norm layer, the one ending the self-attention block
        also adds the memory read of its normalised sum."""
        stream = super().residual_connection(x, residual)
        if not self.self_attention_ended:
            return stream
        self.self_attention_ended = False
        return stream + self.read_memory(self.memory.read_layer_norm(stream))

    def read_memory(self, states: Tensor) -> Tensor:
        """What the memory adds after self-attention to a layer whose states there are ``states``.
        They are recorded (in the access for the update, or, in beam search, step by step through
        ``record_step``, which only decoder layers have: the encoder is never called with an
        incremental state)."""
        access = self.memory_access
        if access is None:
            raise RuntimeError(
                f"{self.memory_name} was called without a memory to read; "
                "call it through its encoder or decoder"
            )
        incremental_state = access.incremental_state
        if incremental_state is None:
            access.states[self.memory_name] = states
        else:
            self.record_step(states, incremental_state)
        if incremental_state is not None and self.memory.has_cached_read(incremental_state):
            memory, forbidden = None, None
        else:
            memory, forbidden = access.memory_of(self.memory_name)
        return self.memory.read(states, memory, incremental_state, forbidden)


class MemoryEncoderLayer(MemoryLayer, TransformerEncoderLayerBase):
    def __init__(self, cfg, name: str, memory_size: int):
        super().__init__(cfg)
        self.attach_memory(name, cfg.encoder, cfg, memory_size)


class MemoryDecoderLayer(FairseqIncrementalState, MemoryLayer, TransformerDecoderLayerBase):
    def __init__(self, cfg, name: str, memory_size: int, no_encoder_attn: bool = False):
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)
        self.attach_memory(name, cfg.decoder, cfg, memory_size)

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
