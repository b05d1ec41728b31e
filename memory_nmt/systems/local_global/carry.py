"""What a lane of the local+global model carries from one sentence of its chunk to the next: ``ChunkCarry``.

Decoding (and validation) go sentence by sentence. At a chunk's first sentence the encoder reads
the whole chunk, so the lane carries the encoding of every sentence of its chunk (each later
sentence takes its own from it), and, after each sentence, the states every decoder layer's
self-attention read for it (its translation: the reference in validation, the chosen hypothesis
in decoding), which the next sentence's self-attention reads (``target_context.py``; none
without the Transformer-XL decoder). Nothing is carried into another chunk, and nothing carried
takes gradient (``differentiable_states`` is empty).
"""
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor

from ...pipeline.carry import Carry


def padded_to(tensor: Tensor, dim: int, size: int, value, left: bool = False) -> Tensor:
    """``tensor`` padded with ``value`` along ``dim`` to ``size`` (at the start with ``left``)."""
    missing = size - tensor.size(dim)
    if not missing:
        return tensor
    pad = [0, 0] * (tensor.dim() - dim - 1) + ([missing, 0] if left else [0, missing])
    return F.pad(tensor, pad, value=value)


class ChunkCarry(Carry):
    """Per row (``lanes``): its chunk's encoding and its previous sentence's decoder states.

    ``encoded`` (B, N, S, C) and ``encoded_padding`` (B, N, S): the encoder's output for each of the
    chunk's N sentences; ``memory`` one (M, B, C) per decoder layer, each row's words aligned
    right, and ``memory_padding`` (B, M).
    """

    def __init__(self, lanes: Tensor, encoded: Tensor, encoded_padding: Tensor, memory: List[Tensor], memory_padding: Tensor):
        super().__init__(lanes)
        self.encoded = encoded
        self.encoded_padding = encoded_padding
        self.memory = memory
        self.memory_padding = memory_padding

    def rows(self, rows: Tensor) -> "ChunkCarry":
        return ChunkCarry(
            self.lanes.index_select(0, rows),
            self.encoded.index_select(0, rows),
            self.encoded_padding.index_select(0, rows),
            [states.index_select(1, rows) for states in self.memory],
            self.memory_padding.index_select(0, rows),
        )

    def stacked(self, other: "ChunkCarry") -> "ChunkCarry":
        """Chunks and previous sentences of different sizes are padded (and masked) to the largest."""
        sentences = max(self.encoded.size(1), other.encoded.size(1))
        width = max(self.encoded.size(2), other.encoded.size(2))
        length = max(self.memory_padding.size(1), other.memory_padding.size(1))

        def encoded(carry):
            return padded_to(padded_to(carry.encoded, 1, sentences, 0.0), 2, width, 0.0)

        def encoded_padding(carry):
            return padded_to(padded_to(carry.encoded_padding, 1, sentences, True), 2, width, True)

        return ChunkCarry(
            torch.cat([self.lanes, other.lanes]),
            torch.cat([encoded(self), encoded(other)]),
            torch.cat([encoded_padding(self), encoded_padding(other)]),
            [
                torch.cat([padded_to(mine, 0, length, 0.0, left=True), padded_to(theirs, 0, length, 0.0, left=True)], dim=1)
                for mine, theirs in zip(self.memory, other.memory)
            ],
            torch.cat([
                padded_to(self.memory_padding, 1, length, True, left=True),
                padded_to(other.memory_padding, 1, length, True, left=True),
            ]),
        )

    def detach(self) -> "ChunkCarry":
        return ChunkCarry(
            self.lanes, self.encoded.detach(), self.encoded_padding,
            [states.detach() for states in self.memory], self.memory_padding,
        )
