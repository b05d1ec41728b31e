"""Tests of examples/learn_to_remember/gradient_reach.py (paper Figure 4) and cost_vs_length.py (Figure 8).

Gradient reach runs on tiny random models over the synthetic ``data_bin`` corpus: a model
whose Output Attention reads (``make_reads_nonzero``) sends gradient from a sentence's loss to
the embeddings of every earlier sentence of its document; a fresh model, whose reads start at
exactly zero, sends none beyond the sentence itself. Cost against length runs the command line
on tiny lengths and a tiny model.
"""
import re

import pytest

from conftest import REPO, TINY_MODEL, build, load_script, make_reads_nonzero, save_checkpoint, script_in_process
from memory_nmt_tools.benchmarks import peak_memory

ANALYSES = REPO / "examples" / "learn_to_remember"
cost_vs_length = load_script(ANALYSES / "cost_vs_length.py")
gradient_reach = load_script(ANALYSES / "gradient_reach.py")

ROW = re.compile(r"^\s*(\d+)(?:-(\d+))?\s+(\d+)\s+(\S+)\s+(\S+)$", re.M)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def table(stdout):
    """{distance: (pairs, source score, target score)} of the printed buckets (of one distance)."""
    return {int(m[1]): (int(m[3]), float(m[4]), float(m[5])) for m in ROW.finditer(stdout)}


def test_gradient_reaches_earlier_sentences_through_the_memory(data_bin, tmp_path, capsys):
    _, model, _, cfg = build(data_bin, *TINY_MODEL)
    make_reads_nonzero(model)
    save_checkpoint(model, cfg, tmp_path / "checkpoint.pt")
    plot = tmp_path / "reach.png"
    gradient_reach.main([
        "--path", str(tmp_path / "checkpoint.pt"), "--data", str(data_bin), "--split", "test",
        "--bucket", "1", "--max-distance", "4", "--plot", str(plot), "--device", "cpu",
    ])
    rows = table(capsys.readouterr().out)
    assert sorted(rows) == [0, 1, 2, 3]
    assert all(pairs > 0 for pairs, _, _ in rows.values())
    assert rows[0][1] > 0 and rows[0][2] > 0
    for distance in (1, 2, 3):
        assert rows[distance][1] > 0 and rows[distance][2] > 0, f"no gradient at distance {distance}"
    assert plot.read_bytes().startswith(PNG_MAGIC)


def test_fresh_model_sends_no_gradient_beyond_the_sentence(data_bin):
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    task.load_dataset("test")
    rows = gradient_reach.gradient_reach(model.eval(), task.dataset("test"), bucket=1, max_distance=3)
    assert rows[0]["source"] > 0 and rows[0]["target"] > 0
    for row in rows[1:]:
        assert row["pairs"] > 0
        assert row["source"] == 0.0 and row["target"] == 0.0


def test_blocks_of_max_distance_give_the_gradients_of_the_whole_document(data_bin):
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    make_reads_nonzero(model)
    model.eval()
    task.load_dataset("test")
    dataset = task.dataset("test")
    document = max(dataset.documents, key=lambda d: d.length)
    assert document.length >= 5
    samples = gradient_reach.sentence_samples(dataset, document, "cpu")
    whole = {(s, i): scores for s, i, scores in gradient_reach.document_reach(model, samples, document.length)}
    blocked = {(s, i): scores for s, i, scores in gradient_reach.document_reach(model, samples, 2)}
    assert sorted(blocked) == sorted(key for key in whole if key[0] - key[1] < 2)
    for key, scores in blocked.items():
        for side in gradient_reach.SIDES:
            assert scores[side] == pytest.approx(whole[key][side], rel=1e-4, abs=1e-9)


def test_cost_against_length_of_three_models(tmp_path, monkeypatch, capsys):
    """Its command line runs in this process, each model's measurement of the 20-token document in a
    fresh process of its own; the 60-token row's figures are set (the same measurement at another
    length, three more processes of a fairseq import each)."""
    plot = tmp_path / "cost.png"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the measuring processes' threads
    measure, measured = peak_memory.measured_or_exit, []

    def measured_or_set(command):
        if command[-1] != "20":
            return {"seconds": 0.01, "peak_bytes": 3 * peak_memory.MiB, "gpu": None}
        measured.append(command)
        return measure(command)

    # script_in_process runs the script anew, its ``from ... import measured_or_exit`` taking this one
    monkeypatch.setattr(peak_memory, "measured_or_exit", measured_or_set)
    done = script_in_process(
        monkeypatch, capsys, ANALYSES / "cost_vs_length.py", "--lengths", "20,60",
        "--sentence-tokens", "10", "--embed-dim", "32", "--ffn-dim", "64", "--heads", "4",
        "--layers", "2", "--memory-size", "4", "--plot", str(plot),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = re.findall(r"^\s*(\d+)\s+(\d+) \|([\d. ]+)\|([\d. ]+)\|", done.stdout, re.M)
    assert [(int(n), int(sentences)) for n, sentences, _, _ in rows] == [(20, 2), (60, 6)]
    for _, _, seconds, peaks in rows:
        assert len(seconds.split()) == 3 and all(float(s) > 0 for s in seconds.split())
        assert len(peaks.split()) == 3 and all(float(p) > 0 for p in peaks.split())
    assert plot.read_bytes().startswith(PNG_MAGIC)
    assert len(measured) == 3, "each model's 20-token document measured in a process of its own"


def test_cost_lengths_must_be_whole_sentences():
    with pytest.raises(SystemExit):
        cost_vs_length.parse_args(["--lengths", "20,25", "--sentence-tokens", "10", "--plot", "x.png"])
