"""What the lanes of a batch carry from one sentence to the next, and who keeps it between batches.

Documents are translated in lanes (``data.py``): batch t holds sentence t of each document of
a group, and a lane keeps its document until the document ends. After each sentence, every
lane carries something to its document's next sentence; what it is depends on the system
(``system.py``): a memory and the sentence's states, earlier sentences' tokens, a chunk's
encoding, ... (each system's carry is its own, under ``systems/``). Each is a ``Carry``: rows
identified by lane number, so a batch whose documents ended early selects the lanes it still
has, in its own row order.

The owner of a carry is whoever walks through the documents: the criterion in training and
validation (``criterion.py``), the generator in decoding (``generator.py``). Both keep it in a
``CarryStore`` (one carry per stream, checked for order; in training also the ``WindowTail`` the
next window recomputes); fairseq-interactive's documents, which go on across batches in any
mix, are kept in ``OpenDocuments``.
"""
import logging
from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from torch import Tensor

logger = logging.getLogger(__name__)


class LaneMismatchError(RuntimeError):
    pass


class CarryOrderError(RuntimeError):
    pass


class Carry:
    """The rows of a batch's lanes (``lanes``, shape (B,)), as a system carries them.

    A system's carry subclasses this and says how to take rows (``rows``) and how to stack two
    carries (``stacked``); selecting by lane and merging follow from those. What the next
    sentence's loss sends gradient back into (``differentiable_states``) is empty unless the
    system back-propagates across sentences (``criterion.py``).
    """

    def __init__(self, lanes: Tensor):
        self.lanes = lanes

    def rows(self, rows: Tensor) -> "Carry":
        """This carry's rows ``rows`` (indices), in that order."""
        return Carry(self.lanes.index_select(0, rows))

    def stacked(self, other: "Carry") -> "Carry":
        """This carry's rows, then ``other``'s."""
        return Carry(torch.cat([self.lanes, other.lanes]))

    def detach(self) -> "Carry":
        return self

    def with_state_leaves(self) -> "Carry":
        """A copy whose differentiable states are fresh leaves that collect the gradient sent back to them."""
        return self

    def differentiable_states(self) -> Dict[str, Tensor]:
        return {}

    def select(self, lanes: Tensor) -> "Carry":
        """The rows of ``lanes``, in that order; every lane asked for must be carried."""
        position = {lane: row for row, lane in enumerate(self.lanes.tolist())}
        missing = [lane for lane in lanes.tolist() if lane not in position]
        if missing:
            raise LaneMismatchError(
                f"lanes {missing[:5]} are not carried from the previous sentence "
                f"(carried: {sorted(position)[:10]}...)"
            )
        return self.rows(torch.tensor([position[lane] for lane in lanes.tolist()], device=self.lanes.device))

    def merged_into(self, older: "Carry") -> "Carry":
        """``older``'s rows for the lanes this carry lacks, then this carry's rows."""
        own = set(self.lanes.tolist())
        kept = [row for row, lane in enumerate(older.lanes.tolist()) if lane not in own]
        if not kept:
            return self
        return older.select(older.lanes[kept]).stacked(self)


@dataclass
class WindowTail:
    """A group's last sentence steps (``samples.LaneStep``) before a position, and the carry
    (detached) before the first of them: what the next training window recomputes so that its
    first sentences' losses reach them (``truncation.py``)."""

    carry: Optional[Carry]
    steps: List[object]


class CarryStore:
    """The carries of one owner between batches, one per stream (split), checked for order.

    A batch at step 0 starts its documents with nothing carried; a batch at step t must
    follow step t−1 of the same group, or the store refuses it. A group's carry (and tail) is
    dropped after its last step.
    """

    def __init__(self):
        self._held: Dict[str, tuple] = {}

    def get(self, position) -> Optional[Carry]:
        if position.step == 0:
            return None
        held = self._held.get(position.stream)
        if held is None:
            logger.warning(
                "%s: group %d starts at sentence step %d with nothing carried; its documents "
                "continue as if they started there",
                position.stream, position.group, position.step,
            )
            return None
        held_position, carry, _ = held
        if (held_position.group, held_position.step) != (position.group, position.step - 1):
            raise CarryOrderError(
                f"{position.stream}: the batch of group {position.group}, step {position.step} "
                f"does not continue the previous batch (group {held_position.group}, step "
                f"{held_position.step}); document batches must be fed in order"
            )
        return carry

    def tail_before(self, position) -> Optional[WindowTail]:
        """The tail kept with the carry that ``position`` continues (``get`` checks the order)."""
        held = self._held.get(position.stream)
        return held[2] if held is not None and position.step > 0 else None

    def holds(self, stream: str) -> bool:
        return stream in self._held

    def keep(self, position, carry: Carry, tail: Optional[WindowTail] = None):
        if position.ends_group:
            self._held.pop(position.stream, None)
        else:
            self._held[position.stream] = (position, carry.detach(), tail)


class OpenDocuments:
    """The carries of documents that go on across batches in any mix (fairseq-interactive):
    each batch says, per row, its lane (document) and whether it continues that document."""

    def __init__(self):
        self.carry: Optional[Carry] = None

    def carry_of(self, lanes: Tensor) -> Optional[Carry]:
        """The carry of the documents ``lanes`` continue, in that order (None for no lane)."""
        if not lanes.numel():
            return None
        if self.carry is None:
            raise LaneMismatchError(f"lanes {lanes.tolist()[:5]} continue documents never seen")
        return self.carry.select(lanes)

    def keep(self, carry: Carry):
        carry = carry.detach()
        self.carry = carry if self.carry is None else carry.merged_into(self.carry)

    def close(self, lanes):
        """Forget documents that ended."""
        if self.carry is None:
            return
        closed = set(lanes)
        kept = [row for row, lane in enumerate(self.carry.lanes.tolist()) if lane not in closed]
        self.carry = self.carry.select(self.carry.lanes[kept]) if kept else None
