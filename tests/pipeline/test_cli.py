"""The stock fairseq command lines, end to end: preprocess -> train (and resume) -> generate
-> s-BLEU / d-BLEU, fairseq-validate, checkpoints that load under torch >= 2.6, and a run stopped
inside an epoch that exits while batches are made ahead."""
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from commands import run_command
from conftest import MEMORY_RUN, MEMORY_TRAIN, PLUGIN, REPO, TINY_MODEL, build, fairseq_command, run, save_checkpoint



def test_preprocess_train_resume_generate_score(data_bin, memory_run, tmp_path):
    trained, first = memory_run
    assert "num_updates 4" in first
    save_dir = tmp_path / "checkpoints"
    shutil.copytree(trained, save_dir)
    resumed = run([fairseq_command("fairseq-train"), str(data_bin), *MEMORY_RUN, "--save-dir", str(save_dir),
                   "--max-update", "8"])
    log = resumed.stderr + resumed.stdout
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 4 updates\)", log)
    assert "num_updates 8" in log
    assert "resuming a run begun with other training options" not in log  # the same options: no warning

    generated = run([
        fairseq_command("fairseq-generate"), str(data_bin), "--user-dir", str(PLUGIN),
        "--task", "document_translation", "--path", str(save_dir / "checkpoint_last.pt"),
        "--gen-subset", "test", "--beam", "3", "--max-tokens", "200", "--max-len-b", "20", "--cpu",
    ])
    output = tmp_path / "generate.txt"
    output.write_text(generated.stdout)
    sentences = sum(1 for _ in open(data_bin / "test.en-de.docids"))
    for prefix in ("S", "T", "H", "D", "P"):
        ids = sorted(int(m) for m in re.findall(rf"^{prefix}-(\d+)\t", generated.stdout, re.M))
        assert ids == list(range(sentences)), f"{prefix}- lines must cover every sentence exactly once"

    scored = run([
        sys.executable, str(REPO / "scripts" / "document_bleu.py"),
        "--generate-output", str(output), "--docids", str(data_bin / "test.en-de.docids"),
    ])
    assert re.search(r"^s-BLEU \d+\.\d+", scored.stdout, re.M)
    assert re.search(r"^d-BLEU \d+\.\d+", scored.stdout, re.M)
    assert "signature: nrefs:1" in scored.stdout


VALIDATE_COLLECTING_IN_WORKERS = """
import gc, sys
from fairseq_cli.validate import cli_main
from torch.utils.data._utils import worker
loop = worker._worker_loop
def collecting_first(*args, **kwargs):
    gc.collect()
    return loop(*args, **kwargs)
worker._worker_loop = collecting_first
gc.disable()
sys.exit(cli_main())
"""


def test_validate_reports_every_subset_without_a_data_loader_traceback(data_bin, concat_checkpoint):
    """When the garbage collector runs is left to chance in a real run; here it is made certain:
    never in fairseq-validate itself, at the start of every DataLoader worker. The first subset's
    finished workers must not be stopped from the second subset's worker."""
    result = run([
        sys.executable, "-c", VALIDATE_COLLECTING_IN_WORKERS, str(data_bin), "--user-dir", str(PLUGIN),
        "--task", "document_translation", "--path", str(concat_checkpoint), "--valid-subset", "valid,test",
        "--max-tokens", "200", "--cpu",
    ])
    log = result.stdout + result.stderr
    assert "Exception ignored" not in log and "can only test a child process" not in log, log[-3000:]
    for split in ("valid", "test"):
        sentences = sum(1 for _ in open(data_bin / f"{split}.en-de.docids"))
        assert re.search(rf"valid on '{split}' subset \| loss [0-9.]+ .*\| bsz {sentences}$", log, re.M), log[-3000:]


@pytest.fixture(scope="module")
def memory_that_reads(data_bin, tmp_path_factory):
    """A tiny memory model whose Output Attention reads strongly (a fresh one reads nothing): what the
    lanes carry shows in every loss."""
    _, model, _, cfg = build(data_bin, *TINY_MODEL)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for unit in model.memory_units().values():
            unit.read_attn.out_proj.weight.copy_(torch.randn(unit.read_attn.out_proj.weight.shape, generator=generator) * 3)
    path = tmp_path_factory.mktemp("memory_that_reads") / "checkpoint.pt"
    save_checkpoint(model, cfg, path)
    return path


