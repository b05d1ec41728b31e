"""Data-parallel training on fairseq's own engine: torchrun, gloo, CPU-only workers."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PLUGIN, TINY_MODEL, fairseq_command


@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None,
                    reason="torchrun not installed")
def test_two_cpu_workers_form_one_job(data_bin, tmp_path):
    command = [
        str(Path(sys.executable).with_name("torchrun")), "--nproc_per_node", "2",
        fairseq_command("fairseq-train"), str(data_bin), "--user-dir", str(PLUGIN),
        "--task", "document_translation", *TINY_MODEL,
        "--criterion", "document_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "100", "--max-epoch", "1",
        "--optimization-window", "1-2", "--cpu", "--distributed-backend", "gloo",
        "--ddp-backend", "legacy_ddp", "--save-dir", str(tmp_path / "checkpoints"),
        "--no-epoch-checkpoints", "--log-format", "simple",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert len(re.findall(r"distributed init \(rank [01]\)", log)) == 2
    assert "'distributed_world_size': 2" in log
    assert (tmp_path / "checkpoints" / "checkpoint_last.pt").exists()
