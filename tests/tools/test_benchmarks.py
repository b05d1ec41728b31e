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
        "--gradient-reaches", "1", "--systems", "amn", "--workdir", str(tmp_path),
    )
    rows = {label: cells.split() for label, cells in re.findall(r"^  (\S.*?\S)  +(\d.*)$", table, re.M)}
    assert set(rows) == {"transformer", "transformer, document batches", "memory, reach 1",
                         "memory, reach 1, drop", "associated memory"}
    assert all(len(cells) == 10 for cells in rows.values())
    assert rows["transformer"][1] == "1.000" and rows["transformer"][8] == "1.000"
    assert float(rows["associated memory"][4]) == 1.0, "one forward pass an update: a batch of sentences"
    assert float(rows["memory, reach 1"][4]) > 1.0, "lanes: several sentence steps an update"
    assert re.search(r"associated memory/plain: tokens/s [\d.]+, arithmetic [\d.]+, so [\d.]+ of the speed", table)
    assert re.search(r"of which the lanes: [\d.]+ \(target >= 0.95\)", table)


def test_decoding_benchmark_compares_the_same_hypotheses():
    table = run_script(
        "benchmark_decoding.py", "--embed-dim", "32", "--ffn-dim", "64", "--heads", "2", "--layers", "1",
        "--beam", "2", "--documents", "4", "--sentences", "3", "--batch-documents", "2", "--lengths", "10",
        "--repeats", "1",
    )
    assert "identical hypotheses: yes" in table
    assert re.search(r"ratio memory/plain [\d.]+ \(target >= 0.95\)", table)
    assert re.search(r"^\s+10\s+[\d.]+\s+1\.000", table, re.M)
