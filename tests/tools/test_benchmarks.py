"""Both benchmark scripts end to end, on tiny models and few updates: they run every model they
compare in its own batches and print a row for each with the ratios the README quotes; a value
they cannot use is refused on one line while the command line is parsed, a system whose
batches do not fit --max-tokens is reported as not measured beside the rows that are, a
variant whose options the model refuses stops the run before anything is measured, and a
variant's own batching options win over the benchmark's."""
import logging
import re
import sys

import pytest
import torch
from conftest import REPO, script_in_process

from memory_nmt_tools.benchmarks import decoding, training
from memory_nmt_tools.benchmarks.peak_memory import MiB

BENCHMARKS = {"benchmark_decoding.py": decoding, "benchmark_training.py": training}
REFUSED = [  # script, arguments, the line it ends with after "SCRIPT: error: "
    ("benchmark_decoding.py", ["--beam", "0"], "argument --beam: 0: give 1 or more"),
    ("benchmark_decoding.py", ["--documents", "0"], "argument --documents: 0: give 1 or more"),
    ("benchmark_decoding.py", ["--sentences", "0"], "argument --sentences: 0: give 1 or more"),
    ("benchmark_decoding.py", ["--lengths", "10,0"], "argument --lengths: 0: give 1 or more"),
    ("benchmark_decoding.py", ["--lengths", "10,,100"],
     "argument --lengths: '10,,100': give comma-separated values, none of them empty"),
    ("benchmark_decoding.py", ["--repeats", "0"], "argument --repeats: 0: give 1 or more"),
    ("benchmark_decoding.py", ["--device", "cuda"], "--device cuda: torch finds no CUDA device here; give --device cpu"),
    ("benchmark_decoding.py", ["--embed-dim", "30", "--heads", "4"], "--embed-dim 30 and --heads 4: each head "
     "takes an equal share of the embedding; give an --embed-dim that --heads divides"),
    ("benchmark_decoding.py", ["--heads", "3"], "--embed-dim 256 and --heads 3: each head takes an equal share "
     "of the embedding; give an --embed-dim that --heads divides"),
    ("benchmark_decoding.py", ["--batch-documents", "0"], "argument --batch-documents: 0: give 1 or more"),
    ("benchmark_decoding.py", ["--layers", "0"], "argument --layers: 0: give 1 or more"),
    ("benchmark_decoding.py", ["--output-length", "0"], "argument --output-length: 0: give 1 or more"),
    ("benchmark_decoding.py", ["--memory-size", "5000"], "argument --memory-size: 5000: give 1 to 4096"),
    ("benchmark_training.py", ["--updates", "0"], "argument --updates: 0: give 1 or more"),
    ("benchmark_training.py", ["--repeats", "0"], "argument --repeats: 0: give 1 or more"),
    ("benchmark_training.py", ["--documents", "0"], "argument --documents: 0: give 1 or more"),
    ("benchmark_training.py", ["--max-tokens", "0"], "argument --max-tokens: 0: give 1 or more"),
    ("benchmark_training.py", ["--warmup", "-1"], "argument --warmup: -1: give 0 or more"),
    ("benchmark_training.py", ["--passes-per-step", "0"], "argument --passes-per-step: 0: give 1 or more"),
    ("benchmark_training.py", ["--optimization-window", "5-2"], "--optimization-window '5-2': give 'full', "
     "a number of sentence steps such as 4, or a range such as 1-8"),
    ("benchmark_training.py", ["--gradient-reaches", "window,junk"],
     "argument --gradient-reaches: junk: give 'window' or a number of sentences (0 or more)"),
    ("benchmark_training.py", ["--device", "cuda"], "--device cuda: torch finds no CUDA device here; give --device cpu"),
    ("benchmark_training.py", ["--fp16"], "--fp16 needs --device cuda"),
    ("benchmark_training.py", ["--fp16", "--amp-bf16"], "argument --amp-bf16: not allowed with argument --fp16"),
    ("benchmark_decoding.py", ["--fp16"], "--fp16 needs --device cuda"),
    ("benchmark_decoding.py", ["--fp16", "--amp-bf16"], "argument --amp-bf16: not allowed with argument --fp16"),
]


