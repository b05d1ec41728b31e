"""The pipeline's half of the system contract (``pipeline/system.py``): it gives a system one carry
of every row of a step, in row order, merging the rows that continue their documents with the
system's starting carry for the rows that start one; no system merges them itself."""
import pytest
import torch

from memory_nmt.pipeline.carry import Carry
from memory_nmt.pipeline.system import SentenceLevel, SystemHooks, carry_of_rows
from memory_nmt.systems.previous_sentences import PreviousSentences


class StartsEmpty(SystemHooks):
    """A system whose documents start with no earlier sentence; it records the rows it is asked to start."""

    def __init__(self):
        self.started = []

    def starting_carry(self, lanes, rows, net_input):
        self.started.append((lanes.tolist(), rows.tolist()))
        return PreviousSentences.none(lanes)


def carried(lanes, marks):
    return PreviousSentences(torch.tensor(lanes), [(torch.tensor([mark]),) for mark in marks], [()] * len(marks))


def test_continuing_and_starting_rows_are_merged_in_row_order():
    system = StartsEmpty()
    lanes = torch.tensor([4, 7, 2, 9, 5])
    continues = torch.tensor([False, True, False, True, True])
    merged = carry_of_rows(system, carried([7, 9, 5], [70, 90, 50]), lanes, continues, {})
    assert merged.lanes.tolist() == [4, 7, 2, 9, 5]
    assert [[int(s) for s in source] for source in merged.source] == [[], [70], [], [90], [50]]
    assert system.started == [([4, 2], [0, 2])]


@pytest.mark.parametrize("continues", [None, torch.tensor([True, True])])
def test_rows_that_all_continue_read_their_carry_as_it_is(continues):
    system = StartsEmpty()
    carry = carried([3, 1], [30, 10])
    assert carry_of_rows(system, carry, torch.tensor([3, 1]), continues, {}) is carry
    assert system.started == []


def test_with_nothing_carried_every_row_starts():
    system = StartsEmpty()
    merged = carry_of_rows(system, None, torch.tensor([6, 8]), None, {})
    assert merged.lanes.tolist() == [6, 8] and merged.source == [(), ()]
    assert system.started == [([6, 8], [0, 1])]


def test_a_system_must_say_what_a_document_starts_from():
    with pytest.raises(NotImplementedError):
        carry_of_rows(SystemHooks(), None, torch.tensor([0]), None, {})


def test_a_sentence_level_model_starts_and_carries_nothing():
    merged = carry_of_rows(SentenceLevel(None), Carry(torch.tensor([2])), torch.tensor([1, 2]), torch.tensor([False, True]), {})
    assert type(merged) is Carry and merged.lanes.tolist() == [1, 2]
    assert SentenceLevel(None).sentence_context(merged, {}, 0).inputs == {}