def test_resuming_inside_a_group_replays_it_and_follows_the_same_losses(data_bin, memory_that_reads, tmp_path):
    """Stop after 11 updates (inside a group of lanes), resume to 14, with the training defaults (windows
    of 4 steps, drop, packed rows): the resumed run replays the group's steps that its lanes' memory
    comes from, and its losses are the uninterrupted run's to three decimals. The replay computes with
    the current weights, the uninterrupted run computed with those of their time: a learning rate that
    leaves the weights as they were makes the two the same. A replay that forgets the memory between
    its steps differs by 0.037 at the first resumed update (one that replays nothing, by 0.165)."""
    arguments = [a for a in MEMORY_TRAIN if a not in ("--optimization-window", "1-3")]
    arguments[arguments.index("--lr") + 1] = "1e-7"
    arguments += ["--max-tokens", "60", "--finetune-from-model", str(memory_that_reads), "--disable-validation"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    losses = lambda result: re.findall(r" loss=([0-9.]+)", result.stdout + result.stderr)  # noqa: E731
    expected = losses(run([fairseq_command("fairseq-train"), str(data_bin), *arguments,
                           "--save-dir", str(whole), "--max-update", "14"]))
    first = losses(run([fairseq_command("fairseq-train"), str(data_bin), *arguments,
                        "--save-dir", str(split), "--max-update", "11"]))
    resumed = run([fairseq_command("fairseq-train"), str(data_bin), *arguments,
                   "--save-dir", str(split), "--max-update", "14"])
    log = resumed.stdout + resumed.stderr
    assert re.search(r"resuming inside group \d+: replaying its (first \d+ sentence steps|sentence steps \d+ to \d+)",
                     log), log[-3000:]
    assert "--optimization-window 4" in log and "continue as if they started there" not in log
    assert first + losses(resumed) == expected and len(expected) == 14, (first, losses(resumed), expected)


def test_save_interval_updates_writes_mid_epoch_checkpoints_that_resume(data_bin, memory_run, tmp_path):
    """Checkpoints saved inside an epoch (memory_run's, every 2 updates) resume, and a resumed run that
    trains with other plugin options than the run began with names them in a warning (with the same
    options, test_preprocess_train_resume_generate_score's resume, none); resuming inside an epoch
    whose batches are now planned otherwise (another --optimization-window) is refused: the rest of the
    epoch would repeat or skip sentences."""
    save_dir = tmp_path / "checkpoints"
    shutil.copytree(memory_run[0], save_dir)
    arguments = [*MEMORY_RUN, "--save-dir", str(save_dir)]
    assert (save_dir / "checkpoint_1_2.pt").exists() and (save_dir / "checkpoint_1_4.pt").exists()
    other_gradient = run([fairseq_command("fairseq-train"), str(data_bin), *arguments, "--max-update", "6",
                          "--gradient-across-windows", "recompute",
                          "--restore-file", str(save_dir / "checkpoint_1_4.pt")])
    log = other_gradient.stdout + other_gradient.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_1_4\.pt \(epoch 1 @ 4 updates\)", log)
    assert "num_updates 6" in log or "num_updates=6" in log
    assert ("resuming a run begun with other training options than this command line's: "
            "--gradient-across-windows drop (now recompute). fairseq-train resumes with its command line's "
            "options") in log
    other_batches = [a if a != "1-3" else "2" for a in arguments]
    refused = run_command([fairseq_command("fairseq-train"), str(data_bin), *other_batches, "--max-update", "6",
                           "--restore-file", str(save_dir / "checkpoint_1_2.pt")])
    assert refused.returncode != 0
    assert ("the checkpoint was saved 2 batches into epoch 1, whose training batches are planned otherwise now"
            in refused.stderr), refused.stderr[-2000:]
    assert "Traceback" not in refused.stderr


@pytest.mark.parametrize("contents, message", [
    (b"", "cannot be read as a checkpoint (EOFError"),
    (None, "cannot be read as a checkpoint"),  # a real checkpoint cut short
    ({"epoch": 1}, "torch can read it, but fairseq did not write it (it has no 'model', no 'cfg', no "
                   "'optimizer_history'): give a checkpoint that fairseq-train wrote"),
    ({"model": {}}, "torch can read it, but fairseq did not write it (it has no 'cfg', no 'optimizer_history')"),
], ids=["empty", "cut-short", "not-fairseq", "weights-only"])
def test_a_file_that_is_not_a_whole_checkpoint_is_refused_by_name(data_bin, concat_checkpoint, tmp_path, contents, message):
    """fairseq fails on these with EOFError, OSError or KeyError: 'best_loss' from its loader; the plugin reads
    a checkpoint before fairseq's loader does (fairseq-generate's, on one line: test_new_user_cases.py)."""
    from memory_nmt.pipeline.checkpoint_files import CheckpointFileError, check_checkpoint_file

    path = tmp_path / "checkpoint.pt"
    if contents is None:
        path.write_bytes(concat_checkpoint.read_bytes()[:20000])
    elif isinstance(contents, bytes):
        path.write_bytes(contents)
    else:
        torch.save(contents, path)
    with pytest.raises(CheckpointFileError, match=re.escape(f"{path}: {message}")):
        check_checkpoint_file(str(path))


def test_an_error_in_what_the_user_gave_is_one_line_without_a_traceback(data_bin, tmp_path):
    (tmp_path / "empty.pt").write_bytes(b"")
    result = run_command([
        fairseq_command("fairseq-generate"), str(data_bin), "--user-dir", str(PLUGIN), "--task",
        "document_translation", "--path", str(tmp_path / "empty.pt"), "--gen-subset", "test", "--cpu",
    ])
    assert result.returncode == 1
    assert f"fairseq-generate: error: {tmp_path / 'empty.pt'}: cannot be read as a checkpoint" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_checkpoint_trained_with_another_dictionary_is_refused(data_bin, concat_checkpoint, tmp_path):
    """The same size in another order would decode garbage without a word: the checkpoint keeps
    its dictionaries' fingerprints, which the data's must match."""
    from fairseq import checkpoint_utils

    from memory_nmt.pipeline.data import DocumentDataError

    shuffled = tmp_path / "data-bin"
    shutil.copytree(data_bin, shuffled)
    lines = (shuffled / "dict.en.txt").read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]
    for language in ("en", "de"):
        (shuffled / f"dict.{language}.txt").write_text("\n".join(lines) + "\n")
    checkpoint_utils.load_model_ensemble_and_task([str(concat_checkpoint)], arg_overrides={"data": str(data_bin)})
    with pytest.raises(DocumentDataError, match=r"trained with another source dictionary than .*dict\.en\.txt"):
        checkpoint_utils.load_model_ensemble_and_task([str(concat_checkpoint)], arg_overrides={"data": str(shuffled)})


