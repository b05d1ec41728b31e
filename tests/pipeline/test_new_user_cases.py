"""What a new user hits on the command lines, case by case: each a command line (or what it loads)
and the one line it must end with, where fairseq took the value silently or ended in a traceback.

The cases of the plugin's other parts are pinned beside them: a resumed run's changed options
(``test_cli.py``), a document that starves the lanes (``test_training_batches.py``), the hub's
keywords and its numbering of sentences (``test_interactive.py``), contrastive items
(``tests/evaluation/test_contrastive.py``)."""
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

from commands import run_command
from conftest import (
    AMN, CONCAT, LOCAL_GLOBAL, MEMORY_TRAIN, PLUGIN, TINY_DIMS, TINY_MODEL, build, fairseq_command,
    refused_option, save_checkpoint,
)
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
    ([*TINY_MODEL, "--fp16"], "--fp16: training in float16 needs a CUDA GPU, and this run has none (--cpu); leave "
                              "out --fp16 to train in float32 on the CPU"),
    ([*TINY_MODEL, "--fp16", "--fp16-no-flatten-grads"],  # which fairseq trains, in float16 on the CPU
     "--fp16: training in float16 needs a CUDA GPU"),
    ([*TINY_MODEL, "--memory-efficient-fp16"], "--memory-efficient-fp16: training in float16 needs a CUDA GPU"),
    ([*TINY_MODEL, "--bf16"], "--bf16: fairseq 0.12 trains in bfloat16 only on a TPU (--bf16 sets --tpu), through "
                              "torch_xla, which is not installed; give --amp-bf16 to train in bfloat16 on a CUDA GPU "
                              "or the CPU, --fp16 or --amp to train in float16 on a CUDA GPU, or leave out --bf16 to "
                              "train in float32"),
    ([*TINY_MODEL, "--amp-bf16", "--amp"], "--amp-bf16 with --amp: give one precision (--amp-bf16 computes in "
                                           "bfloat16 on a CUDA GPU or the CPU, its weights in float32)"),
    ([*TINY_MODEL, "--memory-efficient-bf16"],
     "--memory-efficient-bf16: fairseq 0.12 trains in bfloat16 only on a TPU"),
]


@pytest.mark.parametrize("arguments, message", BUILT, ids=[" ".join(a[-3:]) for a, _ in BUILT])
def test_a_model_or_run_the_plugin_cannot_use_is_refused_naming_the_option(data_bin, arguments, message):
    """fairseq went on with these into a traceback, or took them without a word (a system's unused
    options; ``--fp16 --fp16-no-flatten-grads`` and ``--memory-efficient-fp16``, with which it trains a
    float16 model on the CPU)."""
    if {"--bf16", "--memory-efficient-bf16"} & set(arguments) and importlib.util.find_spec("torch_xla") is not None:
        pytest.skip("torch_xla is installed: fairseq's --bf16 trains on its TPU")
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
    done = run_command(generating(data_bin, checkpoint, "--model-overrides", "{'no_fusion_gate': True}"))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--model-overrides changed no_fusion_gate: leave out of it what shapes the model's parameters, which the "
        "checkpoint's own options must build"), done.stderr[-2000:]


def generating(data_bin, checkpoint, *arguments):
    return [fairseq_command("fairseq-generate"), str(data_bin), "--user-dir", str(PLUGIN), "--task",
            "document_translation", "--path", str(checkpoint), "--gen-subset", "test", "--cpu", "--beam", "2",
            "--max-tokens", "400", *arguments]


