"""One system's checkpoint loaded into another system's model, as fairseq-train loads it: the
document task's check as it builds the model (``pipeline/checkpoint_fit.check_training_start``,
``check_system``), then fairseq's trainer: a run never resumes from another system's checkpoint,
and another system's weights start a model only where they fit it as a plain transformer's
would; each refusal is one line naming both systems and the first parameter that differs.

Before any of that, a checkpoint is read with torch's safe unpickling (``pipeline/checkpoint_files.py``):
every kind the project meets loads, a crafted one is refused naming what it holds, before it runs."""
import argparse
import fractions
import os
import shutil
import subprocess
import sys

import numpy

import pytest
import torch
from fairseq.trainer import Trainer

from commands import run_command
from conftest import (AMN, COMMON, CONCAT, LOCAL_GLOBAL, REPO, TINY_DIMS, TINY_MODEL, build, fairseq_command,
                      save_checkpoint)
from memory_nmt.pipeline.checkpoint_files import CheckpointFileError, check_checkpoint_file
from memory_nmt.pipeline.checkpoint_fit import CheckpointMismatchError, check_training_start
from memory_nmt.pipeline.checkpoint_languages import training_start

SYSTEMS = {
    "transformer": ["--arch", "transformer", *TINY_DIMS],
    "recurrent_memory": TINY_MODEL,
    "context_concat": CONCAT,
    "associated_memory": AMN,
    "local_global": LOCAL_GLOBAL,
}
ARCH = {name: arguments[1] for name, arguments in SYSTEMS.items()}
MEMORY = "encoder.layers.1.memory.initial_memory of shape (4, 32)"
CAMN = "encoder.context_network.context_encoder.rnn.weight_ih_l0 of shape (96, 32)"
SECOND_LAYER = "the checkpoint's encoder.layers.1.self_attn.k_proj.weight of shape (32, 32) has no place in this model"
SEGMENTS = "the checkpoint's encoder.segment_embeddings.weight of shape (20, 32) has no place in this model"

# (checkpoint's system, model's system): the first parameter that differs (None: the same
# parameters), and whether the checkpoint's weights start the model (its parameters a plain
# transformer's, the model's own context parameters fresh). The local+global model has one local
# layer (--global-layer top), so every other system's second encoder layer has no place in it.
PAIRS = {
    ("transformer", "recurrent_memory"): (f"this model's {MEMORY} is not in the checkpoint", True),
    ("transformer", "context_concat"): (None, True),
    ("transformer", "associated_memory"): (f"this model's {CAMN} is not in the checkpoint", True),
    ("transformer", "local_global"): (SECOND_LAYER, False),
    ("recurrent_memory", "transformer"): (f"the checkpoint's {MEMORY} has no place in this model", False),
    ("recurrent_memory", "context_concat"): (f"the checkpoint's {MEMORY} has no place in this model", False),
    ("recurrent_memory", "associated_memory"): (f"the checkpoint's {MEMORY} has no place in this model", False),
    ("recurrent_memory", "local_global"): (SECOND_LAYER, False),
    ("context_concat", "transformer"): (None, True),
    ("context_concat", "recurrent_memory"): (f"this model's {MEMORY} is not in the checkpoint", True),
    ("context_concat", "associated_memory"): (f"this model's {CAMN} is not in the checkpoint", True),
    ("context_concat", "local_global"): (SECOND_LAYER, False),
    ("associated_memory", "transformer"): (f"the checkpoint's {CAMN} has no place in this model", False),
    ("associated_memory", "recurrent_memory"): (f"the checkpoint's {CAMN} has no place in this model", False),
    ("associated_memory", "context_concat"): (f"the checkpoint's {CAMN} has no place in this model", False),
    ("associated_memory", "local_global"): (SECOND_LAYER, False),
    ("local_global", "transformer"): (SEGMENTS, False),
    ("local_global", "recurrent_memory"): (SEGMENTS, False),
    ("local_global", "context_concat"): (SEGMENTS, False),
    ("local_global", "associated_memory"): (SEGMENTS, False),
}
# A plain transformer's weights are the model's own to fit (FitsTransformerCheckpoints): the
# local+global model refuses a deeper one itself, naming --global-layer extra (its own test below).
FINETUNED = [pair for pair in PAIRS if pair != ("transformer", "local_global")]


