"""What the tests of the plugin's options at the edges of what a user may type share
(``test_option_ranges.py``: the document task's and the criterion's options, for every system;
``test_system_option_ranges.py``: each system's own options and the two-rate schedule's): the
systems, the edges (0, -1 and a huge value), and the check that an option at an edge is refused with
a message that names it or runs. The cases are two modules' so that pytest-xdist runs them side by
side: each takes fairseq most of a second to compose its config."""
import enum
import typing
from dataclasses import fields

import pytest
from fairseq.trainer import Trainer

from conftest import AMN, CONCAT, LOCAL_GLOBAL, TINY_DIMS, TINY_MODEL, batches, build
from memory_nmt.pipeline.errors import InputError
from memory_nmt.pipeline.generator import DocumentSequenceGenerator
from memory_nmt.pipeline.option_ranges import flag_of
from memory_nmt.systems.associated_memory.model import AssociatedMemoryOptions
from memory_nmt.systems.context_concat.model import ContextConcatOptions
from memory_nmt.systems.local_global.options import LocalGlobalOptions
from memory_nmt.systems.recurrent_memory.model import RecurrentMemoryOptions

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


def is_choice(annotation) -> bool:
    """A choice, optional or not (``ChoiceEnum``, ``Optional[ChoiceEnum]``)."""
    return any(isinstance(kind, type) and issubclass(kind, enum.Enum) for kind in typing.get_args(annotation) or (annotation,))


def at_edges(system, options):
    """(system, option, value, extra arguments: none) of each of ``options`` (dataclass fields) but the
    switches and choices, at each edge."""
    for option in options:
        if option.type is bool or is_choice(option.type):
            continue  # switches and choices: argparse refuses any other value
        for value in EDGES:
            yield pytest.param(system, flag_of(option.name), value, [], id=f"{system}{flag_of(option.name)}={value}")


def train_validate_and_decode(task, model, criterion, cfg):
    """One update through fairseq's trainer, a validation step and one decoded batch."""
    trainer = Trainer(cfg, task, model, criterion)
    trainer.train_step([batches(task, "train", max_tokens=200)[0]])
    trainer.valid_step(batches(task, "valid", max_tokens=200)[0])
    generator = DocumentSequenceGenerator([model], task.target_dictionary, beam_size=2, max_len_b=5)
    first = batches(task, "test", max_tokens=200)[0]
    assert len(generator.generate([model], first)) == first["id"].numel()


def check_refused_by_name_or_runs(data_bin, capsys, system, option, value, extra):
    """``option value`` given to ``system`` either is refused with a message that names the option
    (by fairseq's parser, or by an ``InputError`` of the plugin's) or runs."""
    arguments = [*SYSTEMS[system][0], *TRAINING, *extra, option, value]
    try:
        task, model, criterion, cfg = build(data_bin, *arguments)
        train_validate_and_decode(task, model, criterion, cfg)
    except SystemExit as refused:  # fairseq's parser: a usage line, then the error, exit status 2
        assert refused.code == 2
        assert f"argument {option}: {value}: give " in capsys.readouterr().err.strip().splitlines()[-1]
    except InputError as error:
        assert option in str(error)
