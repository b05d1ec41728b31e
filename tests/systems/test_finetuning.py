"""Finetuning from a sentence-level checkpoint (paper section 4): a plain ``transformer``
checkpoint starts the memory model through ``--finetune-from-model``, its memory parameters
new and logged as such; a checkpoint that does not fit is refused by name; and
``--lr-scheduler two_rate_inverse_sqrt`` trains memory and pretrained parameters with their
own peak learning rate and warm-up."""
import logging
import re

import pytest
import torch
from fairseq import checkpoint_utils, metrics
from fairseq.trainer import Trainer

import memory_nmt.systems.two_rate_schedule  # noqa: F401  registers the scheduler for the in-process tests
from commands import run_command
from conftest import (
    COMMON,
    TINY_DIMS,
    TINY_MODEL,
    TINY_TRANSFORMER_MODULES,
    batches,
    build,
    fairseq_command,
    fitted_parameters,
    make_reads_nonzero,
    refused_option,
    run,
)
from memory_nmt.pipeline.checkpoint_fit import CheckpointMismatchError
from memory_nmt.pipeline.option_ranges import OptionError

# --lr 0 freezes the pretrained parameters: what the finetuned checkpoint holds for them is
# what it started from at update 0.
FINETUNE = [
    *COMMON, "--task", "document_translation", *TINY_MODEL,
    "--criterion", "document_label_smoothed_cross_entropy", "--optimization-window", "1-3",
    "--lr-scheduler", "two_rate_inverse_sqrt", "--lr", "0", "--warmup-updates", "2",
    "--context-lr", "1e-3", "--context-warmup-updates", "1",
]
UNSHARED_DIMS = [arg for arg in TINY_DIMS if arg != "--share-all-embeddings"]


def model_state(path):
    return checkpoint_utils.load_checkpoint_to_cpu(str(path))["model"]


def logged_lrs(log):
    """{update: (lr, lr_context)} from fairseq's per-update log lines."""
    return {
        int(m.group(1)): (float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"num_updates=(\d+), lr=([\d.e-]+), lr_context=([\d.e-]+)", log)
    }


def test_finetune_from_sentence_checkpoint_through_the_cli(data_bin, sentence_checkpoint, tmp_path):
    save_dir = tmp_path / "memory"
    command = [fairseq_command("fairseq-train"), str(data_bin), *FINETUNE, "--save-dir", str(save_dir),
               "--finetune-from-model", str(sentence_checkpoint)]
    first = run([*command, "--max-update", "3"])
    log = first.stdout + first.stderr
    assert "optimizer, lr scheduler, meters, dataloader will be reset" in log
    assert "computes otherwise than it did" not in log, "the sentence model's own options: no warning"
    loaded, new = fitted_parameters(log)
    assert loaded[1] == TINY_TRANSFORMER_MODULES
    assert new[1] == "encoder.layers.1.memory, decoder.layers.1.memory"

    sentence, memory = model_state(sentence_checkpoint), model_state(save_dir / "checkpoint_last.pt")
    memory_keys = {key for key in memory if ".memory." in key}
    assert memory_keys and set(memory) - memory_keys == set(sentence)
    assert loaded[0] == sum(1 for key in sentence if key.endswith(("weight", "bias")))
    for key, value in sentence.items():
        assert torch.equal(memory[key], value), f"{key} is not the sentence checkpoint's"
    read_out = [key for key in memory_keys if key.endswith("read_attn.out_proj.weight")]
    assert read_out and all(memory[key].abs().sum() > 0 for key in read_out), \
        "the memory's Output Attention starts at zero and must have trained at --context-lr"

    resumed = run([*command, "--max-update", "4"])
    log = resumed.stdout + resumed.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 3 updates\)", log)
    assert logged_lrs(log)[4] == (0.0, pytest.approx(1e-3 * 4**-0.5, rel=1e-3))


def test_checkpoint_of_other_dimensions_is_refused_by_name(data_bin, sentence_checkpoint, tmp_path):
    result = run_command(
        [fairseq_command("fairseq-train"), str(data_bin), *FINETUNE, "--save-dir", str(tmp_path),
         "--finetune-from-model", str(sentence_checkpoint), "--max-update", "1",
         "--encoder-embed-dim", "16", "--decoder-embed-dim", "16"])
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"fairseq-train: error: {sentence_checkpoint} does not fit this model: it was built with --encoder-embed-dim "
        "32 (this model's: 16), --decoder-embed-dim 32 (this model's: 16); give the checkpoint's "
        f"(memory-nmt-checkpoint-options {sentence_checkpoint} prints them)"
    ), result.stderr[-3000:]


