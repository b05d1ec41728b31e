"""The plugin's errors about what a user gave it: options, data, checkpoints, input lines.

Each is an ``InputError`` whose message names the option, the file and line, the document and
sentence, or the parameter, and says what to do. They are the user's to fix, not the code's, so
the command lines print them on one line, as argparse prints a bad option, without a traceback
(``memory_nmt/one_line_errors.py``); from Python they are ordinary ``ValueError``\\ s.
"""


class InputError(ValueError):
    """Something the user gave cannot be used; the message says what and what to do."""


class UnsupportedOptionError(InputError, NotImplementedError):
    """An option of fairseq's that the document pipeline does not support (yet)."""
