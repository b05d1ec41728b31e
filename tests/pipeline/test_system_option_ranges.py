"""Each system's own options, and the two-rate schedule's for the systems with parameters of their own,
at the edges of what a user may type: 0, -1 and a huge value (``option_edges.py``; the document task's
and the criterion's options are test_option_ranges.py's). Each either is refused with a message that
names the option or runs: an update through fairseq's trainer, a validation step and a decoded batch."""
from dataclasses import fields

import pytest
from option_edges import EDGES, SYSTEMS, TWO_RATES, at_edges, check_refused_by_name_or_runs, own_fields

from memory_nmt.pipeline.option_ranges import flag_of
from memory_nmt.systems.two_rate_schedule import TwoRateInverseSqrtConfig


def cases():
    """(system, option, value, extra arguments) for every option of each system and of its schedule."""
    for system, (_, options, has_context_parameters) in SYSTEMS.items():
        if options is not None:
            yield from at_edges(system, [option for option in fields(options) if not option.name.startswith("_")])
        if system == "amn":  # each context sentence read on its own: as many sequences per row
            for value in EDGES:
                yield pytest.param(system, "--context-sentences", value, ["--context-combination", "parallel"],
                                   id=f"{system}--context-sentences={value}-parallel")
        if has_context_parameters:
            for option in own_fields(TwoRateInverseSqrtConfig):
                for value in EDGES:
                    yield pytest.param(system, flag_of(option.name), value, TWO_RATES,
                                       id=f"{system}{flag_of(option.name)}={value}")


@pytest.mark.parametrize("system, option, value, extra", cases())
def test_each_system_option_at_its_edges_is_refused_by_name_or_runs(data_bin, capsys, system, option, value, extra):
    check_refused_by_name_or_runs(data_bin, capsys, system, option, value, extra)