def run_script(request, monkeypatch, capsys, name, *arguments):
    """What ``python scripts/NAME arguments`` prints, its command line run in this process (each of its
    measurements of peak memory in a fresh process of its own, as the script makes them)."""
    root = logging.getLogger()
    request.addfinalizer(lambda level=root.level: root.setLevel(level))  # benchmark_training.py's main sets it
    done = script_in_process(monkeypatch, capsys, REPO / "scripts" / name, *arguments)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def rows_of(table: str) -> dict:
    """{row label: its cells} of the training benchmark's table of models."""
    return {label: cells.split() for label, cells in re.findall(r"^  (\S.*?\S)  +(\d.*)$", table, re.M)}


def test_training_benchmark_prints_a_row_per_system_in_its_own_batches(tmp_path, request, monkeypatch, capsys):
    """The transformer's, the memory model's and the variant's peaks (the fresh process builds the
    variant from the command line again) are measured in fresh processes, as the script measures every
    row's; the other rows' are set (a fresh process a row would cost more than the rows; at this size a
    peak is near 0 anyway)."""
    measure = training.peak_in_subprocess
    measured = {"plain", "memory", "memory_variant_attached"}
    monkeypatch.setattr(training, "peak_in_subprocess",
                        lambda args, system: measure(args, system) if system in measured else 3 * MiB)
    table = run_script(
        request, monkeypatch, capsys, "benchmark_training.py", "--documents", "40", "--warmup", "1",
        "--updates", "1", "--repeats", "1", "--gradient-reaches", "window,0", "--optimization-window", "2",
        "--systems", "amn", "--workdir", str(tmp_path), "--checkpoint-activations",
        "--variant", "attached=--memory-gradient window",
    )
    rows_table, decomposition = table.split("arithmetic per target token in F = ")
    rows = rows_of(rows_table)
    assert set(rows) == {"transformer", "transformer, document batches", "memory, window", "memory, window, recompute",
                         "memory, window, checkpointed", "memory, reach 0", "memory, window, attached",
                         "associated memory"}
    assert all(len(cells) == 11 for cells in rows.values())
    assert rows["transformer"][1] == "1.000" and rows["transformer"][8] == "1.000"
    assert float(rows["associated memory"][4]) == 1.0, "one forward pass an update: a batch of sentences"
    assert float(rows["memory, window"][4]) > 1.0, "lanes: several sentence steps an update"
    assert abs(float(rows["memory, window"][9]) * float(rows["memory, window"][8]) - 1) < 0.01, "ceiling: 1 / x arith"
    assert re.search(r"associated memory/plain: tokens/s [\d.]+, arithmetic [\d.]+, so [\d.]+ of the speed", table)
    assert re.search(r"the transformer in the memory model's batches/plain: tokens/s [\d.]+ \(target >= 0.93\)", table)
    parts = {name: cells for name, *cells in (re.split(r"\s{2,}", line.strip()) for line in decomposition.splitlines()[2:])}
    assert list(parts) == ["the transformer's forward and backward", "padding of the memory model's batches",
                           "the memory, read and written", "the gradient to earlier sentences", "total"]
    window = [float(parts[name][0]) for name in list(parts)[:4]]
    assert 2.5 < window[0] < 3.5, "forward and backward: about 3 forward passes"
    assert abs(sum(window) - float(parts["total"][0].split()[0])) < 0.02, "the parts add up"
    gradient = [float(cell) for cell in parts["the gradient to earlier sentences"]]
    assert 0 < gradient[0] < gradient[1], "the states a window passes on; more with the step recomputed"
    assert gradient[2] > gradient[0], "the variant's attached memory: the backward pass goes through the writes too"
    assert len(gradient) == 3, "no part of the checkpointed row is the gradient's: its layers run forward again"
    assert re.search(r"memory, window, attached/memory, window: tokens/s [\d.]+, arithmetic [\d.]+, peak memory "
                     r"[\d.]+", table)
    checkpointed = re.search(r"memory, window, checkpointed/memory, window: peak memory [\d.]+, tokens/s [\d.]+, "
                             r"arithmetic ([\d.]+) \(every layer's forward again; padding ([\d.]+)\)", table)
    assert checkpointed and float(checkpointed[1]) > 1.1, "each layer's forward again"
    assert float(checkpointed[2]) == float(rows["memory, window, checkpointed"][3]) == float(rows["memory, window"][3]), \
        "the same packed rows"


