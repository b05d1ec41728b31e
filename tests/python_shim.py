"""The Python a recipe run by the tests is given (its ``PYTHON``): a recipe's Python commands
(``-m module``, ``script.py``) go to the recipe's command server (``command_server.py --socket``),
which runs each in a child forked from a process that has imported torch and the other libraries
fairseq imports, with this process's standard streams; any other use of Python (``-c``, a script on
standard input), and any command whose environment differs from the server's in what Python reads as
it starts, is Python itself (``exec``). Run as ``python -E -s -S python_shim.py SOCKET STARTUP
ARGUMENTS...`` (``STARTUP``: a JSON file of the server's ``startup`` variables), it starts in
milliseconds.
"""
import json
import os
import re
import socket
import sys

STARTUP_VARIABLES = re.compile(r"PYTHON[A-Z_]+|LANG|LANGUAGE|LC_\w+|OMP_\w+|MKL_\w+|KMP_\w+")


def startup(environment) -> dict:
    """The variables of ``environment`` that Python and torch read as they start."""
    return {name: value for name, value in environment.items() if STARTUP_VARIABLES.fullmatch(name)}


def request_of(arguments, cwd: str):
    """The request for Python's ``arguments`` in the working directory ``cwd`` (``-m module`` or a
    ``script.py`` there), or None where the server does not run them."""
    if len(arguments) >= 2 and arguments[0] == "-m":
        return {"module": arguments[1], "script": None, "argv": arguments[1:]}
    script = os.path.join(cwd, arguments[0]) if arguments else ""
    if script.endswith(".py") and os.path.isfile(script):
        return {"module": None, "script": os.path.abspath(script), "argv": arguments}
    return None


def main():
    socket_path, startup_path, *arguments = sys.argv[1:]
    with open(startup_path, encoding="utf-8") as opened:
        served = startup(os.environ) == json.load(opened)
    request = request_of(arguments, os.getcwd()) if served else None
    if request is None:
        os.execv(sys.executable, [sys.executable, *arguments])
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    message = json.dumps({**request, "cwd": os.getcwd(), "env": dict(os.environ)}).encode() + b"\n"
    socket.send_fds(connection, [message], [0, 1, 2])
    answer = b""
    while not answer.endswith(b"\n"):
        received = connection.recv(64)
        if not received:
            sys.exit("the recipe's command server ended while running " + " ".join(arguments))
        answer += received
    sys.exit(int(answer))


if __name__ == "__main__":
    main()
