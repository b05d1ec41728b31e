"""Both benchmark scripts end to end, on tiny models and few updates: they run every model they
compare in its own batches and print a row for each with the ratios the README quotes."""
import re
import subprocess
import sys

from conftest import REPO


def run_script(name, *arguments):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / name), *arguments],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_training_benchmark_prints_a_row_per_system_in_its_own_batches(tmp_path):
    table = run_script(
        "benchmark_training.py", "--documents", "40", "--warmup", "1", "--updates", "1", "--repeats", "1",
        "--gradient-reaches", "window,0", "--optimization-window", "2", "--systems", "amn", "--workdir", str(tmp_path),
    )
    rows_table, decomposition = table.split("arithmetic per target token in F = ")
    rows = {label: cells.split() for label, cells in re.findall(r"^  (\S.*?\S)  +(\d.*)$", rows_table, re.M)}
    assert set(rows) == {"transformer", "transformer, document batches", "memory, window", "memory, window, recompute",
                         "memory, reach 0", "associated memory"}
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


def test_decoding_benchmark_compares_the_same_hypotheses():
    table = run_script(
        "benchmark_decoding.py", "--embed-dim", "32", "--ffn-dim", "64", "--heads", "2", "--layers", "1",
        "--beam", "2", "--documents", "4", "--sentences", "3", "--batch-documents", "2", "--lengths", "10",
        "--repeats", "1",
    )
    assert "identical hypotheses: yes" in table
    assert re.search(r"ratio memory/plain [\d.]+ \(target >= 0.95\)", table)
    assert re.search(r"^\s+10\s+[\d.]+\s+1\.000", table, re.M)