TORCHRUN = Path(sys.executable).with_name("torchrun")
WITHOUT_A_GPU = [  # fairseq's own, with a GPU
    pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU, fairseq starts its own workers"),
    pytest.mark.skipif(shutil.which("torchrun", path=str(TORCHRUN.parent)) is None, reason="torchrun not installed"),
]
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
    ("generate", ["--path", "{input}"], b"",  # read by the task before fairseq's loader: EOFError in it
     "fairseq-generate: error: {input}: cannot be read as a checkpoint (EOFError"),
    ("generate", ["--constraints"], None,  # a TypeError: fairseq-generate reads no constraints
     "fairseq-generate: error: --constraints: fairseq-generate has no constraints to decode with (a binarized split "
     "holds none, and fairseq's own translation task fails on it too): give each sentence's constraints to "
     "fairseq-interactive --constraints, after a tab on its line"),
    ("interactive", ["--batch-size", "8", "--buffer-size", "2"], b"a b .\n",
     "fairseq-interactive: error: --batch-size cannot be larger than --buffer-size"),
    ("interactive", ["--buffer-size", "2"], b"a b .\n\xff c .\n",
     "fairseq-interactive: error: input line 2 (document 1, sentence 2): not valid UTF-8 (character 1 of the line, "
     "byte 0xff)"),
    ("interactive", ["--buffer-size", "2", "--input", "{input}"], b"a b .\n\xff c .\n",  # read strictly
     "fairseq-interactive: error: the input is not valid UTF-8 (byte 0xff, 7 bytes into what was read)"),
    ("train", ["--fp16"], None,  # "Torch not compiled with CUDA enabled", the whole path: the task refuses it
     "fairseq-train: error: --fp16: training in float16 needs a CUDA GPU, and this run has none (--cpu)"),
    pytest.param("train", ["--distributed-world-size", "2"], None,  # "world size is 2 but have 0 available devices"
                 "fairseq-train: error: --distributed-world-size 2 without a GPU: fairseq starts one worker a GPU "
                 "itself, and none on the CPU (--cpu, or a machine without GPUs); start the CPU workers with torchrun: "
                 "torchrun --nproc_per_node 2 $(which fairseq-train) ... --cpu --distributed-backend gloo",
                 marks=WITHOUT_A_GPU),
    pytest.param("torchrun", ["--ddp-backend", "legacy_ddp"], None,  # each worker: "NCCL built in" traceback
                 "fairseq-train: error: --distributed-backend nccl (fairseq's default) needs CUDA GPUs, and these "
                 "workers have none: give --distributed-backend gloo to train on the CPU under torchrun",
                 marks=WITHOUT_A_GPU),
]


def command_line(command, data_bin, checkpoint, save_dir, arguments):
    """fairseq's ``command`` (generate, interactive, train, or train under torchrun with 2 workers) on
    the test data or ``checkpoint``, with ``arguments`` added."""
    if command in ("train", "torchrun"):
        line = [fairseq_command("fairseq-train"), str(data_bin), *MEMORY_TRAIN, "--max-update", "1",
                "--save-dir", str(save_dir), *arguments]
        return [str(TORCHRUN), "--nproc_per_node", "2", *line] if command == "torchrun" else line
    line = generating(data_bin, checkpoint, *arguments)
    if command == "interactive":
        line = [fairseq_command("fairseq-interactive"), *line[1:line.index("--gen-subset")], "--cpu", *arguments]
    return line


@pytest.mark.parametrize("command, arguments, given, message", COMMAND_LINES,
                         ids=[f"{c} {' '.join(a)}" for c, a, _, _ in (getattr(case, "values", case)
                                                                      for case in COMMAND_LINES)])
def test_a_command_line_fairseq_fails_on_ends_in_one_line(data_bin, concat_checkpoint, tmp_path, command, arguments,
                                                           given, message):
    """fairseq ends these with a traceback (or, for bytes that are not UTF-8 read from a standard
    input in the C locale, translates them as unknown words); with the plugin each ends in one line
    that names the option or the input line. Under torchrun the worker that fails first ends in
    that line; torchrun then stops the other, which may not have reached it yet, and reports the
    failure in its own words."""
    names = {"data": data_bin, "directory": concat_checkpoint.parent, "input": tmp_path / "input.txt"}
    if "{input}" in arguments:
        names["input"].write_bytes(given)
    arguments = [argument.format(**names) for argument in arguments]
    line = command_line(command, data_bin, concat_checkpoint, tmp_path / "checkpoints", arguments)
    done = run_command(line, input=given, text=False)
    stderr = done.stderr.decode("utf-8", "replace")
    message = message.format(**names)
    assert done.returncode != 0, stderr[-2000:]
    if command == "torchrun":
        errors = [line for line in stderr.splitlines() if ": error: " in line]
        assert 1 <= len(errors) <= 2 and all(line.startswith(message) for line in errors), stderr[-3000:]
        assert not re.search(r"^\w+Error: ", stderr, re.M), stderr[-3000:]  # only torchrun's ChildFailedError
    else:
        assert "Traceback" not in stderr, stderr[-2000:]
        assert stderr.strip().splitlines()[-1].startswith(message), stderr[-2000:]


