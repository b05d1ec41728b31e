"""What a new user hits on the command lines, case by case: each a command line (or what it loads)
and the one line it must end with, where fairseq took the value silently or ended in a traceback.

The cases of the plugin's other parts are pinned beside them: a resumed run's changed options
(``test_cli.py``), a document that starves the lanes (``test_training_batches.py``), the hub's
keywords and its numbering of sentences (``test_interactive.py``), contrastive items
(``tests/evaluation/test_contrastive.py``)."""
import subprocess

import pytest

from conftest import (AMN, CONCAT, LOCAL_GLOBAL, PLUGIN, TINY_DIMS, TINY_MODEL, build, fairseq_command,
                      refused_option, save_checkpoint)
from memory_nmt.pipeline.option_ranges import OptionError

BUILT = [  # (the model's options, the error's words)
    ([*TINY_MODEL, "--encoder-layers", "0"], "--encoder-layers 0: give 1 or more"),
    ([*TINY_MODEL, "--decoder-layers", "-1"], "--decoder-layers -1: give 1 or more"),
    ([*LOCAL_GLOBAL, "--encoder-layers", "-1", "--global-layer", "extra"], "--encoder-layers -1: give 1 or more"),
    ([*LOCAL_GLOBAL, "--encoder-layers", "0", "--global-layer", "extra"], "--encoder-layers 0: give 1 or more"),
    ([*LOCAL_GLOBAL, "--encoder-layers", "1", "--no-document-encoding"],
     "--encoder-layers 1 with --global-layer top leaves no local layer (the last layer is the global layer's place, "
     "which --no-document-encoding leaves out)"),
    ([*TINY_MODEL, "--update-freq", "0"], "--update-freq 0: give 1 or more batches an update"),
    # an option of training in lanes, or of a carry with states, given a system that ignores it (used_options.py)
    ([*LOCAL_GLOBAL, "--gradient-reach", "1"], "--gradient-reach 1: only training in lanes uses it, and this model "
     "trains on whole chunks, one batch an update (chunks.py); leave --gradient-reach out"),
    ([*CONCAT, "--max-graph-tokens", "64"], "--max-graph-tokens 64: only training in lanes uses it, and this model "
     "trains on shuffled sentences of similar width, each with the context sentences its system reads, one batch an "
     "update (sentence_batches.py) (--training-batches lanes trains it in lanes); leave --max-graph-tokens out"),
    ([*CONCAT, "--passes-per-step", "2"], "--passes-per-step 2: only training in lanes uses it"),
    ([*CONCAT, "--optimization-window", "2-3"], "--optimization-window 2-3: only training in lanes uses it"),
    ([*LOCAL_GLOBAL, "--lane-rows", "padded"], "--lane-rows padded: only training in lanes uses it"),
    ([*LOCAL_GLOBAL, "--training-batches", "lanes"], "--training-batches lanes: this model trains on whole chunks, one "
     "batch an update (chunks.py), in lanes too; leave --training-batches out"),
    ([*CONCAT, "--training-batches", "lanes", "--gradient-across-windows", "recompute"],
     "--gradient-across-windows recompute: only a system whose carry holds states that a later sentence's loss "
     "back-propagates into (the recurrent memory model) uses it, and this model's carries none"),
    ([*AMN, "--training-batches", "lanes", "--gradient-reach", "0"], "--gradient-reach 0: only a system whose carry "
     "holds states"),
    (["--arch", "transformer", *TINY_DIMS, "--training-batches", "lanes", "--max-graph-tokens", "64"],
     "--max-graph-tokens 64: only a system whose carry holds states"),
]


@pytest.mark.parametrize("arguments, message", BUILT, ids=[" ".join(a[-3:]) for a, _ in BUILT])
def test_a_model_or_run_the_plugin_cannot_use_is_refused_naming_the_option(data_bin, arguments, message):
    with pytest.raises(OptionError) as refused:
        build(data_bin, *arguments)
    assert str(refused.value).startswith(message)


PARSED = [
    (["--label-smoothing", "1.5"], "argument --label-smoothing: 1.5: give 0 to 1"),
    (["--label-smoothing", "-0.1"], "argument --label-smoothing: -0.1: give 0 to 1"),
    (["--ignore-prefix-size", "-1"], "argument --ignore-prefix-size: -1: give 0 or more"),
]


@pytest.mark.parametrize("arguments, message", PARSED, ids=[" ".join(a) for a, _ in PARSED])
def test_an_option_out_of_range_is_refused_as_the_command_line_is_read(data_bin, capsys, arguments, message):
    assert refused_option(capsys, data_bin, *TINY_MODEL, *arguments).endswith(message)


@pytest.fixture(scope="module")
def local_global_checkpoint(data_bin, tmp_path_factory):
    """(task, checkpoint) of a tiny local+global model, untrained."""
    task, model, _, cfg = build(data_bin, *LOCAL_GLOBAL)
    path = tmp_path_factory.mktemp("local_global") / "checkpoint.pt"
    save_checkpoint(model, cfg, path)
    return task, path


def test_a_model_override_of_the_wrong_type_names_the_option(local_global_checkpoint):
    """``--model-overrides "{'chunk_sentences': 'x'}"`` went on to a TypeError."""
    from fairseq import checkpoint_utils

    task, checkpoint = local_global_checkpoint
    with pytest.raises(OptionError, match=r"^--chunk-sentences 'x': give a number, 1 to 1000$"):
        checkpoint_utils.load_model_ensemble([str(checkpoint)], arg_overrides={"chunk_sentences": "x"}, task=task)


