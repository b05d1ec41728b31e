"""The paths a command is given, checked before it starts work.

A long-running command (translating, training, scoring, plotting) checks every path it was given
before its first expensive step: a typo in the sentence model's checkpoint is not found only after
the first model has scored every item, and a plot or JSON file is not lost after an hour of
translating because its folder is missing. Each check raises ``PathError`` naming the option, the
path and what to give; ``check_paths`` runs them all for an argparse command and reports the first
failure through ``parser.error`` (exit status 2, as for any bad option):

    check_paths(parser,
                inputs=[("--path", args.path, "file", "a checkpoint"),
                        ("--data", args.data, "directory", "the binarized data (fairseq-preprocess's --destdir)")],
                outputs=[("--json", args.json)], plots=[("--plot", args.plot)],
                workdirs=[("--workdir", args.workdir)])

Inputs must exist and be a file or a directory as said; an output's folder must exist, or be one of
the working directories (the output itself is written later, and may exist: it is replaced); a plot is an output whose format
matplotlib can write (from its suffix); a working directory is created if missing (with its
parents), so it is the one check that writes something. Paths that are None (an option not given)
are skipped. Nothing here imports more than the standard library (matplotlib only for plots).
"""
import os
from pathlib import Path


class PathError(ValueError):
    """A path that cannot work: the message names the option, the path and what to give."""


def check_input(option, path, kind, what):
    """``path`` (given with ``option``) is an existing ``kind``, "file" or "directory"; ``what``
    says what the option takes ("a checkpoint"), for the message."""
    if path is None:
        return
    path = Path(path)
    if not path.exists():
        raise PathError(f"{option} {path}: no such {kind}; give {what}")
    if kind == "directory" and not path.is_dir():
        raise PathError(f"{option} {path}: not a directory; give {what}")
    if kind == "file" and path.is_dir():
        raise PathError(f"{option} {path}: is a directory, not a file; give {what}")


def check_output(option, path, created=()):
    """``path`` can be written: it is no directory, and its folder exists (and is writable) or is
    one of the directories ``created`` (working directories that ``make_workdir`` will create)."""
    if path is None:
        return
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise PathError(f"{option} {path}: is a directory; give a file name, e.g. {path / 'out'}")
    if folder.resolve() in {Path(directory).resolve() for directory in created}:
        return
    if not folder.is_dir():
        raise PathError(f"{option} {path}: no folder {folder}; create it first or give a path in an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PathError(f"{option} {path}: cannot write in {folder} (permission denied); give a path you can write")


def check_plot(option, path, created=()):
    """``path`` can be written (``check_output``) in a format matplotlib writes, read from its
    suffix (none: PNG, matplotlib's default)."""
    if path is None:
        return
    check_output(option, path, created)
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise PathError(f"{option} {path}: plotting needs matplotlib; pip install matplotlib") from None
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix[1:].lower()
    if suffix and suffix not in formats:
        raise PathError(f"{option} {path}: matplotlib cannot write .{suffix} files; give a name ending in "
                        + ", ".join(f".{name}" for name in sorted(formats)))


def make_workdir(option, path):
    """Create the directory ``path`` (and its parents) unless it exists; it must not be a file."""
    if path is None:
        return
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise PathError(f"{option} {path}: is a file, not a directory; give a directory (created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PathError(f"{option} {path}: cannot create it ({error.strerror}); give another directory") from None


def check_paths(parser, inputs=(), outputs=(), plots=(), workdirs=()):
    """Run every check (``inputs``: (option, path, kind, what); the others: (option, path)),
    working directories last, so that nothing is created for a command refused (an output may go
    straight into one of them); the first failure ends the command through ``parser.error``."""
    created = [path for _, path in workdirs if path is not None]
    try:
        for option, path, kind, what in inputs:
            check_input(option, path, kind, what)
        for option, path in outputs:
            check_output(option, path, created)
        for option, path in plots:
            check_plot(option, path, created)
        for option, path in workdirs:
            make_workdir(option, path)
    except PathError as error:
        parser.error(str(error))
