"""Peak memory of a stretch of work, measured in this process or in a fresh one.

In this process: ``start_peak`` before the work, ``peak_since`` after it. On cuda it is
``torch.cuda.max_memory_allocated`` (tensor bytes); on cpu (Linux) the process's peak resident
set, ``VmHWM``, reset just before the work, which counts everything the work keeps, tensors or
Python objects. (Not ``ru_maxrss``: a child process inherits its parent's peak in it across fork
and exec.)

In a fresh process, for figures that do not depend on what ran before: a command runs again with
an option that has it measure one thing and print its figures (``print_figures``: JSON, its last
line of output), and ``measured_in_fresh_process`` runs it and reads them. The benchmarks
(``training.py``, ``decoding.py``), ``compare_systems`` and the paper's ``cost_vs_length.py`` measure so.
"""
import json
import shlex
import subprocess
import sys

import torch

MiB = 2**20


class FreshProcessError(RuntimeError):
    """A measuring command failed; the message names the command, and ``stderr`` is what it printed."""

    def __init__(self, command, stderr: str):
        super().__init__(f"{shlex.join(command)} failed:\n{stderr}")
        self.stderr = stderr


def resident_bytes(field):
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process, from Linux's /proc/self/status."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def start_peak(device) -> int:
    """Reset the peak; return the level it is measured above."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    with open("/proc/self/clear_refs", "w") as f:  # sets VmHWM to the current resident set (Linux >= 4.0)
        f.write("5")
    return resident_bytes("VmRSS")


def peak_since(device, before: int) -> int:
    """Peak bytes above ``before`` since ``start_peak``."""
    if device == "cuda":
        return torch.cuda.max_memory_allocated() - before
    return resident_bytes("VmHWM") - before


def peak_name(device) -> str:
    return "torch.cuda.max_memory_allocated" if device == "cuda" else "peak resident set (VmHWM)"


def print_figures(figures: dict) -> None:
    """(In the measuring process.) The figures, for ``measured_in_fresh_process`` to read."""
    print(json.dumps(figures))


def measured_in_fresh_process(command) -> dict:
    """The figures that ``command`` (a list of arguments, run in a process of its own) prints with
    ``print_figures``; a ``FreshProcessError`` if it fails."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise FreshProcessError(command, done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measured_or_exit(command) -> dict:
    """``measured_in_fresh_process``, for a command line (the benchmarks): a failed measuring
    process ends this one with its message, on no traceback."""
    try:
        return measured_in_fresh_process(command)
    except FreshProcessError as error:
        sys.exit(str(error))
