"""Every option the plugin adds, for every system it applies to, at the edges of what a user may
type: 0, -1 and a huge value. Each either is refused with a message that names the option (by
fairseq's parser as the command line is read, exit status 2, or by an ``InputError`` of the
plugin's when the task, model, criterion or scheduler is built) or runs: an update through
fairseq's trainer, a validation step and a decoded batch. Never another error, never a traceback.
And every numeric option the plugin declares has its range declared beside it."""
import enum
import typing
from dataclasses import fields

import pytest
from fairseq.trainer import Trainer

from conftest import AMN, CONCAT, LOCAL_GLOBAL, TINY_DIMS, TINY_MODEL, batches, build
from memory_nmt.pipeline.criterion import DocumentLabelSmoothedCrossEntropyConfig
from memory_nmt.pipeline.errors import InputError
from memory_nmt.pipeline.generator import DocumentSequenceGenerator
from memory_nmt.pipeline.option_ranges import flag_of
from memory_nmt.pipeline.task import DocumentTranslationConfig
from memory_nmt.systems.associated_memory.model import AssociatedMemoryOptions
from memory_nmt.systems.context_concat.model import ContextConcatOptions
from memory_nmt.systems.local_global.options import LocalGlobalOptions
from memory_nmt.systems.options import SystemOptions
from memory_nmt.systems.recurrent_memory.model import RecurrentMemoryOptions
from memory_nmt.systems.two_rate_schedule import TwoRateInverseSqrtConfig

EDGES = ("0", "-1", "1000000000")
SYSTEMS = {  # name: (arch options, its own options, whether it has parameters of its own for two_rate_inverse_sqrt)
    "transformer": (["--arch", "transformer", *TINY_DIMS], None, False),
    "memory": (TINY_MODEL, RecurrentMemoryOptions, True),
    "concat": (CONCAT, ContextConcatOptions, False),
    "amn": (AMN, AssociatedMemoryOptions, True),
    "local_global": (LOCAL_GLOBAL, LocalGlobalOptions, True),
}
TRAINING = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "200"]
TWO_RATES = ["--lr-scheduler", "two_rate_inverse_sqrt", "--context-lr", "1e-3", "--warmup-updates", "2"]


def own_fields(config_class):
    """The options ``config_class`` declares itself: not those of fairseq's class it extends, nor
    fairseq's own settings it reads (``II("distributed_training...")``)."""
    inherited = set().union(*(
        typing.get_type_hints(base).keys() for base in config_class.__mro__[1:] if hasattr(base, "__dataclass_fields__")
    ))
    return [
        option for option in fields(config_class)
        if option.name not in inherited and not str(option.default).startswith("${")
    ]


def is_number(annotation) -> bool:
    return annotation in (int, float) or typing.get_args(annotation) in ((int, type(None)), (float, type(None)))


def is_choice(annotation) -> bool:
    """A choice, optional or not (``ChoiceEnum``, ``Optional[ChoiceEnum]``)."""
    return any(isinstance(kind, type) and issubclass(kind, enum.Enum) for kind in typing.get_args(annotation) or (annotation,))


def cases():
    """(system, option, value, extra arguments) for every option of the plugin that applies."""
    for system, (_, options, has_context_parameters) in SYSTEMS.items():
        plugin_options = [*own_fields(DocumentTranslationConfig), *own_fields(DocumentLabelSmoothedCrossEntropyConfig)]
        if options is not None:
            plugin_options += [option for option in fields(options) if not option.name.startswith("_")]
        for option in plugin_options:
            if option.type is bool or is_choice(option.type):
                continue  # switches and choices: argparse refuses any other value
            for value in EDGES:
                yield pytest.param(system, flag_of(option.name), value, [], id=f"{system}{flag_of(option.name)}={value}")
        if system == "amn":  # each context sentence read on its own: as many sequences per row
            for value in EDGES:
                yield pytest.param(system, "--context-sentences", value, ["--context-combination", "parallel"],
                                   id=f"{system}--context-sentences={value}-parallel")
        if has_context_parameters:
            for option in own_fields(TwoRateInverseSqrtConfig):
                for value in EDGES:
                    yield pytest.param(system, flag_of(option.name), value, TWO_RATES, id=f"{system}{flag_of(option.name)}={value}")


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


def train_validate_and_decode(task, model, criterion, cfg):
    """One update through fairseq's trainer, a validation step and one decoded batch."""
    trainer = Trainer(cfg, task, model, criterion)
    trainer.train_step([batches(task, "train", max_tokens=200)[0]])
    trainer.valid_step(batches(task, "valid", max_tokens=200)[0])
    generator = DocumentSequenceGenerator([model], task.target_dictionary, beam_size=2, max_len_b=5)
    first = batches(task, "test", max_tokens=200)[0]
    assert len(generator.generate([model], first)) == first["id"].numel()


@pytest.mark.parametrize("system, option, value, extra", cases())
def test_each_option_at_its_edges_is_refused_by_name_or_runs(data_bin, capsys, system, option, value, extra):
    arguments = [*SYSTEMS[system][0], *TRAINING, *extra, option, value]
    try:
        task, model, criterion, cfg = build(data_bin, *arguments)
        train_validate_and_decode(task, model, criterion, cfg)
    except SystemExit as refused:  # fairseq's parser: a usage line, then the error, exit status 2
        assert refused.code == 2
        assert f"argument {option}: {value}: give " in capsys.readouterr().err.strip().splitlines()[-1]
    except InputError as error:
        assert option in str(error)