def decoded(output: str):
    """The lines of fairseq-generate's or fairseq-interactive's output that say what was decoded
    (S-, T-, H-, D-, P-: not the times)."""
    return re.findall(r"^[STHDP]-.*$", output, re.M)


AS_MEANT = [  # (fairseq's command, its options, an option or an input fairseq took otherwise, the input, the input
    # it must decode alike without that option, a line it prints)
    ("interactive", ["--buffer-size", "2", "--max-len-b", "10"], [], "\ufeffwe spent the day .\nthe crane is old .\n",
     "we spent the day .\nthe crane is old .\n", None),  # a byte order mark: the first word was <unk>
    ("generate", ["--max-len-b", "10"], ["--bf16"], None, None,  # fairseq decodes in float32, without a word
     "WARNING:memory_nmt.pipeline.precision:--bf16 is not used in decoding: fairseq decodes in float32 with it "
     "(fairseq 0.12's --bf16 is TPU training); give --amp-bf16 to decode in bfloat16 (on a CUDA GPU or the CPU), "
     "or --fp16 to decode in float16 on a CUDA GPU"),
]


@pytest.mark.parametrize("command, options, taken, given, alike, line", AS_MEANT,
                         ids=[f"{c} {' '.join(t) or 'byte order mark'}" for c, _, t, _, _, _ in AS_MEANT])
def test_a_command_line_fairseq_takes_otherwise_does_what_the_user_meant(data_bin, concat_checkpoint, tmp_path,
                                                                          command, options, taken, given, alike, line):
    """A UTF-8 byte order mark at the start of fairseq-interactive's input was read as part of the
    first word; fairseq-generate --bf16 decoded in float32 without a word. Each decodes as without
    it (the byte order mark dropped, as prepare_documents.py drops it; --bf16 named)."""
    runs = [run_command(command_line(command, data_bin, concat_checkpoint, tmp_path, arguments), input=text)
            for arguments, text in (([*options, *taken], given), (options, alike))]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr[-2000:] + runs[1].stderr[-2000:]
    assert decoded(runs[0].stdout) == decoded(runs[1].stdout) and decoded(runs[0].stdout)
    if line is not None:
        assert line in runs[0].stderr.splitlines(), runs[0].stderr[-2000:]


def test_interactive_decodes_with_the_constraints_generate_refuses(data_bin, concat_checkpoint):
    """fairseq-generate --constraints is refused naming fairseq-interactive, which takes each line's
    constraints after a tab: in document mode every translation holds its line's constraints."""
    lines = ["we spent the day .\tbergen", "the crane is old .\tkranich alt", "", "we worked .\twerkstatt"]
    done = run_command(command_line("interactive", data_bin, concat_checkpoint, None,
                                    ["--constraints", "--buffer-size", "4", "--batch-size", "4", "--max-len-b", "10"]),
                       input="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr[-2000:]
    translations = {int(i): text.split() for i, text in re.findall(r"^H-(\d+)\t[^\t]*\t(.*)$", done.stdout, re.M)}
    assert sorted(translations) == [0, 1, 2, 3] and translations[2] == []
    for number, line in enumerate(lines):
        for word in line.partition("\t")[2].split():
            assert word in translations[number], (line, translations[number])


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
