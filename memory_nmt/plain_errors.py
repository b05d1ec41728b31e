"""Errors in what a user gave (``InputError``: options, data, checkpoints) printed on one line, without a traceback.

fairseq's command lines let every exception end the process with its traceback. For an
``InputError`` (``pipeline/errors.py``) the traceback only buries the message, which names what
to fix and how: importing the plugin has the process print such an error, when nothing catches
it, as argparse prints a bad option (``fairseq-train: error: ...``), and exit with status 1. So
are the checks of options that fairseq's command lines make themselves with ``assert``
(``fairseq_cli``'s own frames: "--batch-size cannot be larger than --buffer-size", "--sampling
requires --nbest to be equal to --beam"), and an ``InputError`` that fairseq caught and wrapped
in an error of its own ("Cannot load model parameters from checkpoint ...; please ensure that
the architectures match", fairseq-train's around a checkpoint the plugin refused). Every other
exception keeps its traceback, and Python code that catches the error gets it as it is.
"""
import os
import sys
import traceback as tracebacks

from .pipeline.errors import InputError


def is_command_line_check(kind, traceback) -> bool:
    """An ``AssertionError`` with a message, raised in fairseq's command lines' own code
    (``fairseq_cli/``): a check of their options, not a failure inside fairseq."""
    if not issubclass(kind, AssertionError) or traceback is None:
        return False
    raised_in = tracebacks.extract_tb(traceback)[-1].filename
    return os.path.basename(os.path.dirname(raised_in)) == "fairseq_cli"


def print_input_errors_plainly():
    """Wrap ``sys.excepthook`` so that an uncaught ``InputError`` prints only its message (idempotent)."""
    previous = sys.excepthook
    if getattr(previous, "prints_input_errors_plainly", False):
        return

    def excepthook(kind, error, traceback):
        if kind is Exception and isinstance(error.__context__, InputError):  # fairseq's wrapping
            kind, error = type(error.__context__), error.__context__
        if issubclass(kind, InputError) or (is_command_line_check(kind, traceback) and str(error)):
            program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
            print(f"{program}: error: {error}", file=sys.stderr)
        else:
            previous(kind, error, traceback)

    excepthook.prints_input_errors_plainly = True
    sys.excepthook = excepthook
