"""The papers' presets (examples/recipes/local_global_paper.sh, amn_paper.sh): the commands their train,
generate and score steps run carry each paper's settings, and fairseq's parsers take them (the model's
options checked as fairseq-train checks them). A stand-in for Python records each command, without
reading data or training (the recipes' own ``-c`` snippets, which split options into words, it hands to
Python); fairseq's commands are then parsed here, as fairseq-train and fairseq-generate
parse them."""
import json
import os
import subprocess
import sys

import pytest
from fairseq import options

from conftest import REPO

RECIPES = REPO / "examples" / "recipes"
STAND_IN = f"""#!{sys.executable}
import json, os, sys
if "-c" in sys.argv[1:4]:
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
with open(sys.argv[0] + ".log", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["-"]:
    sys.stdin.read()
elif "--save-json" in sys.argv:  # the score step keeps the file document_bleu.py writes
    open(sys.argv[sys.argv.index("--save-json") + 1], "w").close()
"""
FAIRSEQ_PARSERS = {"fairseq_cli.train": options.get_training_parser,
                   "fairseq_cli.generate": options.get_generation_parser}


def commands_of(preset, tmp_path, **environment):
    """The commands ``preset``'s train, generate and score steps run, fairseq's each parsed as its
    command parses it."""
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    work = tmp_path / "the work's dir"  # the options that name its files keep a space and a quote
    env = {**os.environ, "WORK_DIR": str(work), "PYTHON": str(python), **environment}
    done = subprocess.run(["bash", str(RECIPES / preset), "--steps", "train,generate,score"], env=env, cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    commands = [json.loads(line) for line in (tmp_path / "python.log").read_text().splitlines()]
    for command in commands:
        if command[:1] == ["-m"] and command[1] in FAIRSEQ_PARSERS:
            options.parse_args_and_arch(FAIRSEQ_PARSERS[command[1]](), command[2:])
    return commands


def option(command, name):
    return command[len(command) - 1 - command[::-1].index(name) + 1]  # the last one given wins


def trained(commands, name):
    (command,) = [c for c in commands
                  if c[:2] == ["-m", "fairseq_cli.train"] and f"checkpoints/{name}" in option(c, "--save-dir")]
    return command


def test_local_global_preset_has_the_papers_settings(tmp_path):
    commands = commands_of("local_global_paper.sh", tmp_path)
    sentence, local_global = trained(commands, "sentence"), trained(commands, "local_global")
    for command in (sentence, local_global):
        assert [option(command, o) for o in ("--encoder-layers", "--decoder-layers", "--encoder-embed-dim",
                                             "--encoder-ffn-embed-dim", "--lr", "--warmup-updates", "--dropout",
                                             "--max-tokens", "--label-smoothing", "--lr-scheduler")] == [
            "4", "4", "256", "512", "7e-4", "8000", "0.1", "5120", "0.1", "inverse_sqrt"]
    assert option(local_global, "--arch") == "transformer_local_global"
    assert option(local_global, "--chunk-sentences") == "20"
    assert "--finetune-from-model" not in local_global and "--global-layer" not in local_global  # the paper's layout
    generated = [c for c in commands if c[:2] == ["-m", "fairseq_cli.generate"]]
    assert len(generated) == 2 and all(option(c, "--lenpen") == "0.6" and option(c, "--beam") == "5" for c in generated)


def test_amn_preset_has_the_papers_settings(tmp_path):
    commands = commands_of("amn_paper.sh", tmp_path, AMN_ARGS="--stacked-context-encoder --context-choice random")
    sentence, amn = trained(commands, "sentence"), trained(commands, "amn")
    for command in (sentence, amn):
        assert "--encoder-layers" not in command  # transformer-base's 6 layers, 512/2048, 8 heads
        assert [option(command, o) for o in ("--lr", "--warmup-updates", "--dropout", "--max-tokens")] == [
            "7e-4", "4000", "0.1", "6520"]
    assert option(amn, "--arch") == "transformer_associated_memory"
    assert option(amn, "--context-sentences") == "1" and "--stacked-context-encoder" in amn
    assert option(amn, "--context-choice") == "random"  # Table 3's "without both" (docs/systems.md)
    assert "--finetune-from-model" not in amn


@pytest.mark.parametrize("preset", ["local_global_paper.sh", "amn_paper.sh"])
def test_a_step_the_preset_lacks_is_refused(preset, tmp_path):
    done = subprocess.run(["bash", str(RECIPES / preset), "--steps", "compare"],
                          env={**os.environ, "WORK_DIR": str(tmp_path)}, capture_output=True, text=True)
    assert done.returncode == 1 and "unknown step 'compare'" in done.stderr