@pytest.fixture(scope="module")
def systems(data_bin, tmp_path_factory):
    """{system: (trainer, checkpoint)}: each tiny model in fairseq's trainer, and its checkpoint, the
    last of a run's --save-dir of its own, whose parameters are offset by the system's index so that
    no two systems' are equal."""
    directory = tmp_path_factory.mktemp("systems")
    built = {}
    for index, (name, arguments) in enumerate(SYSTEMS.items()):
        task, model, criterion, cfg = build(data_bin, *arguments, "--optimizer", "adam", "--lr", "1e-3")
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(index)
        (directory / name).mkdir()
        save_checkpoint(model, cfg, directory / name / "checkpoint_last.pt")
        built[name] = (Trainer(cfg, task, model, criterion), directory / name / "checkpoint_last.pt")
    return built


def load(trainer, checkpoint, finetuning, reset_optimizer=None, restore_file="checkpoint_last.pt"):
    """fairseq-train's start from ``checkpoint``: its weights only (--finetune-from-model, as fairseq
    takes it: the optimizer reset, a --save-dir without a last checkpoint), or a resume of the run
    whose --save-dir holds it (with or without --reset-optimizer): the document task's check as it
    builds the model (``restore_file``: fairseq-train's --restore-file), then fairseq's trainer's load."""
    reset = finetuning if reset_optimizer is None else reset_optimizer
    save_dir = checkpoint.parent.parent if finetuning else checkpoint.parent
    check_training_start(trainer.get_model(), trainer.cfg.model, str(checkpoint) if finetuning else None, restore_file,
                         str(save_dir), reset_optimizer=reset, reset_dataloader=False)
    trainer.load_checkpoint(str(checkpoint), reset_optimizer=reset)


