"""Peak memory of a stretch of work in this process, for the benchmark and comparison commands.

On cuda it is ``torch.cuda.max_memory_allocated`` (tensor bytes); on cpu (Linux) the process's
peak resident set, ``VmHWM``, reset just before the work, which counts everything the work keeps,
tensors or Python objects. (Not ``ru_maxrss``: a child process inherits its parent's peak in it
across fork and exec.) Measure in a fresh process for figures that do not depend on what ran
before.
"""
import torch

MiB = 2**20


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
