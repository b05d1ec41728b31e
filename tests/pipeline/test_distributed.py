"""Data-parallel training on fairseq's own engine: torchrun, gloo, CPU-only workers; a run on two workers
resumes inside an epoch and finetunes from a pretrained checkpoint (every worker but the first reads
the checkpoint the first sends it, with torch's safe unpickling)."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PLUGIN, TINY_MODEL, fairseq_command


@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None,
                    reason="torchrun not installed")
def test_torchrun_without_the_legacy_ddp_backend_is_refused_by_name(data_bin, tmp_path):
    """Without --distributed-world-size the task's config says 1 worker: the check counts the
    process group's (fairseq failed on PyTorch's DistributedDataParallel on CPU)."""
    command = [
        str(Path(sys.executable).with_name("torchrun")), "--nproc_per_node", "2",
        fairseq_command("fairseq-train"), str(data_bin), "--user-dir", str(PLUGIN),
        "--task", "document_translation", *TINY_MODEL,
        "--criterion", "document_label_smoothed_cross_entropy", "--optimizer", "adam", "--lr", "1e-3",
        "--max-tokens", "100", "--max-update", "1", "--cpu", "--distributed-backend", "gloo",
        "--save-dir", str(tmp_path / "checkpoints"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "fairseq-train: error: --ddp-backend pytorch_ddp: document training runs a window's sentence steps through the model before it back-propagates them" in log
    assert "device_ids and output_device" not in log


def test_two_workers_follow_one_worker_with_update_freq_2(data_bin, tmp_path):
    """Two workers against one with --update-freq 2: the same number of windows per update,
    but not the same pairs (whole document groups are dealt to workers), so the losses agree
    within a tolerance, not exactly. fairseq's own check that every worker has the same
    gradient norm also runs at every update of the two-worker run."""
    common = [
        str(data_bin), "--user-dir", str(PLUGIN), "--task", "document_translation", *TINY_MODEL,
        "--criterion", "document_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt",
        "--warmup-updates", "5", "--max-tokens", "100", "--optimization-window", "2", "--cpu",
        "--seed", "1", "--max-update", "8", "--ddp-backend", "legacy_ddp", "--disable-validation",
        "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1",
    ]
    two = subprocess.run(
        [str(Path(sys.executable).with_name("torchrun")), "--nproc_per_node", "2",
         fairseq_command("fairseq-train"), *common, "--distributed-backend", "gloo",
         "--save-dir", str(tmp_path / "two")],
        capture_output=True, text=True, timeout=600,
    )
    one = subprocess.run(
        [fairseq_command("fairseq-train"), *common, "--update-freq", "2", "--save-dir", str(tmp_path / "one")],
        capture_output=True, text=True, timeout=600,
    )
    losses = [
        [float(x) for x in re.findall(r" loss=([0-9.]+)", run.stdout + run.stderr)] for run in (two, one)
    ]
    assert two.returncode == 0 and one.returncode == 0, (two.stderr + one.stderr)[-3000:]
    assert len(losses[0]) == len(losses[1]) == 8
    assert max(abs(a - b) for a, b in zip(*losses)) < 0.3, losses
    # other pairs of windows, so other updates: 0.05 (rows padded) and 0.12 (packed) apart at the
    # 8th update when measured, where the loss has fallen by 1.1
    assert abs(losses[0][-1] - losses[1][-1]) < 0.15, losses


def on_two_workers(*arguments):
    """fairseq-train on two CPU workers under torchrun, checked to end well as one job of two ranks (its log)."""
    command = [str(Path(sys.executable).with_name("torchrun")), "--nproc_per_node", "2",
               fairseq_command("fairseq-train"), *arguments, "--cpu", "--distributed-backend", "gloo",
               "--ddp-backend", "legacy_ddp", "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert len(re.findall(r"distributed init \(rank [01]\)", log)) == 2 and "'distributed_world_size': 2" in log
    return log


def test_two_workers_finetune_from_a_pretrained_checkpoint_and_resume_inside_an_epoch_as_one_run(
        data_bin, pretrained, tmp_path):
    """Finetuned from the mBART-shaped checkpoint (its language options taken from it: the command line gives
    none, and the run's own checkpoints hold them) in windows of 1-2 sentences drawn at random for one epoch,
    stopped after 2 updates inside it and resumed: the losses are the uninterrupted run's (rank 1 failed to
    read the checkpoint rank 0 sent it), and both end the epoch validating the valid split dealt to the
    two workers."""
    from memory_nmt_tools.checkpoint_options import checkpoint_options

    path = pretrained["mbart"]
    arguments = [str(data_bin), "--user-dir", str(PLUGIN), "--task", "document_translation",
                 "--arch", "transformer_recurrent_memory", "--memory-size", "4", *checkpoint_options(path, "shape"),
                 "--finetune-from-model", path, "-s", "en", "-t", "de",
                 "--criterion", "document_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
                 "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "2",
                 "--max-tokens", "100", "--optimization-window", "1-2", "--seed", "1"]
    losses = lambda log: re.findall(r" loss=([0-9.]+)", log)  # noqa: E731
    whole = on_two_workers(*arguments, "--save-dir", str(tmp_path / "whole"), "--max-epoch", "1")
    first = on_two_workers(*arguments, "--save-dir", str(tmp_path / "split"), "--max-update", "2",
                           "--disable-validation")
    resumed = on_two_workers(*arguments, "--save-dir", str(tmp_path / "split"), "--max-epoch", "1")
    assert f"language options of {path}, which this command line does not give: --langs en,de" in first
    assert f"Loaded checkpoint {path} (epoch 1 @ 0 updates)" in first, first[-3000:]
    assert re.search(r"Loaded checkpoint .*split/checkpoint_last\.pt \(epoch 1 @ 2 updates\)", resumed), resumed[-3000:]
    assert re.search(r"language options of .*split/checkpoint_last\.pt, which this command line does not give: "
                     r"--langs en,de", resumed), "the run's checkpoint holds the options it took"
    assert re.search(r"epoch 001:\s+3 / ", whole), "the epoch holds more than 2 updates: the resume is inside it"
    updates = int(re.search(r"epoch 001:\s+\d+ / (\d+) ", whole)[1])
    assert losses(first) + losses(resumed) == losses(whole) and len(losses(whole)) == updates, (first, resumed, whole)
    assert all("valid on 'valid' subset" in log for log in (whole, resumed)), resumed[-3000:]