def test_a_model_override_that_reshapes_the_model_is_named(data_bin, local_global_checkpoint):
    """``--model-overrides "{'no_fusion_gate': True}"`` was answered with advice about the
    checkpoint's architecture options and the data's dictionary only."""
    _, checkpoint = local_global_checkpoint
    done = subprocess.run(generating(data_bin, checkpoint, "--model-overrides",
                                     "{'no_fusion_gate': True}"), capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--model-overrides changed no_fusion_gate: leave out of it what shapes the model's parameters, which the "
        "checkpoint's own options must build"), done.stderr[-2000:]


def generating(data_bin, checkpoint, *arguments):
    return [fairseq_command("fairseq-generate"), str(data_bin), "--user-dir", str(PLUGIN), "--task",
            "document_translation", "--path", str(checkpoint), "--gen-subset", "test", "--cpu", "--beam", "2",
            "--max-tokens", "400", *arguments]


COMMAND_LINES = [  # (fairseq's command, options added, input, the line it ends with)
    ("generate", ["--max-len-b", "0"], None,
     "fairseq-generate: error: --max-len-b 0 with --max-len-a 0.0: a translation may take at most"),
    ("generate", ["--sampling"], None, "fairseq-generate: error: --sampling requires --nbest to be equal to --beam"),
    ("generate", ["--gen-subset", "tset"], None,
     "fairseq-generate: error: {data}: no split 'tset' of en-de (it has: test, train, valid)"),
    ("generate", ["--path", "{directory}"], None,
     "fairseq-generate: error: --path {directory}: a directory; give a checkpoint file in it"),
    ("generate", ["--path", "{directory}/checkpoint_bets.pt"], None,
     "fairseq-generate: error: --path {directory}/checkpoint_bets.pt: no such file"),
    ("interactive", ["--batch-size", "8", "--buffer-size", "2"], b"a b .\n",
     "fairseq-interactive: error: --batch-size cannot be larger than --buffer-size"),
    ("interactive", ["--buffer-size", "2"], b"a b .\n\xff c .\n",
     "fairseq-interactive: error: input line 2 (document 1, sentence 2): not valid UTF-8 (character 1 of the line, "
     "byte 0xff)"),
    ("interactive", ["--buffer-size", "2", "--input", "{input}"], b"a b .\n\xff c .\n",  # read strictly
     "fairseq-interactive: error: the input is not valid UTF-8 (byte 0xff, 7 bytes into what was read)"),
]


@pytest.mark.parametrize("command, arguments, given, message", COMMAND_LINES,
                         ids=[f"{c} {' '.join(a)}" for c, a, _, _ in COMMAND_LINES])
def test_a_command_line_fairseq_fails_on_ends_in_one_line(data_bin, concat_checkpoint, tmp_path, command, arguments,
                                                           given, message):
    """fairseq ends these with a traceback (or, for bytes that are not UTF-8 read from a standard
    input in the C locale, translates them as unknown words); with the plugin each ends in one line
    that names the option or the input line."""
    names = {"data": data_bin, "directory": concat_checkpoint.parent, "input": tmp_path / "input.txt"}
    if "{input}" in arguments:
        names["input"].write_bytes(given)
    arguments = [argument.format(**names) for argument in arguments]
    line = generating(data_bin, concat_checkpoint, *arguments)
    if command == "interactive":
        line = [fairseq_command("fairseq-interactive"), *line[1:line.index("--gen-subset")], "--cpu", *arguments]
    done = subprocess.run(line, input=given, capture_output=True)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode != 0 and "Traceback" not in stderr, stderr[-2000:]
    assert stderr.strip().splitlines()[-1].startswith(message.format(**names)), stderr[-2000:]


def test_a_systems_options_are_listed_where_fairseq_trains_help_lists_none(capsys):
    """fairseq-train prints --help before it adds the model's, task's and criterion's options."""
    from memory_nmt_tools import system_options

    system_options.main(["--arch", "transformer_recurrent_memory"])
    listed = capsys.readouterr().out
    for option in ("--memory-size", "--optimization-window", "--gradient-across-windows", "--encoder-layers"):
        assert f"\n  {option} " in listed, option
    with pytest.raises(SystemExit, match=r"--arch transformer_recurent_memory: not registered; give one of"):
        system_options.main(["--arch", "transformer_recurent_memory"])


def test_a_model_takes_the_training_options_it_uses(data_bin):
    """The memory model in lanes uses every one of them; the refusal of a one-step window that cuts every
    gradient (``--gradient-across-windows drop``) is for a carry with states only: the concatenation
    model in lanes carries tokens, which no gradient crosses, and trains with windows of one step."""
    build(data_bin, *TINY_MODEL, "--gradient-reach", "1", "--gradient-across-windows", "recompute", "--passes-per-step",
          "2", "--lane-rows", "padded", "--optimization-window", "2-3")
    build(data_bin, *TINY_MODEL, "--max-graph-tokens", "64")
    build(data_bin, *CONCAT, "--training-batches", "lanes", "--optimization-window", "1")
    with pytest.raises(OptionError, match=r"^--gradient-across-windows drop \(the default\) with --optimization-window 1:"):
        build(data_bin, *TINY_MODEL, "--optimization-window", "1")