@pytest.mark.parametrize("precision", [[], ["--amp-bf16"]], ids=["fp32", "amp_bf16"])
def test_decoding_benchmark_compares_the_same_hypotheses(request, monkeypatch, capsys, precision):
    """Both models decode alike, in float32 or both in bfloat16 under autocast (on the CPU too)."""
    table = run_script(
        request, monkeypatch, capsys, "benchmark_decoding.py", "--embed-dim", "32", "--ffn-dim", "64",
        "--heads", "2", "--layers", "1", "--beam", "2", "--documents", "4", "--sentences", "3",
        "--batch-documents", "2", "--lengths", "10", "--repeats", "1", *precision,
    )
    assert re.search(r"^device cpu, \d+ threads, " + ("bfloat16 autocast;" if precision else "fp32;"), table, re.M)
    assert "identical hypotheses: yes" in table
    assert re.search(r"ratio memory/plain [\d.]+ \(target >= 0.95\)", table)
    assert re.search(r"^\s+10\s+[\d.]+\s+1\.000", table, re.M)


@pytest.mark.parametrize("script, arguments, message", REFUSED)
def test_benchmarks_refuse_what_they_cannot_use_on_one_line(script, arguments, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(REPO / "scripts" / script)])  # argparse names the script by it
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    workdir = ["--workdir", str(tmp_path)] if script == "benchmark_training.py" else []  # were it accepted
    with pytest.raises(SystemExit) as refused:
        BENCHMARKS[script].parse_args(arguments + workdir)
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"{script}: error: {message}"


def test_training_benchmark_measures_the_other_rows_when_a_chunk_does_not_fit(data_bin, request, monkeypatch, capsys):
    request.addfinalizer(lambda level=logging.getLogger().level: logging.getLogger().setLevel(level))  # main sets it
    peaks_of = []

    def peak_in_subprocess(args, system):  # a fresh process per row would cost more than the rows
        peaks_of.append(system)
        return MiB

    monkeypatch.setattr(training, "peak_in_subprocess", peak_in_subprocess)
    training.main([
        "--data", str(data_bin), "--max-tokens", "30", "--warmup", "0", "--updates", "1", "--repeats", "1",
        "--gradient-reaches", "0", "--systems", "local_global",
    ])
    table, decomposition = capsys.readouterr().out.split("arithmetic per target token in F = ")
    rows = rows_of(table)
    assert set(rows) == {"transformer", "transformer, document batches", "memory, reach 0"}
    assert all(len(cells) == 11 for cells in rows.values())
    assert re.search(r"^  local\+global, chunks of 20 +not measured at --max-tokens 30: the chunk of \d+ sentences "
                     r"from .* does not fit one batch .*; give it a larger --max-tokens in a run of its own "
                     r"\(--systems local_global\)$", table, re.M)
    assert peaks_of == ["plain", "plain_documents", "memory"], "no process for the row not measured"
    assert "local+global, chunks of 20/plain" not in table
    assert "memory, reach 0" in decomposition.splitlines()[1]


def test_training_benchmark_stops_on_a_variant_whose_options_are_refused(data_bin, request, monkeypatch):
    request.addfinalizer(lambda level=logging.getLogger().level: logging.getLogger().setLevel(level))  # main sets it
    monkeypatch.setattr(training, "peak_in_subprocess", lambda args, system: pytest.fail("measured a row"))
    with pytest.raises(SystemExit, match=r": error: --memory-gradient window with --gradient-reach 1: "):
        training.main([
            "--data", str(data_bin), "--warmup", "0", "--updates", "1", "--repeats", "1",
            "--gradient-reaches", "window", "--systems", "",
            "--variant", "refused=--memory-gradient window --gradient-reach 1",
        ])


def test_a_variants_own_options_override_the_benchmarks(data_bin):
    args = training.parse_args(["--data", str(data_bin), "--variant", "long=--optimization-window 8 --max-tokens 700"])
    trainer = training.trainer_of("memory_variant_long", str(data_bin), args)
    assert (str(trainer.cfg.task.optimization_window), trainer.cfg.dataset.max_tokens) == ("8", 700)