def test_shared_embeddings_checkpoint_loads_into_separate_embeddings(data_bin, sentence_checkpoint):
    _, model, _, cfg = build(data_bin, "--arch", "transformer_recurrent_memory_small", *UNSHARED_DIMS)
    state = model_state(sentence_checkpoint)
    model.load_state_dict(state, model_cfg=cfg.model)
    tables = [model.encoder.embed_tokens.weight, model.decoder.embed_tokens.weight,
              model.decoder.output_projection.weight]
    assert len({id(table) for table in tables}) == 3
    for table in tables:
        assert torch.equal(table, state["encoder.embed_tokens.weight"])


def test_separate_embeddings_checkpoint_is_refused_by_a_shared_model(data_bin):
    _, plain, _, _ = build(data_bin, "--arch", "transformer", *UNSHARED_DIMS, task="translation")
    _, model, _, cfg = build(data_bin, *TINY_MODEL)
    with pytest.raises(CheckpointMismatchError, match=(
        r"this model shares encoder\.embed_tokens\.weight and decoder\.embed_tokens\.weight, but "
        r"the checkpoint has different tensors for them: .* without --share-all-embeddings")):
        model.load_state_dict(plain.state_dict(), model_cfg=cfg.model)


def test_checkpoint_with_other_layers_is_refused_by_name(data_bin):
    deeper = ["--encoder-layers", "3", "--decoder-layers", "3"]
    _, plain, _, _ = build(data_bin, "--arch", "transformer", *TINY_DIMS, *deeper, task="translation")
    _, model, _, cfg = build(data_bin, *TINY_MODEL)
    with pytest.raises(CheckpointMismatchError, match=(
        r"this model has no place for the checkpoint's \d+ tensors: encoder\.layers\.2, decoder\.layers\.2: ")):
        model.load_state_dict(plain.state_dict(), model_cfg=cfg.model)


def test_a_checkpoint_fits_as_fairseqs_load_gives_it_upgraded_and_pruned(data_bin):
    """A model checks the fit of what it loads: the checkpoint upgraded as fairseq upgrades one (the
    layer-norm names fairseq had before 0.6, ``layer_norms.0``) and pruned for LayerDrop
    (``encoder_layers_to_keep``: the kept layers renumbered), so neither is refused as parameters
    the model has no place for, and each lands where fairseq puts it."""
    _, model, _, cfg = build(data_bin, *TINY_MODEL)
    saved = model.state_dict()
    old_names = {re.sub(r"^(encoder\.layers\.\d+)\.self_attn_layer_norm", r"\1.layer_norms.0",
                        re.sub(r"^(encoder\.layers\.\d+)\.final_layer_norm", r"\1.layer_norms.1", key)): value
                 for key, value in saved.items()}
    assert "encoder.layers.1.layer_norms.0.weight" in old_names
    _, other, _, _ = build(data_bin, *TINY_MODEL)
    other.load_state_dict(old_names, model_cfg=cfg.model)
    assert all(torch.equal(other.state_dict()[key], value) for key, value in saved.items())

    _, shallower, _, kept = build(data_bin, *TINY_MODEL, "--encoder-layers", "1")
    kept.model.encoder_layers_to_keep, kept.model.decoder_layers_to_keep = "1", "0,1"
    shallower.load_state_dict(dict(saved), model_cfg=kept.model)
    loaded = shallower.state_dict()
    second_layer = [key for key in saved if key.startswith("encoder.layers.1.")]
    assert second_layer and all(torch.equal(loaded[key.replace(".layers.1.", ".layers.0.")], saved[key])
                                for key in second_layer)


def inverse_sqrt(peak, warmup, update):
    return peak * update / warmup if update < warmup else peak * (warmup / update) ** 0.5


def effective_lr(before, parameters):
    """The step size each parameter group took: -<delta, grad> / <grad, grad> over the group."""
    moved = sum(((p.detach() - before[p]) * p.grad).sum() for p in parameters if p.grad is not None)
    squared = sum((p.grad**2).sum() for p in parameters if p.grad is not None)
    return float(-moved / squared)