def refusal(trainer, checkpoint, finetuning, reset_optimizer=None, restore_file="checkpoint_last.pt") -> str:
    with pytest.raises(CheckpointMismatchError) as refused:  # raised before fairseq's "architectures match"
        load(trainer, checkpoint, finetuning, reset_optimizer, restore_file)
    message = str(refused.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("pair", FINETUNED, ids="->".join)
def test_another_systems_weights_start_a_model_only_where_they_fit(systems, pair):
    (_, checkpoint), (trainer, _) = systems[pair[0]], systems[pair[1]]
    difference, fits = PAIRS[pair]
    if fits:
        load(trainer, checkpoint, finetuning=True)
        model = trainer.get_model().state_dict()
        for key, value in torch.load(checkpoint, weights_only=False)["model"].items():
            assert torch.equal(model[key], value), key
    else:
        assert refusal(trainer, checkpoint, finetuning=True) == (
            f"{checkpoint} is a {ARCH[pair[0]]} checkpoint, which does not fit this {ARCH[pair[1]]} model: "
            f"{difference}; give --arch {ARCH[pair[0]]} to train that system from it, or start this model from "
            "a plain transformer's checkpoint or its own system's"
        )


@pytest.mark.parametrize("pair", PAIRS, ids="->".join)
def test_a_run_never_resumes_from_another_systems_checkpoint(systems, pair):
    """Not with --reset-optimizer either: the run would go on with the other run's epoch and updates."""
    (_, checkpoint), (trainer, _) = systems[pair[0]], systems[pair[1]]
    difference, fits = PAIRS[pair]
    message = refusal(trainer, checkpoint, finetuning=False, reset_optimizer=fits)
    assert message.startswith(
        f"{checkpoint} is a {ARCH[pair[0]]} checkpoint, which fairseq-train resumes from (--save-dir), but this "
        f"model is a {ARCH[pair[1]]}{f' ({difference})' if difference else ''}: give another --save-dir"
    )
    assert (f"with --finetune-from-model {checkpoint} to start from its weights" in message) == fits
    assert message.endswith(f"or --arch {ARCH[pair[0]]} to resume its run")


def test_a_tensor_of_another_shape_is_named_with_both_shapes(data_bin, systems, tmp_path):
    _, model, _, cfg = build(data_bin, *CONCAT, "--encoder-ffn-embed-dim", "48")
    save_checkpoint(model, cfg, tmp_path / "concat.pt")
    trainer, _ = systems["recurrent_memory"]
    assert (f"which does not fit this {ARCH['recurrent_memory']} model: the checkpoint's encoder.layers.0.fc1.weight "
            "has shape (48, 32), this model's (64, 32); give --arch") in refusal(
        trainer, tmp_path / "concat.pt", finetuning=True)


def test_a_restore_file_of_another_system_is_refused_naming_finetuning_instead(systems):
    (_, checkpoint), (trainer, _) = systems["context_concat"], systems["associated_memory"]
    assert refusal(trainer, checkpoint, finetuning=False, restore_file=str(checkpoint)).endswith(
        f"(--restore-file), but this model is a {ARCH['associated_memory']} (this model's {CAMN} is not in the "
        f"checkpoint): give --finetune-from-model {checkpoint} instead of --restore-file to start from its weights, "
        f"or --arch {ARCH['context_concat']} to resume its run"
    )


def test_the_checkpoint_a_run_starts_from_is_the_one_fairseq_loads(tmp_path):
    """fairseq-train's choice (``checkpoint_utils.load_checkpoint``): the --save-dir's last checkpoint,
    with --checkpoint-suffix; where there is none, --continue-once before --finetune-from-model; a
    --restore-file with the suffix before ``.pt``."""
    last = tmp_path / "run" / "checkpoint_last-part.pt"
    last.parent.mkdir()
    last.write_bytes(b"")
    once, weights = str(tmp_path / "once.pt"), str(tmp_path / "weights.pt")
    empty = str(tmp_path)
    assert training_start(weights, "checkpoint_last.pt", str(last.parent), "-part", once) == (str(last), "--save-dir")
    assert training_start(weights, "checkpoint_last.pt", str(last.parent), "", once) == (once, "--continue-once")
    assert training_start(weights, "checkpoint_last.pt", empty, "", None) == (weights, "--finetune-from-model")
    assert training_start(None, "checkpoint_last.pt", empty, "", None) is None
    assert training_start(None, "run/best.pt", empty, "-part", None) == ("run/best-part.pt", "--restore-file")


def test_a_continue_once_of_another_system_is_refused_naming_finetuning_instead(systems, tmp_path):
    (_, checkpoint), (trainer, _) = systems["context_concat"], systems["associated_memory"]
    with pytest.raises(CheckpointMismatchError) as refused:
        check_training_start(trainer.get_model(), trainer.cfg.model, None, "checkpoint_last.pt", str(tmp_path),
                             reset_optimizer=False, reset_dataloader=False, continue_once=str(checkpoint))
    assert str(refused.value).startswith(f"{checkpoint} is a {ARCH['context_concat']} checkpoint, which fairseq-train "
                                         "resumes from (--continue-once)")
    assert f"give --finetune-from-model {checkpoint} instead of --continue-once" in str(refused.value)


def test_the_local_global_refusal_of_a_deeper_transformer_names_the_models_own_layers(systems):
    (_, checkpoint), (trainer, _) = systems["transformer"], systems["local_global"]
    with pytest.raises(CheckpointMismatchError, match=(
            r"--global-layer top this model has 1 local layers \(--encoder-layers 2, the last of them the global "
            r"layer's place\): finetune from it with --global-layer extra")):
        trainer.get_model().load_state_dict(torch.load(checkpoint, weights_only=False)["model"])


def test_fairseq_train_in_a_save_dir_of_another_systems_run_ends_on_one_line(data_bin, systems, tmp_path):
    """The associated memory resumed from a concatenation model's run loaded its weights, then
    failed on the optimizer's parameter groups (ValueError)."""
    last = tmp_path / "checkpoint_last.pt"
    shutil.copy(systems["context_concat"][1], last)
    result = run_command([
        fairseq_command("fairseq-train"), str(data_bin), *COMMON, "--task", "document_translation", *AMN,
        "--criterion", "document_label_smoothed_cross_entropy", "--lr", "1e-3", "--max-update", "1",
        "--save-dir", str(tmp_path),
    ])
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"fairseq-train: error: {last} is a {ARCH['context_concat']} checkpoint, which fairseq-train resumes from "
        f"(--save-dir), but this model is a {ARCH['associated_memory']} (this model's {CAMN} is not in the "
        f"checkpoint): give another --save-dir, with --finetune-from-model {last} to start from its weights, or "
        f"--arch {ARCH['context_concat']} to resume its run"
    ), result.stderr[-3000:]
    assert "Traceback" not in result.stderr


def old_checkpoint(path, destination):
    """``path``'s checkpoint in the form fairseq wrote before 0.10: its options one ``argparse.Namespace``
    (``args``, no ``cfg``), a best loss saved as numpy's number."""
    state = torch.load(path, weights_only=False)
    cfg = state.pop("cfg")
    args = argparse.Namespace()
    groups = {name: vars(group) if isinstance(group, argparse.Namespace) else group for name, group in cfg.items()
              if group}
    for group in ("common", "task", "model", "criterion", "optimizer", "lr_scheduler", "dataset", "optimization",
                  "checkpoint", "distributed_training"):
        vars(args).update({key: value for key, value in groups.get(group, {}).items() if key != "_name"})
    for group, name in (("task", "task"), ("model", "arch"), ("criterion", "criterion"), ("optimizer", "optimizer"),
                        ("lr_scheduler", "lr_scheduler")):
        setattr(args, name, groups[group].get("_name") or groups[group].get(name))
    state["args"] = args
    state["optimizer_history"][-1]["lr_scheduler_state"] = {"best": numpy.float64(3.25)}
    torch.save(state, destination)
    return destination


