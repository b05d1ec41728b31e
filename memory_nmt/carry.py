"""What a batch of documents carries from one sentence to the next: the ``MemoryCarry``.

Documents are translated in lanes (``data.py``): batch t holds sentence t of each document of
a group, and a lane keeps its document until the document ends. After sentence t, each lane
carries, for every memory layer, the memory that sentence read and the sentence's own states,
not yet written into it. The next sentence's memory is that write
(``RecurrentMemoryTransformerModel.read_memory``), so training and decoding share one
mechanism: in training the states are the teacher-forced reference's, in decoding those of
the chosen hypothesis, recorded once the sentence is fully decoded.

The owner of a carry is whoever walks through the document: the criterion in training and
validation (``criterion.py``), the generator in decoding (``generator.py``). Rows are
identified by lane number, so a batch whose documents ended early selects the lanes it still
has, in its own row order.
"""
import logging
from dataclasses import dataclass
from typing import Dict

import torch
from torch import Tensor

logger = logging.getLogger(__name__)


class LaneMismatchError(RuntimeError):
    pass


@dataclass
class MemoryCarry:
    """Per-lane memory and unwritten sentence states of every memory layer.

    ``lanes`` (B,) names the lane of each row; ``memory[name]`` is ``(memory_size, B, C)``,
    ``states[name]`` is ``(T, B, C)`` and ``padding_mask[name]`` is ``(B, T)``.
    """

    lanes: Tensor
    memory: Dict[str, Tensor]
    states: Dict[str, Tensor]
    padding_mask: Dict[str, Tensor]

    def select(self, lanes: Tensor) -> "MemoryCarry":
        """The rows of ``lanes``, in that order; every lane asked for must be carried."""
        position = {lane: row for row, lane in enumerate(self.lanes.tolist())}
        missing = [lane for lane in lanes.tolist() if lane not in position]
        if missing:
            raise LaneMismatchError(
                f"lanes {missing[:5]} are not carried from the previous sentence "
                f"(carried: {sorted(position)[:10]}...)"
            )
        rows = torch.tensor([position[lane] for lane in lanes.tolist()], device=self.lanes.device)
        return MemoryCarry(
            lanes=lanes,
            memory={name: m.index_select(1, rows) for name, m in self.memory.items()},
            states={name: s.index_select(1, rows) for name, s in self.states.items()},
            padding_mask={name: p.index_select(0, rows) for name, p in self.padding_mask.items()},
        )

    def merged_into(self, older: "MemoryCarry") -> "MemoryCarry":
        """``older``'s rows for the lanes this carry lacks, then this carry's rows; states of
        different lengths are padded (and masked) to the longest."""
        own = set(self.lanes.tolist())
        kept = [row for row, lane in enumerate(older.lanes.tolist()) if lane not in own]
        if not kept:
            return self
        older = older.select(older.lanes[kept])
        length = max(states.size(0) for states in [*older.states.values(), *self.states.values()])

        def padded(states, mask):
            missing = length - states.size(0)
            return (
                torch.nn.functional.pad(states, (0, 0, 0, 0, 0, missing)),
                torch.nn.functional.pad(mask, (0, missing), value=True),
            )

        states, padding_mask = {}, {}
        for name in self.states:
            old_states, old_mask = padded(older.states[name], older.padding_mask[name])
            new_states, new_mask = padded(self.states[name], self.padding_mask[name])
            states[name] = torch.cat([old_states, new_states], dim=1)
            padding_mask[name] = torch.cat([old_mask, new_mask], dim=0)
        return MemoryCarry(
            lanes=torch.cat([older.lanes, self.lanes]),
            memory={name: torch.cat([older.memory[name], m], dim=1) for name, m in self.memory.items()},
            states=states,
            padding_mask=padding_mask,
        )

    def detach(self) -> "MemoryCarry":
        return MemoryCarry(
            lanes=self.lanes,
            memory={name: m.detach() for name, m in self.memory.items()},
            states={name: s.detach() for name, s in self.states.items()},
            padding_mask=self.padding_mask,
        )

    def with_state_leaves(self) -> "MemoryCarry":
        """A copy whose states are fresh leaves that collect the gradient sent back to them."""
        return MemoryCarry(
            lanes=self.lanes,
            memory=self.memory,
            states={name: s.detach().requires_grad_() for name, s in self.states.items()},
            padding_mask=self.padding_mask,
        )


class MemoryCarryError(RuntimeError):
    pass


class CarryStore:
    """The carries of one owner between batches, one per stream (split), checked for order.

    A batch at step 0 starts its documents from the initial memory; a batch at step t must
    follow step t−1 of the same group, or the store refuses it. A group's carry is dropped
    after its last step.
    """

    def __init__(self):
        self._held: Dict[str, tuple] = {}

    def get(self, position) -> "MemoryCarry | None":
        if position.step == 0:
            return None
        held = self._held.get(position.stream)
        if held is None:
            logger.warning(
                "%s: group %d starts at sentence step %d with no memory carried; its "
                "documents continue from the initial memory",
                position.stream, position.group, position.step,
            )
            return None
        held_position, carry = held
        if (held_position.group, held_position.step) != (position.group, position.step - 1):
            raise MemoryCarryError(
                f"{position.stream}: the batch of group {position.group}, step {position.step} "
                f"does not continue the previous batch (group {held_position.group}, step "
                f"{held_position.step}); document batches must be fed in order"
            )
        return carry

    def holds(self, stream: str) -> bool:
        return stream in self._held

    def keep(self, position, carry: MemoryCarry):
        if position.ends_group:
            self._held.pop(position.stream, None)
        else:
            self._held[position.stream] = (position, carry.detach())


class OpenDocuments:
    """The carries of documents that go on across batches in any mix (fairseq-interactive):
    each batch says, per row, its lane (document) and whether it continues that document."""

    def __init__(self):
        self.carry: "MemoryCarry | None" = None

    def memory_for(self, model, lanes: Tensor, continues: Tensor) -> Dict[str, Tensor]:
        """The memory each row reads: its document's carried memory, or the initial one."""
        memory = {name: m.clone() for name, m in model.read_memory(None, lanes.numel()).items()}
        rows = continues.nonzero().squeeze(1)
        if rows.numel():
            if self.carry is None:
                raise LaneMismatchError(f"lanes {lanes[rows].tolist()} continue documents never seen")
            written = model.read_memory(self.carry.select(lanes[rows]), rows.numel())
            for name, m in written.items():
                memory[name][:, rows] = m
        return memory

    def keep(self, carry: MemoryCarry):
        carry = carry.detach()
        self.carry = carry if self.carry is None else carry.merged_into(self.carry)

    def close(self, lanes):
        """Forget documents that ended."""
        if self.carry is None:
            return
        closed = set(lanes)
        kept = [row for row, lane in enumerate(self.carry.lanes.tolist()) if lane not in closed]
        self.carry = self.carry.select(self.carry.lanes[kept]) if kept else None
