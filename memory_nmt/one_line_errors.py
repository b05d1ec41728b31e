"""Errors in what a user gave (``InputError``: options, data, checkpoints) printed on one line, without a traceback.

fairseq's command lines let every exception end the process with its traceback. For an
``InputError`` (``pipeline/errors.py``) the traceback only buries the message, which names what
to fix and how: a fairseq command line that loads the plugin prints such an error, when nothing
catches it, as argparse prints a bad option (``fairseq-train: error: ...``), and exits with status 1. So
are the checks of options that fairseq's command lines make themselves with ``assert``
(``fairseq_cli``'s own frames: "--batch-size cannot be larger than --buffer-size", "--sampling
requires --nbest to be equal to --beam"), their input that is not UTF-8 (where Python reads it
strictly; otherwise fairseq-interactive names the line, ``pipeline/interactive.py``), and an
``InputError`` that fairseq caught and wrapped in an error of its own ("Cannot load model parameters
from checkpoint ...; please ensure that the architectures match", fairseq-train's around a
checkpoint a system's model refused to load: ``pipeline/checkpoint_fit.py``). Every other
exception keeps its traceback, and Python code that catches the error gets it as it is.

``plain_input_errors`` makes that hook; ``fairseq_changes.py`` installs it, for the command lines
that load the plugin (``--user-dir``) only.
"""
import os
import sys
import traceback as tracebacks

from .pipeline.errors import InputError


def in_command_line(frame) -> bool:
    return os.path.basename(os.path.dirname(frame.filename)) == "fairseq_cli"


def is_command_line_check(kind, traceback) -> bool:
    """An ``AssertionError`` with a message, raised in fairseq's command lines' own code
    (``fairseq_cli/``): a check of their options, not a failure inside fairseq."""
    return issubclass(kind, AssertionError) and traceback is not None and in_command_line(
        tracebacks.extract_tb(traceback)[-1])


def is_undecodable_input(kind, traceback) -> bool:
    """A ``UnicodeDecodeError`` while a fairseq command line reads its input (fairseq-interactive's
    ``--input`` file, or a standard input read strictly)."""
    return issubclass(kind, UnicodeDecodeError) and traceback is not None and any(
        in_command_line(frame) for frame in tracebacks.extract_tb(traceback))


def plain_input_errors(previous):
    """An excepthook that prints only the message of an uncaught ``InputError`` (and of the errors above),
    and hands every other exception to ``previous``."""

    def excepthook(kind, error, traceback):
        if kind is Exception and isinstance(error.__context__, InputError):  # fairseq's wrapping
            kind, error = type(error.__context__), error.__context__
        undecodable = is_undecodable_input(kind, traceback)
        if undecodable:
            error = (f"the input is not valid UTF-8 (byte 0x{error.object[error.start]:02x}, {error.start + 1} bytes "
                     "into what was read): give the input in UTF-8, e.g. convert it with iconv")
        if issubclass(kind, InputError) or undecodable or (is_command_line_check(kind, traceback) and str(error)):
            program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
            print(f"{program}: error: {error}", file=sys.stderr)
        else:
            previous(kind, error, traceback)

    return excepthook
