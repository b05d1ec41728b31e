"""One prepared check for a lent GPU, run in one call that fits its few minutes: the GPU tests
(``pytest -m gpu``), both benchmarks at transformer-base size in float16 and in bfloat16, and,
where two GPUs are there, two workers training the memory model; each step's command, outcome,
time and printed figures go into one summary file (Markdown).

On the device machine, which has no network (the wheels of ../shared/notes/gpu-device.md carried
in .gpu/whl; docs/speed.md, "The GPU check"):

    pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl
    PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH python3 scripts/gpu_check.py --summary $OUT/gpu_check.md

Every step has its own time limit, a share of --minutes, so one that hangs leaves the others
theirs; a step that fails is written down with the tail of its output and the next one runs. The
summary is rewritten after every step, so what ran is kept if the call is cut short. Without CUDA,
``--device cpu --size small`` runs the same steps small (float16 is a GPU's: its steps are skipped),
to try the script itself.
"""
import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import List, Optional

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOISE = ("INFO", "WARNING", "DEBUG")  # fairseq's and the plugin's log lines


@dataclass
class Step:
    name: str
    command: List[str]
    share: float  # of the time limit
    outcome: str = "not run"
    seconds: float = 0.0
    printed: str = ""


def steps_for(args, gpus: int) -> List[Step]:
    """The steps, in order, for ``gpus`` visible GPUs on --device."""
    python, scripts = sys.executable, os.path.join(ROOT, "scripts")
    workdir = os.path.join(args.workdir, "benchmark_training")
    training = [python, os.path.join(scripts, "benchmark_training.py"), "--device", args.device, "--size", args.size,
                "--max-tokens", str(args.max_tokens), "--systems", "", "--gradient-reaches", "window",
                "--repeats", "2", "--workdir", workdir]
    decoding = [python, os.path.join(scripts, "benchmark_decoding.py"), "--device", args.device,
                "--lengths", "10,100", "--repeats", "2"]
    precisions = [["--amp-bf16"]] + ([["--fp16"]] if args.device == "cuda" else [])
    steps = [Step("GPU tests", [python, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                                os.path.join(ROOT, "tests")], 0.25)]
    for precision in precisions:
        steps.append(Step(f"training benchmark {precision[0]}", training + precision, 0.5 / len(precisions)))
    for precision in precisions:
        steps.append(Step(f"decoding benchmark {precision[0]}", decoding + precision, 0.25 / len(precisions)))
    if gpus >= 2:
        steps.append(Step("two workers (training benchmark's data, --ddp-backend legacy_ddp)", [
            "torchrun", "--nproc_per_node", "2", shutil.which("fairseq-train") or "fairseq-train",
            os.path.join(workdir, "data-bin-1000-1"), "--user-dir", os.path.join(ROOT, "memory_nmt"),
            "--task", "document_translation", "--arch", "transformer_recurrent_memory",
            "--criterion", "document_label_smoothed_cross_entropy", "--optimizer", "adam", "--lr", "5e-4",
            "--max-tokens", str(args.max_tokens), "--max-update", "50", "--ddp-backend", "legacy_ddp",
            "--save-dir", os.path.join(args.workdir, "two_workers"), "--no-save", "--disable-validation",
            "--log-format", "simple", "--log-interval", "10",
        ], 0.15))
    total = sum(step.share for step in steps)
    for step in steps:  # the shares of the time limit add up to it
        step.share /= total
    return steps


def last_lines(output: str, lines: int) -> List[str]:
    """The last ``lines`` lines of ``output`` that are not log lines."""
    return [line for line in output.splitlines() if line.strip() and not line.startswith(NOISE)][-lines:]


def run(step: Step, seconds: float):
    """Run ``step`` within ``seconds`` (its whole process group: a benchmark's own processes too); keep
    what it printed, and where it failed or was cut, the tail of its errors."""
    start = time.perf_counter()
    process = subprocess.Popen(step.command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONWARNINGS": "ignore"}, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=seconds)
        step.outcome = "ok" if process.returncode == 0 else f"failed (exit status {process.returncode})"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        step.outcome = f"cut at its limit of {seconds:.0f} s"
    step.seconds = time.perf_counter() - start
    printed = last_lines(stdout, 80)
    if step.outcome != "ok":
        printed += ["(errors)"] + last_lines(stderr, 20)
    step.printed = "\n".join(printed)


def card(device: str) -> str:
    if device != "cuda":
        return f"no GPU: --device cpu, torch {torch.__version__}, {torch.get_num_threads()} threads"
    names = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
    total = torch.cuda.get_device_properties(0).total_memory / 2**30
    return (f"{len(names)} x {names[0]} ({total:.0f} GiB), torch {torch.__version__}, CUDA {torch.version.cuda}, "
            f"Python {sys.version.split()[0]}")


def write_summary(path: str, header: str, steps: List[Step]):
    parts = [f"# GPU check\n\n{header}\n\n| step | outcome | seconds |\n| --- | --- | --- |"]
    parts += [f"| {step.name} | {step.outcome} | {step.seconds:.0f} |" for step in steps]
    for step in steps:
        parts.append(f"\n## {step.name}: {step.outcome}\n\n`{shlex.join(step.command)}`\n\n```\n{step.printed}\n```")
    with open(path, "w", encoding="utf-8") as summary:
        summary.write("\n".join(parts) + "\n")


def main(argv: Optional[List[str]] = None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", required=True, help="the Markdown file to write")
    parser.add_argument("--minutes", type=float, default=9.0, help="the time all steps share")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--size", choices=("small", "medium", "base"), default="base")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--workdir", default="/tmp/gpu_check")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch finds no CUDA device here; give --device cpu --size small to try the script")
    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    steps = steps_for(args, gpus)
    header = f"{card(args.device)}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; --size {args.size}, " \
             f"--max-tokens {args.max_tokens}, {args.minutes:g} minutes in all"
    for step in steps:
        run(step, step.share * args.minutes * 60)
        write_summary(args.summary, header, steps)
        print(f"{step.name}: {step.outcome} ({step.seconds:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
