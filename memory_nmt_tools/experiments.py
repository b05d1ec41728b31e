"""What the quickstart (``examples/quickstart.py``) and the paper's experiments
(``examples/learn_to_remember/``) share: running fairseq's command lines as steps, binarizing a
synthetic corpus, the quickstart's model size, the long-range analyses' training from scratch
(``long_range_learning.py``, ``document_phenomena.py``: their optimizer and schedule, the sentence
and memory systems), the seconds of training read off a fairseq-train log, and the command-line
type of a named variant of a model (``NAME=OPTIONS``: ``document_phenomena.py``'s and the training
benchmark's ``--variant``).

A step runs one command and keeps what it produced in a file that is written only once the
command succeeded (a ``.partial`` file until then), so a rerun skips every step whose file exists
and resumes an interrupted one; a failed step raises ``StepError`` with the command and the last
lines of its output. Two ways to run one:

- ``run_echoing`` (the quickstart's): prints the command, echoes the output lines it is asked
  to, and keeps stdout and stderr together in a log;
- ``run_saving_stdout`` (the memory-size sweep's and ``long_range_learning.py``'s): prints the
  command on one line and keeps its stdout as the step's output (a translation, a JSON
  result), its stderr in a file beside it.
"""
import argparse
import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1] / "memory_nmt"
TAIL_LINES = 30  # of a failed step's output, in its StepError
MODEL_ARGS = [  # the quickstart's model: 2+2 layers, 128/256, 4 heads
    "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "128", "--decoder-embed-dim", "128",
    "--encoder-ffn-embed-dim", "256", "--decoder-ffn-embed-dim", "256",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--share-all-embeddings", "--dropout", "0.1",
]

PEAK_LR = 2e-3
SCRATCH_TRAINING_ARGS = [  # the long-range analyses' training from scratch, every system alike
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "1.0",
    "--lr", str(PEAK_LR), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100",
    "--warmup-init-lr", "1e-7", "--label-smoothing", "0.1", "--disable-validation",
    "--log-format", "simple", "--log-interval", "50",
]
SENTENCE_SYSTEM = ["--task", "translation", "--arch", "transformer", "--criterion", "label_smoothed_cross_entropy",
                   "--required-batch-size-multiple", "1"]  # fairseq's transformer, as the analyses train it
MEMORY_SYSTEM = ["--task", "document_translation", "--arch", "transformer_recurrent_memory_small",
                 "--criterion", "document_label_smoothed_cross_entropy"]
SPLIT_SEEDS = {"train": 0, "valid": 1000, "test": 2000}  # added to an analysis' --seed: one corpus a split
EPOCH_END = re.compile(r"\bepoch (?P<epoch>\d+) \|.*\| wall (?P<wall>\d+)")


def named_options(taken):
    """argparse's type for ``NAME=OPTIONS`` (a variant NAME, of letters, digits, - and _ and none of
    ``taken``, and its fairseq-train options, one shell-quoted string): (NAME, [options])."""

    def named(text):
        name, equals, options = text.partition("=")
        if not equals or not name or name in taken or not name.replace("-", "").replace("_", "").isalnum():
            others = f" and not one of {', '.join(taken)}" if taken else ""
            raise argparse.ArgumentTypeError(f"{text!r}: give NAME=OPTIONS, NAME of letters, digits, - and _{others}")
        return name, shlex.split(options)

    named.__name__ = "NAME=OPTIONS"  # argparse's "invalid ... value"
    return named


class StepError(RuntimeError):
    """A step failed; the message names the command or file and what went wrong."""


def step_failed(title, command, returncode, where_output_is):
    return StepError(
        f"{title} failed with exit status {returncode}:\n  {shlex.join(command)}\n{where_output_is}"
    )


def fairseq_command(tool):
    return [sys.executable, "-m", f"fairseq_cli.{tool}"]