class WritesAMarkerFile:
    """What a crafted checkpoint holds: unpickling it runs a command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def crafted(path, destination, extra):
    """``path``'s checkpoint with ``extra`` in its extra state."""
    state = torch.load(path, weights_only=False)
    state["extra_state"]["extra"] = extra
    torch.save(state, destination)
    return destination


LOADING = (  # loads each file given through fairseq's loader, in a process where torch loads safely by default
    "import sys, memory_nmt; from fairseq import checkpoint_utils\n"
    "for path in sys.argv[1:]: print(sorted(checkpoint_utils.load_checkpoint_to_cpu(path)['model'])[0])"
)
REFUSED_WITHOUT_THE_PLUGIN = (  # prints, for each file given, whether fairseq's loader refused it
    "import pickle, sys; from fairseq import checkpoint_utils\n"
    "for path in sys.argv[1:]:\n"
    "    try: checkpoint_utils.load_checkpoint_to_cpu(path); print('loaded')\n"
    "    except pickle.UnpicklingError: print('refused')"
)


def test_every_kind_of_checkpoint_loads_with_torchs_safe_unpickling(systems, sentence_checkpoint, concat_checkpoint,
                                                                     pretrained, tmp_path):
    """fairseq's translation task's (fairseq-train's), the five systems', a document system's trained by
    fairseq-train (its optimizer and meters' state), the mBART-shaped and the multilingual one (their tasks'
    own configs), and one from before fairseq 0.10; without the plugin fairseq's loader reads none of them."""
    kinds = [str(path) for path in (sentence_checkpoint, concat_checkpoint, *(path for _, path in systems.values()),
                                    *pretrained.values(), old_checkpoint(sentence_checkpoint, tmp_path / "old.pt"))]
    environment = {name: value for name, value in os.environ.items() if not name.startswith("TORCH_FORCE")}
    loaded = subprocess.run([sys.executable, "-c", LOADING, *kinds], capture_output=True, text=True, env=environment)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert len(loaded.stdout.split()) == len(kinds)
    without_plugin = subprocess.run([sys.executable, "-c", REFUSED_WITHOUT_THE_PLUGIN, *kinds], capture_output=True,
                                    text=True, env=environment)
    assert without_plugin.stdout.split() == ["refused"] * len(kinds), without_plugin.stderr[-3000:]


def test_a_crafted_checkpoint_is_refused_before_it_runs_anything(concat_checkpoint, tmp_path):
    """Its class named on one line by the plugin's reader and by memory-nmt-checkpoint-options, a tool for
    looking at a file (which once ran it: a marker file written); fairseq's own loader, with the classes the
    plugin allows, refuses it too."""
    import pickle

    from fairseq import checkpoint_utils

    marker = tmp_path / "marker"
    path = crafted(concat_checkpoint, tmp_path / "crafted.pt", WritesAMarkerFile(marker))
    message = (f"{path}: holds posix.system, which no fairseq checkpoint holds and torch's safe unpickling refuses "
               "(unpickling it could run code the file holds); if you trust the file, load it with full unpickling: "
               "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 in the environment")
    with pytest.raises(CheckpointFileError) as refused:
        check_checkpoint_file(str(path))
    assert str(refused.value) == message and not marker.exists()
    with pytest.raises(pickle.UnpicklingError):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert not marker.exists()
    tool = run_command([sys.executable, str(REPO / "scripts" / "checkpoint_options.py"), str(path)])
    assert tool.returncode != 0 and "Traceback" not in tool.stderr, tool.stderr[-3000:]
    assert tool.stderr.strip().splitlines()[-1] == f"checkpoint_options.py: error: {message}", tool.stderr[-3000:]
    assert not marker.exists()


def test_a_checkpoint_that_needs_more_classes_loads_when_the_user_trusts_it(concat_checkpoint, tmp_path, monkeypatch):
    """torch's own switch, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, turns full unpickling on: the refusal names it."""
    from fairseq import checkpoint_utils

    path = str(crafted(concat_checkpoint, tmp_path / "fraction.pt", fractions.Fraction(1, 3)))
    with pytest.raises(CheckpointFileError, match=f"^{path}: holds fractions.Fraction, which no fairseq checkpoint"):
        check_checkpoint_file(path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    assert checkpoint_utils.load_checkpoint_to_cpu(path)["extra_state"]["extra"] == fractions.Fraction(1, 3)
