"""What a system's encoder gives one sentence step (``SentenceEncoding``), for its decoder and its carry.

fairseq's encoder output is a dict of fixed keys, and fairseq's generator hands the decoder nothing
else. A document system's decoder may read more of the sentence's context than the encoder's states
(the memory model its memory, the concatenation model its target prefix, the local+global model the
previous sentence's states), and its carry may need what the encoder recorded (the memory model's
states for the memory update). ``DocumentSystem.encode`` (``system.py``) returns all three side by
side: fairseq's ``encoder_out`` as fairseq's encoder makes it, the decoder's ``reads``, which
``DocumentSystem.decode`` hands the decoder's forward as an argument (``transformer_pass.
ReadingDecoder``), and the encoder's ``records``. In beam search the document generator
(``generator.py``) reorders the whole encoding with the beams: fairseq's encoder reorders its
output, the reads reorder themselves (``DecoderReads``).
"""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Protocol

from torch import Tensor


class DecoderReads(Protocol):
    """What a decoder reads of its sentences' context besides the encoder's output: one value a
    sentence step, handed to every decoder call of it as ``reads`` (reordered between beam steps)."""

    def reordered(self, new_order: Tensor) -> "DecoderReads":
        """The reads of batch rows ``new_order`` (beam search's expansion and reorderings)."""


@dataclass(frozen=True, eq=False)
class SentenceEncoding:
    """One sentence step through a system's encoder: fairseq's ``encoder_out``; what the decoder
    reads besides (None: nothing); what the encoder recorded for ``carry_out`` (the system's; None
    where it records nothing, and once beam search reorders the rows)."""

    encoder_out: Dict[str, List[Tensor]]
    reads: Optional[DecoderReads] = None
    records: Any = None

    def reordered(self, encoder, new_order: Tensor) -> "SentenceEncoding":
        """The encoding of batch rows ``new_order``, through ``encoder``'s ``reorder_encoder_out``."""
        return SentenceEncoding(
            encoder.reorder_encoder_out(self.encoder_out, new_order),
            None if self.reads is None else self.reads.reordered(new_order),
        )
