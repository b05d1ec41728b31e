"""The tests' command server: runs fairseq's and the plugin's commands in children forked from this
process, which has imported the libraries fairseq imports once (torch, scikit-learn, SciPy, Hydra: a
fresh Python process spends seconds importing them, and the suite runs a great many commands).
fairseq itself, whose import configures Python's logging where a command has not (and fairseq's
commands configure it before they import fairseq), is imported by each command, as in a fresh
process.

Started by ``commands.py`` in one of two ways. For the tests' own commands (one server per test
process), it reads one request a line from its standard input (JSON: the command's ``argv`` and the
script or module it runs, its working directory, environment and the files of its standard streams)
and answers each on its standard output with the command's exit status. For the commands of a
recipe (``--socket PATH``), it takes requests on a Unix socket from ``python_shim.py``, the Python
the recipe is given, each with the shim's own standard streams (their descriptors passed over the
socket), and answers each with the exit status, which the shim exits with. A child runs the command as a
fresh process would: its own environment, working directory, ``sys.argv``, ``sys.path[0]`` (the
script's folder, or the working directory for a module), standard streams and NumPy seed, the
script or module run as ``__main__`` (the plugin is imported there, by the command's
``--user-dir``), an uncaught exception handed to ``sys.excepthook``, and the interpreter's own exit
(its threads joined, its ``atexit`` handlers run, its streams flushed). What Python reads as it
starts (``PYTHON*`` variables, the locale, the hash seed) is the server's: ``commands.py`` sends a
command whose environment differs there to a fresh process.
"""
import json
import os
import runpy
import socket
import sys

import hydra  # noqa: F401  (what fairseq imports, which none of them configures logging in)
import numpy
import omegaconf  # noqa: F401
import scipy.stats  # noqa: F401
import sklearn.metrics  # noqa: F401
import torch  # noqa: F401


def run_in_child(request, streams):
    """In the forked child: the command with ``streams`` (descriptors) as its standard input, output
    and error, then the interpreter's exit with its status."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, opened in enumerate(streams):
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = list(request["argv"])
    sys.path[0] = os.getcwd() if request["module"] else os.path.dirname(os.path.abspath(request["script"]))
    numpy.random.seed()
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


def exit_status(request, streams, *kept) -> int:
    """Run ``request`` in a forked child (``kept``: the server's descriptors, which the child closes)
    and wait for it."""
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        for held in kept:
            held.close()
        run_in_child(request, streams)
    for opened in streams:
        os.close(opened)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def serve_pipe():
    """Requests from a descriptor of the server's own, so that ``sys.stdin``, which a command reads,
    holds nothing of them."""
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    for line in requests:
        request = json.loads(line)
        streams = [os.open(request["stdin"], os.O_RDONLY), os.open(request["stdout"], os.O_WRONLY | os.O_TRUNC),
                   os.open(request["stderr"], os.O_WRONLY | os.O_TRUNC)]
        answers.write(f"{exit_status(request, streams, requests, answers)}\n")
        answers.flush()


def serve_socket(path: str):
    """Requests on the Unix socket ``path``, one a connection: a JSON line with the caller's standard
    streams; ``ready`` on the standard output once it listens."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    print("ready", flush=True)
    while True:
        connection, _ = listener.accept()
        message, streams, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        while not message.endswith(b"\n"):
            received = connection.recv(1 << 16)
            if not received:
                raise ConnectionError(f"a request ended before its end of line: {message[-200:]!r}")
            message += received
        status = exit_status(json.loads(message), streams, listener, connection)
        connection.sendall(f"{status}\n".encode())
        connection.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--socket"]:
        serve_socket(sys.argv[2])
    else:
        serve_pipe()
