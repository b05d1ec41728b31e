"""What a lane of the recurrent memory model carries from one sentence to the next: the ``MemoryCarry``.

After sentence t, each lane carries, for every memory layer, the memory that sentence read and
the sentence's own states, not yet written into it. The next sentence's memory is that write
(``RecurrentMemoryTransformerModel.read_memory``), so training and decoding share one
mechanism: in training the states are the teacher-forced reference's, in decoding those of the
chosen hypothesis, recorded once the sentence is fully decoded. The states are what the next
sentence's loss sends gradient back into (``differentiable_states``, see the
truncated back-propagation in ``pipeline/truncation.py``).
"""
from typing import Dict

import torch
from torch import Tensor

from ...pipeline.carry import Carry


class MemoryCarry(Carry):
    """Per-lane memory and unwritten sentence states of every memory layer.

    ``lanes`` (B,) names the lane of each row; ``memory[name]`` is ``(memory_size, B, C)``,
    ``states[name]`` is ``(T, B, C)`` and ``padding_mask[name]`` is ``(B, T)``.
    """

    def __init__(self, lanes: Tensor, memory: Dict[str, Tensor], states: Dict[str, Tensor],
                 padding_mask: Dict[str, Tensor]):
        super().__init__(lanes)
        self.memory = memory
        self.states = states
        self.padding_mask = padding_mask

    def rows(self, rows: Tensor) -> "MemoryCarry":
        return MemoryCarry(
            lanes=self.lanes.index_select(0, rows),
            memory={name: m.index_select(1, rows) for name, m in self.memory.items()},
            states={name: s.index_select(1, rows) for name, s in self.states.items()},
            padding_mask={name: p.index_select(0, rows) for name, p in self.padding_mask.items()},
        )

    def stacked(self, other: "MemoryCarry") -> "MemoryCarry":
        """States of different lengths are padded (and masked) to the longest."""
        length = max(states.size(0) for states in [*self.states.values(), *other.states.values()])

        def padded(states, mask):
            missing = length - states.size(0)
            return (
                torch.nn.functional.pad(states, (0, 0, 0, 0, 0, missing)),
                torch.nn.functional.pad(mask, (0, missing), value=True),
            )

        states, padding_mask = {}, {}
        for name in self.states:
            first_states, first_mask = padded(self.states[name], self.padding_mask[name])
            second_states, second_mask = padded(other.states[name], other.padding_mask[name])
            states[name] = torch.cat([first_states, second_states], dim=1)
            padding_mask[name] = torch.cat([first_mask, second_mask], dim=0)
        return MemoryCarry(
            lanes=torch.cat([self.lanes, other.lanes]),
            memory={name: torch.cat([m, other.memory[name]], dim=1) for name, m in self.memory.items()},
            states=states,
            padding_mask=padding_mask,
        )

    def rows_with_sentence(self) -> Tensor:
        """The rows that have a sentence's states to write (all but those starting a document)."""
        some_mask = next(iter(self.padding_mask.values()))
        return (~some_mask.all(1)).nonzero().squeeze(1)

    def detach(self) -> "MemoryCarry":
        return MemoryCarry(
            lanes=self.lanes,
            memory={name: m.detach() for name, m in self.memory.items()},
            states={name: s.detach() for name, s in self.states.items()},
            padding_mask=self.padding_mask,
        )

    def with_state_leaves(self) -> "MemoryCarry":
        return MemoryCarry(
            lanes=self.lanes,
            memory=self.memory,
            states={name: s.detach().requires_grad_() for name, s in self.states.items()},
            padding_mask=self.padding_mask,
        )

    def differentiable_states(self) -> Dict[str, Tensor]:
        return self.states