def test_two_learning_rates_move_each_group_by_its_own(data_bin):
    peaks, warmups = {"pretrained": 0.02, "memory": 0.1}, {"pretrained": 4, "memory": 2}
    task, model, criterion, cfg = build(
        data_bin, *TINY_MODEL, "--optimizer", "sgd", "--lr-scheduler", "two_rate_inverse_sqrt",
        "--lr", str(peaks["pretrained"]), "--warmup-updates", str(warmups["pretrained"]),
        "--context-lr", str(peaks["memory"]), "--context-warmup-updates", str(warmups["memory"]),
        "--max-tokens", "200", "--optimization-window", "1", "--gradient-across-windows", "recompute",
    )
    make_reads_nonzero(model)  # else the memory's read gets no gradient but at its output
    trainer = Trainer(cfg, task, model, criterion)
    groups = {
        "pretrained": [p for n, p in model.named_parameters() if ".memory." not in n],
        "memory": [p for n, p in model.named_parameters() if ".memory." in n],
    }
    assert [[id(p) for p in group["params"]] for group in trainer.optimizer.param_groups] == [
        [id(p) for p in parameters] for parameters in groups.values()]

    with metrics.aggregate(new_root=True) as logged:
        samples = batches(task, "train")[:6]
        assert len(samples) == 6
        for update, sample in enumerate(samples):
            before = {p: p.detach().clone() for p in model.parameters()}
            trainer.train_step([sample])
            scheduled = {name: inverse_sqrt(peaks[name], warmups[name], update) for name in groups}
            moved = {name: effective_lr(before, parameters) for name, parameters in groups.items()}
            for name in groups:
                assert moved[name] == pytest.approx(scheduled[name], rel=1e-4, abs=1e-9), (update, name)
            if update:  # update 0 has lr 0 in both groups (warm-up from 0)
                assert moved["memory"] / moved["pretrained"] == pytest.approx(
                    scheduled["memory"] / scheduled["pretrained"], rel=1e-4)
            following = {name: inverse_sqrt(peaks[name], warmups[name], update + 1) for name in groups}
            assert [g["lr"] for g in trainer.optimizer.param_groups] == pytest.approx(list(following.values()))
            assert logged.get_smoothed_value("lr") == pytest.approx(following["pretrained"])
            assert logged.get_smoothed_value("lr_context") == pytest.approx(following["memory"])


def test_two_rate_schedule_needs_context_parameters(data_bin):
    task, model, criterion, cfg = build(
        data_bin, "--arch", "transformer", *TINY_DIMS, "--optimizer", "adam", "--lr", "1e-3",
        "--lr-scheduler", "two_rate_inverse_sqrt", "--context-lr", "1e-3", task="translation",
    )
    with pytest.raises(ValueError, match="holds no parameters of a document system's own .*; use it with a document system's --arch"):
        Trainer(cfg, task, model, criterion).optimizer


@pytest.mark.parametrize("option, value, range_", [
    ("--context-lr", "-1", "0 or more"), ("--context-warmup-updates", "0", "1 or more"),
])
def test_the_two_rate_schedules_options_out_of_their_range_are_refused_as_parsed(data_bin, capsys, option, value, range_):
    """A negative --context-lr trained by gradient ascent, a warm-up of 0 divided by zero."""
    arguments = [*TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "two_rate_inverse_sqrt",
                 "--context-lr", "1e-3", option, value]
    assert refused_option(capsys, data_bin, *arguments).endswith(f"argument {option}: {value}: give {range_}")


def test_the_two_rate_schedule_refuses_a_warm_up_of_0(data_bin):
    task, model, criterion, cfg = build(
        data_bin, *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "two_rate_inverse_sqrt",
        "--context-lr", "1e-3", "--warmup-updates", "0",
    )
    with pytest.raises(OptionError, match="--warmup-updates 0: give 1 or more with --lr-scheduler two_rate_inverse_sqrt"):
        Trainer(cfg, task, model, criterion).lr_scheduler


def test_the_former_names_of_the_context_rates_are_taken_with_a_warning(data_bin, caplog):
    """--memory-lr and --memory-warmup-updates, named after the memory though they set every
    system's added parameters, are --context-lr and --context-warmup-updates now."""
    two_rates = [*TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "two_rate_inverse_sqrt"]
    task, model, criterion, cfg = build(data_bin, *two_rates, "--memory-lr", "2e-3", "--memory-warmup-updates", "3")
    caplog.set_level(logging.INFO)
    Trainer(cfg, task, model, criterion).lr_scheduler
    assert "--memory-lr is deprecated: give --context-lr" in caplog.text
    assert "--memory-warmup-updates is deprecated: give --context-warmup-updates" in caplog.text
    assert "context tensors (--context-lr), peak lr 0.002 after 3 warm-up updates" in caplog.text
    task, model, criterion, cfg = build(data_bin, *two_rates, "--memory-lr", "2e-3", "--context-lr", "1e-3")
    with pytest.raises(OptionError, match=r"^--memory-lr 0.002 and --context-lr 0.001: give --context-lr only"):
        Trainer(cfg, task, model, criterion).lr_scheduler


def test_memory_checkpoint_with_other_memory_layers_is_refused(data_bin):
    _, top_only, _, _ = build(data_bin, *TINY_MODEL)
    _, both_layers, _, _ = build(data_bin, *TINY_MODEL, "--memory-layers", "0,1")
    with pytest.raises(CheckpointMismatchError, match=r"layers\.0\.memory"):
        both_layers.load_state_dict(top_only.state_dict())
