"""docs/adding-a-system.md, followed literally: its code blocks, put together in order, are a
system that the pipeline trains and decodes, reading the previous sentence of its document and
nothing else, with its option declared once and checked; registered as a plugin, the stock CLIs
train it and translate with it as the hub does."""
import re
import types

import pytest
import torch

from conftest import (
    COMMON,
    PLUGIN,
    REPO,
    TINY_DIMS,
    Recorder,
    batches,
    build,
    check_clis_and_hub_translate_alike,
    check_context_reach,
    check_hypotheses_score_as_teacher_forced,
    fairseq_command,
    lane_steps,
    refused_option,
    run,
)

PAGE = REPO / "docs" / "adding-a-system.md"
TOY = ["--arch", "toy_previous_summary_small", *TINY_DIMS]


def page_code() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 5, "the page lost its code"
    return "\n\n".join(blocks)


@pytest.fixture(scope="module")
def toy_system():
    """The page's Python blocks, run in order as one module (registering the toy system)."""
    module = types.ModuleType("toy_previous_summary")
    exec(compile(page_code(), str(PAGE), "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module")
def toy_plugin(tmp_path_factory):
    """A --user-dir that registers the plugin and the toy system (step 6's registration line, for
    a system kept outside the package)."""
    plugin = tmp_path_factory.mktemp("toy") / "toy_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text("import memory_nmt  # noqa: F401\n\n" + page_code(), encoding="utf-8")
    return plugin


def test_it_reads_the_previous_sentence_of_its_document_and_nothing_else(toy_system, data_bin):
    task, model, _, _ = build(data_bin, *TOY)
    assert isinstance(model, toy_system.PreviousSummaryModel)
    model.eval()
    check_context_reach(model, batches(task, "test", max_tokens=100), task.source_dictionary, reach=1)


def test_it_trains_through_the_criterion_and_decodes_every_sentence_once(toy_system, data_bin):
    task, model, criterion, _ = build(data_bin, *TOY, "--optimization-window", "3")
    model.train()
    window = next(item["steps"] for item in batches(task, "train", max_tokens=150) if len(item["steps"]) == 3)
    criterion.forward_window(model, lane_steps(window), backward=lambda loss: loss.backward())
    assert model.encoder.layers[-1].summary_projection.weight.grad.abs().sum() > 0

    model.eval()
    steps = batches(task, "test")
    best, trace = Recorder(task, model).decode(steps)
    assert sorted(best) == list(range(len(task.dataset("test"))))
    assert any("previous_summary" in inputs for _, inputs, _ in trace)
    assert check_hypotheses_score_as_teacher_forced(task, model, trace, atol=1e-4) > 0


def test_its_option_is_declared_once_and_checked(toy_system, data_bin, capsys):
    _, model, _, cfg = build(data_bin, *TOY)
    assert cfg.model.summary_scale == 1.0 and model.encoder.layers[-1].scale == 1.0
    _, model, _, _ = build(data_bin, *TOY, "--summary-scale", "0.5")
    assert model.encoder.layers[-1].scale == 0.5
    assert refused_option(capsys, data_bin, *TOY, "--summary-scale", "-1").endswith(
        "argument --summary-scale: -1: give 0 or more"
    )


def test_a_plain_transformers_checkpoint_starts_it(toy_system, data_bin):
    _, plain, _, _ = build(data_bin, "--arch", "transformer", *TINY_DIMS, task="translation")
    _, model, _, _ = build(data_bin, *TOY)
    fresh = model.encoder.layers[-1].summary_projection.weight.clone()
    model.load_state_dict(plain.state_dict())
    assert torch.equal(model.encoder.embed_tokens.weight, plain.encoder.embed_tokens.weight)
    assert torch.equal(model.encoder.layers[-1].summary_projection.weight, fresh)


def test_the_stock_clis_train_it_and_translate_as_the_hub_does(toy_system, toy_plugin, data_bin, tmp_path):
    save_dir = tmp_path / "checkpoints"
    run([
        fairseq_command("fairseq-train"), str(data_bin), *[str(toy_plugin) if a == str(PLUGIN) else a for a in COMMON],
        "--task", "document_translation", *TOY, "--criterion", "document_label_smoothed_cross_entropy",
        "--optimization-window", "1-3", "--lr", "1e-3", "--max-update", "3", "--save-dir", str(save_dir),
    ])
    check_clis_and_hub_translate_alike(
        data_bin, save_dir / "checkpoint_last.pt", toy_system.PreviousSummaryModel, user_dir=toy_plugin
    )