def run_echoing(title, command, log_path, show=lambda line: True):
    """Run ``command``, echoing the lines ``show`` accepts, and keep its whole output in
    ``log_path`` (written only if it succeeds, so an existing log marks a finished step)."""
    print(f"\n==> {title}\n{shlex.join(command)}\n", flush=True)
    partial = log_path.with_name(log_path.name + ".partial")
    tail = collections.deque(maxlen=TAIL_LINES)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(partial, "w", encoding="utf-8") as log, subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as process:
        for line in process.stdout:
            log.write(line)
            tail.append(line)
            if show(line):
                print(line, end="", flush=True)
    if process.returncode != 0:
        raise step_failed(title, command, process.returncode,
                          f"last lines of its output (all of it in {partial}):\n{''.join(tail)}")
    partial.rename(log_path)


def run_saving_stdout(title, command, output):
    """Run ``command``; its stdout goes to ``output``, written only if it succeeds."""
    print(f"  {title}: {shlex.join(command)}", flush=True)
    partial = output.with_name(output.name + ".partial")
    errors = output.with_name(output.name + ".stderr")
    with open(partial, "w", encoding="utf-8") as out, open(errors, "w", encoding="utf-8") as err:
        returncode = subprocess.run(command, stdout=out, stderr=err, env=dict(os.environ)).returncode
    if returncode != 0:
        tail = (partial.read_text(encoding="utf-8") + errors.read_text(encoding="utf-8")).splitlines()
        raise step_failed(title, command, returncode,
                          f"last lines (all in {partial} and {errors}):\n" + "\n".join(tail[-TAIL_LINES:]))
    partial.rename(output)


def skip(path, what):
    """Whether the step that writes ``path`` is done, saying so if it is."""
    if path.exists():
        print(f"\n==> {what}: {path} exists, skipped", flush=True)
        return True
    return False


def preprocess(work):
    """Binarize the corpus in WORK/corpus (``synthetic.write_documents``' train, valid and test
    files) into WORK/data-bin with fairseq-preprocess, each split's .docids beside it."""
    data = work / "data-bin"
    if skip(data / "test.en-de.docids", "binarizing"):  # copied last
        return
    shutil.rmtree(data, ignore_errors=True)  # fairseq-preprocess refuses an existing dictionary
    corpus = work / "corpus"
    run_echoing("binarizing the corpus", fairseq_command("preprocess") + [
        "--source-lang", "en", "--target-lang", "de", "--joined-dictionary",
        "--trainpref", str(corpus / "train.flat"), "--validpref", str(corpus / "valid.flat"),
        "--testpref", str(corpus / "test.flat"), "--destdir", str(data), "--workers", "1",
    ], work / "preprocess.log")
    for split in ("train", "valid", "test"):
        shutil.copyfile(corpus / f"{split}.docids", data / f"{split}.en-de.docids")


def train_from_scratch(title, data, directory, options, args, epochs):
    """fairseq-train of ``options`` (a system's, and any that override the analyses') on ``data`` at
    the analyses' optimizer and schedule and ``args``' --model-args, --max-tokens, --seed and
    --device for ``epochs`` epochs, a checkpoint kept every epoch in DIRECTORY/checkpoints and its
    output in DIRECTORY/train.log; skipped, saying so, once that log exists."""
    log = directory / "train.log"
    if log.exists():
        print(f"  {title}: {log} exists, skipped")
        return
    directory.mkdir(parents=True, exist_ok=True)
    run_saving_stdout(title, [
        *fairseq_command("train"), str(data), "--user-dir", str(PLUGIN), *SCRATCH_TRAINING_ARGS,
        *shlex.split(args.model_args), "--max-tokens", str(args.max_tokens), "--max-epoch", str(epochs),
        "--seed", str(args.seed), "--save-dir", str(directory / "checkpoints"),
        *(["--cpu"] if args.device == "cpu" else []), *options,
    ], log)


def training_seconds(log) -> dict:
    """{epoch: seconds since its training started} at the end of each epoch, read off the
    fairseq-train log ``log`` (its epoch summaries' ``wall``: training, checkpoint saving and the
    batches' planning); empty where there is no log."""
    if not log.exists():
        return {}
    ends = (EPOCH_END.search(line) for line in log.read_text(encoding="utf-8").splitlines())
    return {int(end["epoch"]): int(end["wall"]) for end in ends if end}
