"""The tests' way to run a command: fairseq's and the plugin's console commands, ``python -m module``
and ``python script.py`` go to a command server that has imported torch and the other libraries
fairseq imports once (``command_server.py``) and runs each in a forked child as a fresh process
would; any other command (bash, torchrun), one whose environment differs in what Python reads as it
starts, and one asked for ``fresh`` (its own hash seed and memory layout) runs as a subprocess.
Either way the caller gets ``subprocess.CompletedProcess`` with the command's exit status and its
output. A recipe's commands reach a server of their own through the Python it is given
(``served_python``: ``python_shim.py``).
"""
import atexit
import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from python_shim import request_of, startup

SERVER = Path(__file__).with_name("command_server.py")
SHIM = Path(__file__).with_name("python_shim.py")
PYTHON_BIN = Path(sys.executable).parent
SERVED_SCRIPTS = re.compile(r"(fairseq|memory-nmt)-[\w-]+")


class CommandServer:
    """One server per test process, started at its first command, in that command's environment,
    and stopped at the process's exit (or at once, where a command is interrupted)."""

    def __init__(self):
        self.environment: Optional[dict] = None
        self.process: Optional[subprocess.Popen] = None
        self.errors = tempfile.TemporaryFile(mode="w+")
        atexit.register(self.stop)

    def serves(self, environment) -> bool:
        """Whether a command in ``environment`` starts as the server started."""
        return self.environment is None or startup(environment) == startup(self.environment)

    def run(self, request: dict) -> int:
        if self.process is None:
            self.environment = self.environment or request["env"]
            self.process = started_server([], self.environment, self.errors, stdin=subprocess.PIPE)
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
        except BaseException:
            self.stop()
            raise
        if not answer:
            self.stop()
            raise RuntimeError(f"the command server ended while running {request['argv']}:\n{tail(self.errors)}")
        return int(answer)

    def stop(self):
        """End the server and a command it runs."""
        if self.process is not None:
            stopped(self.process)
            self.process = None


def started_server(arguments, environment: dict, errors, **streams) -> subprocess.Popen:
    """``command_server.py`` with ``arguments``, in a session of its own (``stopped`` ends it and the
    command it runs), its output a text pipe and its errors in the file ``errors``."""
    return subprocess.Popen([sys.executable, str(SERVER), *arguments], env=environment, stdout=subprocess.PIPE,
                            stderr=errors, text=True, start_new_session=True, **streams)


def stopped(server: subprocess.Popen):
    if server.poll() is None:
        os.killpg(server.pid, 9)
    server.wait()


def tail(errors) -> str:
    """The end of what a server wrote to its file of errors."""
    errors.seek(0)
    return errors.read()[-3000:]


COMMAND_SERVER = CommandServer()


def python_program(command, cwd) -> Optional[dict]:
    """What the server runs for ``command`` (its ``script`` or ``module``, and ``argv``), or None for
    a command it does not run."""
    program = str(command[0])
    if program == sys.executable:
        return request_of([str(part) for part in command[1:]], str(cwd or os.getcwd()))
    path = Path(program)
    if path.parent == PYTHON_BIN and SERVED_SCRIPTS.fullmatch(path.name) and path.is_file():
        return {"module": None, "script": str(path), "argv": [str(part) for part in command]}
    return None


def run_command(command, cwd=None, env=None, input=None, text: bool = True,
                fresh: bool = False) -> subprocess.CompletedProcess:
    """``command`` run to its end, as ``subprocess.run(command, cwd=cwd, env=env, input=input,
    capture_output=True, text=text)`` runs it (``input`` and the output: text in UTF-8, or bytes);
    ``fresh``: in a process of its own."""
    environment = dict(os.environ if env is None else env)
    program = None if fresh or not COMMAND_SERVER.serves(environment) else python_program(command, cwd)
    if program is None:
        return subprocess.run(command, cwd=cwd, env=env, input=input, capture_output=True, text=text)
    with tempfile.TemporaryDirectory() as streams:
        stdin, stdout, stderr = (Path(streams) / name for name in ("stdin", "stdout", "stderr"))
        stdin.write_bytes(b"" if input is None else input.encode("utf-8") if text else input)
        stdout.write_bytes(b"")
        stderr.write_bytes(b"")
        returncode = COMMAND_SERVER.run({
            **program, "cwd": str(cwd or os.getcwd()), "env": environment,
            "stdin": str(stdin), "stdout": str(stdout), "stderr": str(stderr),
        })
        if text:
            return subprocess.CompletedProcess(command, returncode, stdout.read_text(encoding="utf-8"),
                                               stderr.read_text(encoding="utf-8"))
        return subprocess.CompletedProcess(command, returncode, stdout.read_bytes(), stderr.read_bytes())


@contextlib.contextmanager
def served_python(environment: dict):
    """The path of a Python for a recipe (its ``PYTHON``) whose commands a command server started in
    ``environment`` runs (``python_shim.py``), for as long as the context lasts."""
    with tempfile.TemporaryDirectory() as directory:  # short: a Unix socket's path is
        socket_path, startup_path, python = (Path(directory) / name for name in ("socket", "startup.json", "python"))
        startup_path.write_text(json.dumps(startup(environment)), encoding="utf-8")
        errors = tempfile.TemporaryFile(mode="w+")
        server = started_server(["--socket", str(socket_path)], environment, errors)
        try:
            if server.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the recipe's command server did not start:\n{tail(errors)}")
            python.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -E -s -S {shlex.quote(str(SHIM))} "
                              f"{shlex.quote(str(socket_path))} {shlex.quote(str(startup_path))} \"$@\"\n")
            python.chmod(0o755)
            yield str(python)
        finally:
            stopped(server)
            errors.close()