STOPPED_INSIDE_AN_EPOCH = """
import torch

from memory_nmt.pipeline.batch_iterator import DocumentBatchIterator

class Sentences(torch.utils.data.Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, index):
        return index

def collate(indices):  # a torch operator, which releases the GIL, most of the time
    states = torch.randn(400, 400)
    return (states @ states @ states).sum()

epoch = DocumentBatchIterator(dataset=Sentences(), collate_fn=collate, batch_sampler=[[i] for i in range(1000)],
                              buffer_size=10, disable_shuffling=True).next_epoch_itr(shuffle=False)
next(epoch), next(epoch)
print("stopped inside the epoch", flush=True)
"""


def test_a_run_stopped_inside_an_epoch_exits_while_batches_are_made_ahead():
    """A run stopped inside an epoch (fairseq-train's --max-update), fairseq's daemon thread making
    batches ahead (--data-buffer-size) inside a torch operator: Python's finalization ended that
    thread inside C++ and the process aborted ("terminate called without an active exception",
    exit status -6) after its last checkpoint. The document task's iterator stops its thread before
    exit (memory_nmt/pipeline/batches_ahead.py)."""
    result = subprocess.run([sys.executable, "-c", STOPPED_INSIDE_AN_EPOCH], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert "stopped inside the epoch" in result.stdout, result.stderr[-2000:]
    assert result.returncode == 0 and "terminate called" not in result.stderr, (result.returncode, result.stderr[-2000:])
