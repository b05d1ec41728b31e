"""The tests' way to run a command: Python's commands (fairseq's and the plugin's console scripts,
``python -m module``, ``python script.py``) go to a command server that has imported torch and
fairseq once (``command_server.py``) and runs each in a forked child as a fresh process would;
any other command (bash, torchrun) runs as a subprocess. Either way the caller gets
``subprocess.CompletedProcess`` with the command's exit status and its output as text.
"""
import atexit
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

SERVER = Path(__file__).with_name("command_server.py")
PYTHON_BIN = Path(sys.executable).parent


class CommandServer:
    """One server per test process, started at its first command and stopped at the process's exit."""

    def __init__(self):
        self.process: Optional[subprocess.Popen] = None

    def run(self, request: dict) -> int:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            atexit.register(self.process.stdin.close)
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the command server ended while running {request['argv']}")
        return int(answer)


SERVER_PROCESS = CommandServer()


def python_program(command, cwd) -> Optional[dict]:
    """What the server runs for ``command`` (its ``script`` or ``module``, and ``argv``), or None for
    a command that is not this Python's."""
    program = str(command[0])
    if program == sys.executable and len(command) > 2 and command[1] == "-m":
        return {"module": str(command[2]), "script": None, "argv": [str(part) for part in command[2:]]}
    if program == sys.executable and len(command) > 1 and str(command[1]).endswith(".py"):
        script = Path(cwd or os.getcwd()) / str(command[1])
        return {"module": None, "script": str(script), "argv": [str(part) for part in command[1:]]}
    path = Path(program)
    if path.parent == PYTHON_BIN and path.is_file():
        with open(path, "rb") as opened:
            first_line = opened.readline()
        if first_line.startswith(b"#!") and b"python" in first_line:
            return {"module": None, "script": str(path), "argv": [str(part) for part in command]}
    return None


def run_command(command, cwd=None, env=None, input=None, text: bool = True) -> subprocess.CompletedProcess:
    """``command`` run to its end, as ``subprocess.run(command, cwd=cwd, env=env, input=input,
    capture_output=True, text=text)`` runs it (``input`` and the output: text in UTF-8, or bytes)."""
    program = python_program(command, cwd)
    if program is None:
        return subprocess.run(command, cwd=cwd, env=env, input=input, capture_output=True, text=text)
    with tempfile.TemporaryDirectory() as streams:
        stdin, stdout, stderr = (Path(streams) / name for name in ("stdin", "stdout", "stderr"))
        given = b"" if input is None else input.encode("utf-8") if text else input
        stdin.write_bytes(given)
        stdout.write_bytes(b"")
        stderr.write_bytes(b"")
        returncode = SERVER_PROCESS.run({
            **program, "cwd": str(cwd or os.getcwd()), "env": dict(os.environ if env is None else env),
            "stdin": str(stdin), "stdout": str(stdout), "stderr": str(stderr),
        })
        if text:
            return subprocess.CompletedProcess(command, returncode, stdout.read_text(encoding="utf-8"),
                                               stderr.read_text(encoding="utf-8"))
        return subprocess.CompletedProcess(command, returncode, stdout.read_bytes(), stderr.read_bytes())
