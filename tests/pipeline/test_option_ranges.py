"""Every option the plugin's document task and criterion add, for every system, at the edges of what a
user may type: 0, -1 and a huge value (``option_edges.py``; each system's own options and the two-rate
schedule's are test_system_option_ranges.py's). Each either is refused with a message that names the
option (by fairseq's parser as the command line is read, exit status 2, or by an ``InputError`` of the
plugin's when the task, model, criterion or scheduler is built) or runs: an update through fairseq's
trainer, a validation step and a decoded batch. Never another error, never a traceback. And every
numeric option the plugin declares has its range declared beside it."""
import typing

import pytest
from option_edges import SYSTEMS, at_edges, check_refused_by_name_or_runs, own_fields

from memory_nmt.pipeline.criterion import DocumentLabelSmoothedCrossEntropyConfig
from memory_nmt.pipeline.task_config import DocumentTranslationConfig
from memory_nmt.systems.options import SystemOptions
from memory_nmt.systems.two_rate_schedule import TwoRateInverseSqrtConfig


def is_number(annotation) -> bool:
    return annotation in (int, float) or typing.get_args(annotation) in ((int, type(None)), (float, type(None)))


def cases():
    """(system, option, value, extra arguments) for every option of the task and of the criterion, for
    every system."""
    options = [*own_fields(DocumentTranslationConfig), *own_fields(DocumentLabelSmoothedCrossEntropyConfig)]
    for system in SYSTEMS:
        yield from at_edges(system, options)


def test_every_numeric_option_of_the_plugin_declares_its_range():
    configs = [DocumentTranslationConfig, DocumentLabelSmoothedCrossEntropyConfig, TwoRateInverseSqrtConfig]
    systems = [options for _, options, _ in SYSTEMS.values() if options is not None]
    declared = [cls for cls in SystemOptions.__subclasses__() if cls.__module__.startswith("memory_nmt.systems")]
    assert sorted(cls.__name__ for cls in declared) == sorted(cls.__name__ for cls in systems), "a system not walked here"
    hints = {}
    for config in configs + systems:
        hints.update({option.name: (option, typing.get_type_hints(config)[option.name]) for option in own_fields(config)})
    numeric = {name for name, (_, annotation) in hints.items() if is_number(annotation)}
    without_range = sorted(name for name in numeric if "range" not in hints[name][0].metadata)
    assert numeric and not without_range, f"numeric options without a declared range: {without_range}"


@pytest.mark.parametrize("system, option, value, extra", cases())
def test_each_option_at_its_edges_is_refused_by_name_or_runs(data_bin, capsys, system, option, value, extra):
    check_refused_by_name_or_runs(data_bin, capsys, system, option, value, extra)
