"""Valid ranges of the plugin's numeric options, and the forms of the others that take a few kinds
of value: declared once, beside each option, and checked wherever a value comes from.

An option's dataclass field (the task's, the criterion's, the scheduler's, a system's) gives its
range in its metadata: ``field(default=1, metadata={"help": ..., "range": Range(1)})``, the
bounds included; or the function that reads its text (``"parse": parse_gradient_reach``), which
raises a ValueError whose words say what to give. Two checks read it:

- ``add_with_ranges(parser, config)`` declares the config's fields on fairseq's parser (with
  fairseq's ``gen_parser_from_dataclass``) and makes the parser refuse a value out of range: a
  command line is refused while it is parsed, by argparse, naming the option and its range
  (``fairseq-train: error: argument --memory-size: 0: give 1 to 4096``);
- ``check_ranges(values, config)`` checks values that did not come through the parser (a
  checkpoint's options, ``--model-overrides``, Python), raising an ``OptionError`` with the same
  words (``--memory-size 0: give 1 to 4096``).
"""
import argparse
from dataclasses import dataclass, fields
from typing import Optional, Union

from fairseq.dataclass.utils import gen_parser_from_dataclass

from .errors import InputError

Number = Union[int, float]


class OptionError(InputError):
    """An option's value the plugin cannot use; the message names the option and what to give."""


@dataclass(frozen=True)
class Range:
    """The values an option takes: from ``low`` to ``high``, both included (None: no bound)."""

    low: Optional[Number] = None
    high: Optional[Number] = None

    def holds(self, value) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self) -> str:
        if self.high is None:
            return f"{self.low} or more"
        if self.low is None:
            return f"{self.high} or less"
        return f"{self.low} to {self.high}"


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def ranges_of(config_class):
    """(field name, Range) of every field of ``config_class`` that declares one."""
    return [(option.name, option.metadata["range"]) for option in fields(config_class) if "range" in option.metadata]


def parsers_of(config_class):
    """(field name, parse function) of every field of ``config_class`` that declares one."""
    return [(option.name, option.metadata["parse"]) for option in fields(config_class) if "parse" in option.metadata]


def add_with_ranges(parser, config, delete_default: bool = False):
    """Declare ``config``'s fields on ``parser`` as fairseq does, each refusing a value outside its
    range or not of its form."""
    gen_parser_from_dataclass(parser, config, delete_default=delete_default)
    actions = {flag: action for action in parser._actions for flag in action.option_strings}
    for name, allowed in ranges_of(type(config)):
        actions[flag_of(name)].type = refusing_outside(actions[flag_of(name)].type, allowed)
    for name, parse in parsers_of(type(config)):
        actions[flag_of(name)].type = refusing_unreadable(parse)


def refusing_outside(convert, allowed: Range):
    """argparse's ``type`` for an option: ``convert`` the text, then refuse a value outside ``allowed``."""

    def convert_and_check(text):
        value = convert(text)
        if not allowed.holds(value):
            raise argparse.ArgumentTypeError(f"{text}: give {allowed.describe()}")
        return value

    convert_and_check.__name__ = getattr(convert, "__name__", "value")  # argparse's "invalid int value"
    return convert_and_check


def refusing_unreadable(parse):
    """argparse's ``type`` for an option read by ``parse``, whose ValueError becomes argparse's error."""

    def parse_or_refuse(text):
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse_or_refuse.__name__ = parse.__name__
    return parse_or_refuse


def check_ranges(values, config_class):
    """Refuse, with an ``OptionError``, a value of ``values`` (a namespace or config with the
    fields of ``config_class``) outside its field's range or not of its form; None (not given) is
    left alone."""
    for name, allowed in ranges_of(config_class):
        value = getattr(values, name, None)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OptionError(f"{flag_of(name)} {value!r}: give a number, {allowed.describe()}")
        if not allowed.holds(value):
            raise OptionError(f"{flag_of(name)} {value}: give {allowed.describe()}")
    for name, parse in parsers_of(config_class):
        value = getattr(values, name, None)
        if value is not None:
            try:
                parse(value)
            except ValueError as error:
                raise OptionError(f"{flag_of(name)} {error}") from None
