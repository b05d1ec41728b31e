"""The tests' command server: runs fairseq's and the plugin's console commands in children forked
from this process, which has imported the libraries fairseq imports once (torch, scikit-learn,
SciPy, Hydra: a fresh Python process spends seconds importing them, and the suite runs a great many
commands). fairseq itself, whose import configures Python's logging where a command has not (and
fairseq's commands configure it before they import fairseq), is imported by each command, as in a
fresh process.

Started by ``commands.py`` (one server per test process), it reads one request a line on its
standard input (JSON: the command's ``argv`` and the script or module it runs, its working directory,
environment and the files of its standard streams) and answers each with the command's exit status.
A child runs the command as a fresh process would: its own environment, working directory,
``sys.argv`` and standard streams, the script or module run as ``__main__`` (the plugin is imported
there, by the command's ``--user-dir``), an uncaught exception handed to ``sys.excepthook``, and the
interpreter's own exit (its threads joined, its ``atexit`` handlers run, its streams flushed).
"""
import json
import os
import runpy
import sys

import hydra  # noqa: F401  (what fairseq imports, which none of them configures logging in)
import omegaconf  # noqa: F401
import scipy.stats  # noqa: F401
import sklearn.metrics  # noqa: F401
import torch  # noqa: F401


def run_command(request):
    """In the forked child: the command, then the interpreter's exit with its status."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, mode in ((0, request["stdin"], os.O_RDONLY),
                           (1, request["stdout"], os.O_WRONLY | os.O_TRUNC),
                           (2, request["stderr"], os.O_WRONLY | os.O_TRUNC)):
        opened = os.open(path, mode)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = list(request["argv"])
    try:
        if request["module"]:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(request["script"], run_name="__main__")
    except SystemExit:
        raise
    except BaseException:
        sys.excepthook(*sys.exc_info())
        raise SystemExit(1)
    raise SystemExit(0)


def serve():
    answers = os.fdopen(os.dup(1), "w")
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        child = os.fork()
        if child == 0:
            answers.close()
            run_command(request)
        _, status = os.waitpid(child, 0)
        answers.write(f"{os.waitstatus_to_exitcode(status)}\n")
        answers.flush()


if __name__ == "__main__":
    serve()
