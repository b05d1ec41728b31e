"""Every long-running command checks its input paths and its output folders before it starts work
(memory_nmt_tools.paths), naming the option: a typo is not found after an hour of training, nor a
plot lost at the end because its folder is missing.

Each command is refused in its ``parse_args``, the first thing its ``main`` does, so nothing has
run when the error is printed; compare_systems and contrastive_eval have their own tests beside
their other ones.
"""
import pytest

from conftest import REPO, load_script
from memory_nmt_tools.benchmarks import training

ANALYSES = REPO / "examples" / "learn_to_remember"
COMMANDS = {
    "benchmark_training": training,
    "quickstart": load_script(REPO / "examples" / "quickstart.py"),
    **{name: load_script(ANALYSES / f"{name}.py") for name in (
        "bleu_by_position", "cost_vs_length", "gradient_reach", "long_range_learning", "memory_attention_maps",
        "memory_information_gain", "memory_size_sweep")},
}
MODEL = ["--path", "{tmp}/model.pt", "--data", "{tmp}/data"]
BLEU = ["--docids", "{tmp}/test.docids", "--memory", "{tmp}/memory.txt", "--sentence", "{tmp}/sentence.txt"]
SWEEP = ["--data", "{tmp}/data", "--sentence-checkpoint", "{tmp}/model.pt", "--workdir", "{tmp}/sweep"]
MAPS = [*MODEL, "--document", "d1", "--sentence", "1"]

CASES = {  # id: (command, its arguments, the message)
    "training-data": ("benchmark_training", ["--data", "{tmp}/missing"],
                      "--data {tmp}/missing: no such directory; give binarized documents"),
    "training-workdir": ("benchmark_training", ["--workdir", "{tmp}/model.pt"],
                         "--workdir {tmp}/model.pt: is a file, not a directory"),
    "quickstart-workdir": ("quickstart", ["--workdir", "{tmp}/model.pt"],
                           "--workdir {tmp}/model.pt: is a file, not a directory"),
    "position-docids": ("bleu_by_position", [*BLEU, "--plot", "{tmp}/p.png", "--docids", "{tmp}/missing"],
                        "--docids {tmp}/missing: no such file; give the docids file of the split"),
    "position-memory": ("bleu_by_position", [*BLEU, "--plot", "{tmp}/p.png", "--memory", "{tmp}/data"],
                        "--memory {tmp}/data: is a directory, not a file; give a fairseq-generate output"),
    "position-reference": ("bleu_by_position", [*BLEU, "--plot", "{tmp}/p.png", "--reference", "{tmp}/missing"],
                           "--reference {tmp}/missing: no such file"),
    "position-plot": ("bleu_by_position", [*BLEU, "--plot", "{tmp}/nodir/p.png"],
                      "--plot {tmp}/nodir/p.png: no folder {tmp}/nodir; create it first"),
    "cost-plot": ("cost_vs_length", ["--plot", "{tmp}/nodir/cost.png"],
                  "--plot {tmp}/nodir/cost.png: no folder {tmp}/nodir"),
    "reach-path": ("gradient_reach", [*MODEL, "--plot", "{tmp}/r.png", "--path", "{tmp}/missing.pt"],
                   "--path {tmp}/missing.pt: no such file; give a transformer_recurrent_memory checkpoint"),
    "reach-data": ("gradient_reach", [*MODEL, "--plot", "{tmp}/r.png", "--data", "{tmp}/model.pt"],
                   "--data {tmp}/model.pt: not a directory; give the binarized data directory"),
    "reach-plot": ("gradient_reach", [*MODEL, "--plot", "{tmp}/reach.pgn"],
                   "--plot {tmp}/reach.pgn: matplotlib cannot write .pgn files"),
    "long-range-workdir": ("long_range_learning", ["--workdir", "{tmp}/model.pt"],
                           "--workdir {tmp}/model.pt: is a file, not a directory"),
    "long-range-plot": ("long_range_learning", ["--workdir", "{tmp}/work", "--plot", "{tmp}/nodir/l.png"],
                        "--plot {tmp}/nodir/l.png: no folder {tmp}/nodir"),
    "maps-path": ("memory_attention_maps", [*MAPS, "--plot-prefix", "{tmp}/m", "--path", "{tmp}/missing.pt"],
                  "--path {tmp}/missing.pt: no such file"),
    "maps-prefix": ("memory_attention_maps", [*MAPS, "--plot-prefix", "{tmp}/model.pt/m"],
                    "--plot-prefix {tmp}/model.pt: is a file, not a directory"),
    "gain-data": ("memory_information_gain", [*MODEL, "--data", "{tmp}/missing"],
                  "--data {tmp}/missing: no such directory"),
    "sweep-checkpoint": ("memory_size_sweep", [*SWEEP, "--sentence-checkpoint", "{tmp}/missing.pt"],
                         "--sentence-checkpoint {tmp}/missing.pt: no such file; give a sentence-level transformer "
                         "checkpoint"),
    "sweep-data": ("memory_size_sweep", [*SWEEP, "--data", "{tmp}/missing"], "--data {tmp}/missing: no such directory"),
    "sweep-docids": ("memory_size_sweep", [*SWEEP, "--docids", "{tmp}/missing"], "--docids {tmp}/missing: no such file"),
    "sweep-plot": ("memory_size_sweep", [*SWEEP, "--plot", "{tmp}/nodir/s.png"], "--plot {tmp}/nodir/s.png: no folder"),
    "sweep-workdir": ("memory_size_sweep", [*SWEEP, "--workdir", "{tmp}/model.pt"],
                      "--workdir {tmp}/model.pt: is a file, not a directory"),
}


@pytest.fixture
def tmp(tmp_path):
    """A checkpoint, a data folder, a docids file and two generate outputs, all as good as the
    checks can tell."""
    for name in ("model.pt", "test.docids", "memory.txt", "sentence.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "data").mkdir()
    return tmp_path


@pytest.mark.parametrize("command, arguments, message", CASES.values(), ids=CASES)
def test_a_path_that_cannot_work_is_refused_first(tmp, capsys, command, arguments, message):
    with pytest.raises(SystemExit) as refused:
        COMMANDS[command].parse_args([argument.format(tmp=tmp) for argument in arguments])
    assert refused.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert f"error: {message.format(tmp=tmp)}" in error
    assert sorted(path.name for path in tmp.iterdir()) == ["data", "memory.txt", "model.pt", "sentence.txt",
                                                           "test.docids"], "a command refused created something"


@pytest.mark.parametrize("command, arguments, created", [
    ("quickstart", ["--workdir", "{tmp}/new/quick"], "new/quick"),
    ("long_range_learning", ["--workdir", "{tmp}/new/long"], "new/long"),
    ("memory_size_sweep", [*SWEEP, "--workdir", "{tmp}/new/sweep"], "new/sweep"),
    ("memory_attention_maps", [*MAPS, "--plot-prefix", "{tmp}/new/maps/m"], "new/maps"),
    ("benchmark_training", ["--workdir", "{tmp}/new/bench"], "new/bench"),
])
def test_a_working_directory_is_created_and_its_outputs_may_go_into_it(tmp, command, arguments, created):
    """A --workdir (or --plot-prefix's folder) is created with its parents; a default plot inside it is fine."""
    COMMANDS[command].parse_args([argument.format(tmp=tmp) for argument in arguments])
    assert (tmp / created).is_dir()
