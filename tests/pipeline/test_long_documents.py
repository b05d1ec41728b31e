"""A document of 2,000 sentences decodes with the memory of a 10-sentence one (loosely: the
peak resident memory of a fresh process, measured by scripts/benchmark_decoding.py)."""
import json
import subprocess
import sys

from conftest import REPO

TINY = ["--embed-dim", "32", "--ffn-dim", "64", "--heads", "2", "--layers", "1", "--beam", "1",
        "--documents", "2", "--sentences", "2", "--lengths", "10,2000", "--output-length", "2"]


def peak(sentences):
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "benchmark_decoding.py"), *TINY,
         "--measure-peak", str(sentences)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_bytes"]


def test_peak_memory_flat_in_document_length():
    short, long = peak(10), peak(2000)
    # keeping one sentence's carry per sentence (its memory alone: 4 KiB) would add about 11 MiB here
    assert long < short + 4 * 2**20, f"peak {long / 2**20:.1f} MiB for 2,000 sentences, {short / 2**20:.1f} for 10"
