"""Errors in what a user gave (``InputError``: options, data, checkpoints) printed on one line, without a traceback.

fairseq's command lines let every exception end the process with its traceback. For an
``InputError`` (``pipeline/errors.py``) the traceback only buries the message, which names what
to fix and how: importing the plugin has the process print such an error, when nothing catches
it, as argparse prints a bad option (``fairseq-train: error: ...``), and exit with status 1.
Every other exception keeps its traceback, and Python code that catches the error gets it as
it is.
"""
import os
import sys

from .pipeline.errors import InputError


def print_input_errors_plainly():
    """Wrap ``sys.excepthook`` so that an uncaught ``InputError`` prints only its message (idempotent)."""
    previous = sys.excepthook
    if getattr(previous, "prints_input_errors_plainly", False):
        return

    def excepthook(kind, error, traceback):
        if issubclass(kind, InputError):
            program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
            print(f"{program}: error: {error}", file=sys.stderr)
        else:
            previous(kind, error, traceback)

    excepthook.prints_input_errors_plainly = True
    sys.excepthook = excepthook
