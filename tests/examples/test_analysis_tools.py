"""Tests of the analysis scripts: s-BLEU by sentence position (paper Figure 3), memory
attention maps (Figures 6-7), the memory-size sweep and the information gain (Figure 2), and
the long-range learning curves by gradient reach.

Position BLEU runs on hand-made fairseq-generate outputs whose per-bucket BLEU is known. The
sweep finetunes tiny memory models of two sizes from conftest's few-update sentence-level
transformer on its synthetic corpus, through the real fairseq command lines; the attention maps are
drawn from one of its checkpoints.
"""
import math

import pytest
import torch
from fairseq import checkpoint_utils
from sacrebleu.metrics import BLEU

from conftest import REPO, TINY_DIMS, TINY_MODEL, batches, build, load_script, save_checkpoint, script_in_process

ANALYSES = REPO / "examples" / "learn_to_remember"
bleu_by_position = load_script(ANALYSES / "bleu_by_position.py")
long_range_learning = load_script(ANALYSES / "long_range_learning.py")
memory_attention_maps = load_script(ANALYSES / "memory_attention_maps.py")
memory_information_gain = load_script(ANALYSES / "memory_information_gain.py")
memory_size_sweep = load_script(ANALYSES / "memory_size_sweep.py")

SIZES = (2, 4)
FEW_UPDATES = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "200", "--max-update", "2",
               "--cpu", "--seed", "1", "--no-epoch-checkpoints", "--log-format", "simple"]


# --- s-BLEU by sentence position -------------------------------------------------------------

DOCIDS = ["a", "a", "a", "a", "b", "b", "b"]  # positions 1 2 3 4 1 2 3
REFERENCES = [
    "the cat sat on the mat .", "it was a sunny day .", "then it went home .",
    "the dog barked all night long .", "markets fell sharply on monday .",
    "investors were worried about inflation .", "a new study says coffee is good for you .",
]
WRONG = "zebra quantum violin"


def generate_output(hypotheses, order=(3, 0, 6, 1, 5, 2, 4)):
    """fairseq-generate lines, ids out of order, with a logging line in between."""
    lines = ["2024-01-01 10:00:00 | INFO | fairseq_cli.generate | loading model"]
    for i in order:
        lines += [f"S-{i}\tsource {i}", f"T-{i}\t{REFERENCES[i]}",
                  f"H-{i}\t-0.5\t{hypotheses[i]}", f"D-{i}\t-0.5\t{hypotheses[i]}", f"P-{i}\t-0.1"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def position_bleu(tmp_path, monkeypatch, capsys):
    """bleu_by_position.py (its command line, run in this process) on the ``generate_output`` of
    ``memory`` and of ``sentence`` (or ``sentence_text``), in buckets of 2 positions."""
    def run(memory, sentence, *options, sentence_text=None):
        (tmp_path / "docids").write_text("\n".join(DOCIDS) + "\n")
        (tmp_path / "memory.txt").write_text(generate_output(memory))
        (tmp_path / "sentence.txt").write_text(sentence_text or generate_output(sentence))
        return script_in_process(
            monkeypatch, capsys, ANALYSES / "bleu_by_position.py",
            "--docids", str(tmp_path / "docids"), "--memory", str(tmp_path / "memory.txt"),
            "--sentence", str(tmp_path / "sentence.txt"), "--bucket", "2",
            "--plot", str(tmp_path / "position.png"), *options,
        )

    return run


def table_rows(stdout):
    """(positions, sentences, memory, sentence, difference) of the printed table."""
    rows = []
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) == 5 and cells[0][0].isdigit():
            rows.append((cells[0], int(cells[1]), *map(float, cells[2:])))
    return rows


def test_position_buckets_follow_document_positions():
    assert bleu_by_position.document_positions(DOCIDS) == [1, 2, 3, 4, 1, 2, 3]
    assert bleu_by_position.position_buckets([1, 2, 3, 4, 1, 2, 3], 2) == [
        (1, 2, [0, 1, 4, 5]), (3, 4, [2, 3, 6])
    ]


def test_bleu_by_position_perfect_then_wrong(tmp_path, position_bleu):
    perfect = list(REFERENCES)
    late_wrong = [WRONG if position > 2 else reference
                  for reference, position in zip(REFERENCES, [1, 2, 3, 4, 1, 2, 3])]
    result = position_bleu(perfect, late_wrong)
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout) == [("1-2", 4, 100.0, 100.0, 0.0), ("3-4", 3, 100.0, 0.0, 100.0)]
    assert (tmp_path / "position.png").stat().st_size > 0

    swapped = position_bleu(late_wrong, perfect)
    assert [row[-1] for row in table_rows(swapped.stdout)] == [0.0, -100.0]


def test_bleu_by_position_is_corpus_bleu_of_each_bucket(position_bleu):
    memory = [r.replace("the", "a") for r in REFERENCES]
    sentence = [" ".join(r.split()[:-2]) for r in REFERENCES]
    result = position_bleu(memory, sentence)
    assert result.returncode == 0, result.stderr
    for (_, count, memory_bleu, sentence_bleu, difference), ids in zip(
        table_rows(result.stdout), ([0, 1, 4, 5], [2, 3, 6])
    ):
        references = [[REFERENCES[i] for i in ids]]
        expected_memory = BLEU().corpus_score([memory[i] for i in ids], references).score
        expected_sentence = BLEU().corpus_score([sentence[i] for i in ids], references).score
        assert count == len(ids)
        assert memory_bleu == pytest.approx(expected_memory, abs=0.005)
        assert sentence_bleu == pytest.approx(expected_sentence, abs=0.005)
        assert difference == pytest.approx(expected_memory - expected_sentence, abs=0.01)


def test_bleu_by_position_refuses_mismatched_outputs(tmp_path, position_bleu):
    other_references = generate_output(REFERENCES).replace("T-2\tthen it went home .", "T-2\tother")
    result = position_bleu(REFERENCES, REFERENCES, sentence_text=other_references)
    assert result.returncode != 0
    assert "differ at sentence id 2" in result.stderr and "sentence.txt" in result.stderr

    missing = "\n".join(l for l in generate_output(REFERENCES).splitlines() if not l.startswith("D-5"))
    result = position_bleu(REFERENCES, REFERENCES, sentence_text=missing + "\n")
    assert result.returncode != 0
    assert "sentence.txt" in result.stderr and "missing ids 5" in result.stderr
    assert not (tmp_path / "position.png").exists()


# --- memory-size sweep -----------------------------------------------------------------------

def sweep_argv(data_bin, checkpoint, workdir):
    return [
        "--data", str(data_bin), "--sentence-checkpoint", str(checkpoint),
        "--sizes", ",".join(map(str, reversed(SIZES))), "--workdir", str(workdir),
        "--train-args", " ".join([*TINY_DIMS, *FEW_UPDATES, "--optimization-window", "1-3"]),
        "--gen-args", "--beam 2 --max-tokens 200 --max-len-b 20 --cpu",
    ]


@pytest.fixture(scope="module")
def sweep(data_bin, sentence_checkpoint, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("sweep")
    return workdir, memory_size_sweep.main(sweep_argv(data_bin, sentence_checkpoint, workdir))


def test_sweep_finetunes_each_size_and_scores_it(sweep, sentence_checkpoint):
    workdir, results = sweep
    assert [r["memory_size"] for r in results] == list(SIZES)
    for result in results:
        assert math.isfinite(result["s_bleu"]) and math.isfinite(result["d_bleu"])
        assert result["information_gain"]["update"] > 0 and result["information_gain"]["output"] > 0
        assert 0 <= result["s_bleu"] <= 100 and 0 <= result["d_bleu"] <= 100
        directory = workdir / f"size-{result['memory_size']}"
        assert f"Loaded checkpoint {sentence_checkpoint}" in (directory / "train.log").read_text()
        state = checkpoint_utils.load_checkpoint_to_cpu(str(directory / "checkpoints" / "checkpoint_best.pt"))
        assert state["cfg"]["model"].memory_size == result["memory_size"]
        assert state["model"]["decoder.layers.1.memory.initial_memory"].size(0) == result["memory_size"]
    assert (workdir / "memory_size_sweep.png").stat().st_size > 0


def test_sweep_rerun_skips_finished_sizes(sweep, data_bin, sentence_checkpoint, capsys):
    workdir, results = sweep
    again = memory_size_sweep.main(sweep_argv(data_bin, sentence_checkpoint, workdir))
    printed = capsys.readouterr().out
    assert again == results
    assert printed.count("scores.json exists, skipped") == len(SIZES)
    assert "training memory size" not in printed
    rows = [line.split() for line in printed.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [(int(size), float(s), float(d), float(u), float(o)) for size, s, d, u, o in rows] == [
        (r["memory_size"], round(r["s_bleu"], 2), round(r["d_bleu"], 2),
         round(r["information_gain"]["update"], 4), round(r["information_gain"]["output"], 4)) for r in results
    ]


def test_sweep_refuses_options_it_sets_and_bad_sizes():
    with pytest.raises(memory_size_sweep.SweepError, match="--memory-size"):
        memory_size_sweep.passed_args("--lr 1e-3 --memory-size 8", "--train-args")
    with pytest.raises(memory_size_sweep.SweepError, match="--save-dir"):
        memory_size_sweep.passed_args("--save-dir=x", "--train-args")
    assert memory_size_sweep.parse_sizes("16, 4,8,4") == [4, 8, 16]
    with pytest.raises(memory_size_sweep.SweepError, match="positive"):
        memory_size_sweep.parse_sizes("4,0")


# --- memory attention maps -------------------------------------------------------------------

@pytest.fixture(scope="module")
def memory_model(sweep, data_bin):
    workdir, _ = sweep
    path = workdir / f"size-{SIZES[-1]}" / "checkpoints" / "checkpoint_best.pt"
    model, task = memory_attention_maps.load_model(path, data_bin)
    return path, model, task


def memory_read_in_batches(model, task, name):
    """{sentence id: the memory it read}, walking the split's document batches (many lanes)
    with the memory carried as the criterion carries it in validation."""
    read, carry = {}, None
    with torch.no_grad():
        for sample in batches(task, "test"):
            lanes = sample["lanes"]
            carry = None if sample["position"].step == 0 else carry.select(lanes)
            memory = model.read_memory(carry, lanes.numel())
            _, extra = model(**sample["net_input"], memory=memory)
            carry = model.carry_after(lanes, memory, extra["encoding"], extra)
            for row, sentence in enumerate(sample["id"].tolist()):
                read[sentence] = memory[name][:, row]
    return read


@pytest.mark.parametrize("side", ["decoder", "encoder"])
def test_attention_maps_are_distributions_over_the_right_axes(memory_model, side):
    _, model, task = memory_model
    maps = memory_attention_maps.attention_maps(model, task, "test", "doc1", 2, side=side)
    dataset = task.dataset("test")
    document = next(d for d in dataset.documents if d.doc_id == "doc1")
    sizes = dataset.pairs.tgt_sizes if side == "decoder" else dataset.pairs.src_sizes
    slots = SIZES[-1]
    assert maps["layer"] == f"{side}.1"
    assert maps["update"].shape == (slots, sizes[document.first + 1])
    assert maps["output"].shape == (sizes[document.first + 2], slots)
    assert len(maps["update_tokens"]) == maps["update"].size(1)
    assert len(maps["output_tokens"]) == maps["output"].size(0)
    assert torch.allclose(maps["update"].sum(dim=1), torch.ones(slots), atol=1e-5)
    assert torch.allclose(maps["output"].sum(dim=1), torch.ones(maps["output"].size(0)), atol=1e-5)
    assert (maps["update"] >= 0).all() and (maps["output"] >= 0).all()
    if side == "decoder":
        target = dataset.pairs.tgt[document.first + 1].tolist()
        assert maps["update_tokens"] == ["</s>"] + [task.target_dictionary[t] for t in target[:-1]]

    # sentence 3 read what the Update Attention wrote from sentence 2, and the memory carried
    # one sentence at a time equals the memory carried through the split's batches
    assert torch.allclose(maps["written_memory"], maps["read_memory"], atol=1e-6)
    in_batches = memory_read_in_batches(model, task, maps["layer"])[document.first + 2]
    assert torch.allclose(maps["read_memory"][:, 0], in_batches, atol=1e-4)
    initial = model.memory_units()[maps["layer"]].initial(1)
    assert not torch.allclose(maps["read_memory"], initial, atol=1e-3)


def test_attention_maps_command_writes_both_plots(memory_model, data_bin, tmp_path, capsys):
    path, _, _ = memory_model
    prefix = tmp_path / "maps" / "doc1"
    maps = memory_attention_maps.main([
        "--path", str(path), "--data", str(data_bin), "--document", "doc1", "--sentence", "1",
        "--plot-prefix", str(prefix),
    ])
    printed = capsys.readouterr().out
    for suffix in ("update", "output"):
        assert (tmp_path / "maps" / f"doc1-{suffix}.png").stat().st_size > 0
    update_slots = [int(line.split()[2]) for line in printed.split("Output Attention")[0].splitlines()
                    if line.split() and line.split()[0].isdigit()]
    assert update_slots == (maps["update"].argmax(dim=0) + 1).tolist()


def test_attention_maps_name_a_missing_or_short_document(memory_model, data_bin, tmp_path):
    path, _, task = memory_model
    task.load_dataset("test")  # the module's other tests may not have loaded it
    last = task.dataset("test").documents[-1]
    common = ["--path", str(path), "--data", str(data_bin), "--plot-prefix", str(tmp_path / "m")]
    with pytest.raises(SystemExit, match="document 'nope' is not in .*test.en-de.docids"):
        memory_attention_maps.main([*common, "--document", "nope", "--sentence", "1"])
    with pytest.raises(SystemExit, match=rf"document '{last.doc_id}' .* has {last.length} sentences"):
        memory_attention_maps.main([*common, "--document", last.doc_id, "--sentence", str(last.length)])
    assert not list(tmp_path.glob("m*"))


# --- information gain ------------------------------------------------------------------------

def test_information_gain_is_zero_for_the_memory_it_compares_with(data_bin, tmp_path):
    """A memory exactly as initialised with the measurement's own seed gains nothing, another
    seed's differs; every attention row counts: each slot's attention over the tokens of each
    sentence but a document's last (Update), each token's over the slots, in each sentence but a
    document's first (Output)."""
    task, model, _, cfg = build(data_bin, *TINY_MODEL, "--seed", "7")
    save_checkpoint(model, cfg, tmp_path / "fresh.pt")
    model, task = memory_attention_maps.load_model(tmp_path / "fresh.pt", data_bin)
    same = memory_information_gain.information_gain(model, task, "test", seed=7)
    other = memory_information_gain.information_gain(model, task, "test", seed=8)
    dataset = task.dataset("test")
    for name, layer in same["layers"].items():
        assert (layer["update"], layer["output"]) == pytest.approx((0, 0), abs=1e-6)  # torch's KL rounds
        assert other["layers"][name]["update"] > 1e-3 and other["layers"][name]["output"] > 1e-3
        sizes = dataset.pairs.src_sizes if name.startswith("encoder") else dataset.pairs.tgt_sizes
        slots = model.memory_units()[name].memory_size
        written = sum(d.length - 1 for d in dataset.documents)
        read = sum(sizes[d.first + i] for d in dataset.documents for i in range(1, d.length))
        assert (layer["update_rows"], layer["output_rows"]) == (slots * written, read)
    assert same["sentences"] == len(dataset) and same["documents"] == len(dataset.documents)


def test_information_gain_command_prints_every_layer(memory_model, data_bin, capsys):
    path, model, _ = memory_model
    gain = memory_information_gain.main(["--path", str(path), "--data", str(data_bin), "--max-documents", "2"])
    printed = capsys.readouterr().out
    assert gain["documents"] == 2 and gain["update"] > 0 and gain["output"] > 0
    for name, layer in gain["layers"].items():
        row = next(line.split() for line in printed.splitlines() if line.split()[:1] == [name])
        assert row[1:] == [f"{layer['update']:.4f}", str(layer["update_rows"]),
                           f"{layer['output']:.4f}", str(layer["output_rows"])]
    assert set(gain["layers"]) == set(model.memory_units())


# --- long-range learning and its probe ----------------------------------------------------

def test_nearest_centroid_tells_the_topic_by_the_even_documents_centroids():
    from memory_nmt.evaluation.cue_probe import nearest_centroid

    kept = [(number, number % 3 % 2, torch.tensor([float(number % 3 % 2), 0.1 * number])) for number in range(12)]
    assert nearest_centroid(kept) == (6, 6)
    swapped = [(n, t, m) if n % 2 == 0 else (n, 1 - t, m) for n, t, m in kept]  # the odd ones' topics swapped
    assert nearest_centroid(swapped) == (0, 6)
    assert nearest_centroid([(n, 0, m) if n % 2 == 0 else (n, t, m) for n, t, m in kept]) is None  # one topic fitted


def test_probe_weighs_the_cue_as_the_attention_maps_and_tells_a_kept_topic(memory_model, monkeypatch):
    from memory_nmt.evaluation import cue_probe
    from memory_nmt_tools.synthetic_documents import generate_documents

    _, model, task = memory_model
    task.load_dataset("test")
    dataset = task.dataset("test")
    documents = generate_documents(6, seed=3, min_sentences=2, max_sentences=6)  # conftest's test split
    cue_words = long_range_learning.topic_cues()
    cue_ids = {"encoder": {task.source_dictionary.index(w) for w in cue_words["encoder"]},
               "decoder": {task.target_dictionary.index(w) for w in cue_words["decoder"]}}
    topic_of = {s: t for t, pairs in enumerate(long_range_learning.TOPIC_SENTENCES.values()) for s, _ in pairs}
    topics = [topic_of[d.source[0]] for d in documents]
    found = cue_probe.probe(model, dataset, topics[:1], cue_ids, lambda d: "1 back" if d == 1 else "later")
    assert set(found) == set(model.memory_units())
    for name, layer in found.items():
        side = name.split(".")[0]
        maps = memory_attention_maps.attention_maps(model, task, "test", dataset.documents[0].doc_id, 1, layer=name)
        tokens = [(task.source_dictionary if side == "encoder" else task.target_dictionary).index(t)
                  for t in maps["update_tokens"]]
        cue = torch.tensor([t in cue_ids[side] for t in tokens])
        assert cue.any()
        expected = maps["update"][:, cue].sum(-1).mean().item() / (cue.sum().item() / len(tokens))
        assert layer["written"] == pytest.approx(expected, rel=1e-5)

    def walk_remembering_the_topic(model, dataset, document):
        sentences = range(document.first, document.first + document.length)
        carries = cue_probe.teacher_forced_carries(model, dataset, sentences)
        topic = topics[dataset.documents.index(document)]
        for _, carry in carries:
            for name in carry.memory:
                memory = carry.memory[name]
                carry.memory[name] = torch.full_like(memory, float(topic)) + 0.01 * torch.randn_like(memory)
        return carries

    monkeypatch.setattr(cue_probe, "walk_document", walk_remembering_the_topic)
    found = cue_probe.probe(model, dataset, topics, cue_ids, lambda d: "any")
    odd_rows = sum(d.length - 1 for d in dataset.documents[1::2])
    for layer in found.values():
        assert layer["kept"]["any"] == (odd_rows, odd_rows)


def test_long_range_items_are_the_context_words_with_their_cue_distance(tmp_path):
    from memory_nmt_tools.synthetic_documents import generate_documents

    documents = generate_documents(20, seed=3, min_sentences=6, max_sentences=9)
    items, phenomena = long_range_learning.context_items(documents, tmp_path)
    words = [w for d in documents for w in d.context_words]
    assert len(items) == len(words) and phenomena == [w.phenomenon for w in words]
    assert {"sense", "pronoun"} == set(phenomena)
    for item, word in zip(items, words):
        assert item.distance == word.distance and len(item.context_source) == word.sentence
        correct = item.candidates[item.correct].split()
        for wrong, alternative in zip(item.candidates[1:], word.alternatives):
            assert [(a, b) for a, b in zip(correct, wrong.split()) if a != b] == [(word.correct, alternative)]
    bucket = long_range_learning.bucket
    assert bucket("sense", 1, 4) == "1 back" and bucket("pronoun", 3, 4) == "pronoun"
    assert bucket("sense", 3, 4) == "2-3 back" and bucket("sense", 4, 4) == ">=4 back"


def test_long_range_learning_trains_each_variant_and_scores_every_epoch(tmp_path, capsys):
    argv = [
        "--workdir", str(tmp_path), "--variants", "drop:1,recompute:2@1,sentence,local_global", "--documents", "6",
        "--test-documents", "4", "--min-sentences", "5", "--max-sentences", "6", "--epochs", "2",
        "--model-args", " ".join(TINY_DIMS), "--max-tokens", "200", "--memory-args", "--max-tokens 150",
        "--max-pronoun-distance", "1", "--sense-rate", "0.3", "--probe-epochs", "2", "--optimization-window", "2",
    ]
    results = long_range_learning.main(argv)
    printed = capsys.readouterr().out
    probed = [line.split() for line in printed.split("probe:")[1].splitlines()[2:] if line.startswith("  ")]
    assert [(row[0], row[1], row[2]) for row in probed] == [
        (variant, "2", layer) for variant in ("drop:1", "recompute:2@1") for layer in ("encoder.1", "decoder.1")]
    assert (tmp_path / "drop-1" / "probe2.json").exists() and not (tmp_path / "sentence" / "probe2.json").exists()
    from memory_nmt_tools.synthetic_documents import DocumentShape, generate_documents

    train = generate_documents(6, seed=1, min_sentences=5, max_sentences=6, shape=DocumentShape(1, 0.3))
    distances = [w.distance for d in train for w in d.context_words if w.phenomenon == "sense"]
    assert (f"whose loss reaches their cue (the first sentence), of {len(distances)}: "
            f"reach 1: {sum(d <= 1 for d in distances)}, reach 2: {sum(d <= 2 for d in distances)}") in printed
    assert list(results) == ["drop:1", "recompute:2@1", "sentence", "local_global"]
    seconds = {variant: long_range_learning.variant_seconds(tmp_path, variant) for variant in results}
    assert sorted(seconds["drop:1"]) == [1, 2] and seconds["drop:1"][1] <= seconds["drop:1"][2]
    assert sorted(seconds["recompute:2@1"]) == [2], "counted from the sentence model's epochs"
    assert seconds["recompute:2@1"][2] >= seconds["sentence"][1], "its first stage's time included"
    assert "time to quality: the first epoch with >= 90% of the sense words right at every distance" in printed
    assert printed.index("\nsentence:") < printed.index("\nrecompute:2@1:")  # its first stage trains first
    items = long_range_learning.contrastive.read_voita_json(tmp_path / "context_words.json")
    assert {item.distance for item in items if len(item.candidates) == 3} == {1}  # the pronouns
    architectures = {}
    directories = {"drop:1": "drop-1", "recompute:2@1": "recompute-2-after-sentence1", "sentence": "sentence",
                   "local_global": "local_global"}
    for variant, by_epoch in results.items():
        finetuned = variant == "recompute:2@1"
        assert sorted(by_epoch) == ([2] if finetuned else [1, 2])  # epochs counted from the sentence model's
        assert all(sum(total for _, total in counts.values()) == len(items) for counts in by_epoch.values())
        checkpoints = tmp_path / directories[variant] / "checkpoints"
        assert not (checkpoints / "checkpoint2.pt").exists() if finetuned else (checkpoints / "checkpoint2.pt").exists()
        state = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoints / ("checkpoint1.pt" if finetuned else
                                                                           "checkpoint2.pt")))
        architectures[variant] = state["cfg"]["model"]._name
        if ":" in variant:
            across, reach = variant.partition("@")[0].split(":")
            criterion = state["cfg"]["criterion"]
            assert (criterion.gradient_across_windows, str(criterion.gradient_reach)) == (across, reach)
        assert state["cfg"]["dataset"].max_tokens == (150 if ":" in variant else 200)
        schedule = state["cfg"]["lr_scheduler"]
        if finetuned:
            assert state["cfg"]["checkpoint"].finetune_from_model == str(tmp_path / "sentence" / "checkpoints" /
                                                                         "checkpoint1.pt")
            assert (schedule._name, schedule.lr, schedule.context_lr) == ("two_rate_inverse_sqrt", [2.4e-4], 1.2e-3)
        else:
            assert (schedule._name, state["cfg"]["checkpoint"].finetune_from_model) == ("inverse_sqrt", None)
    memory = "transformer_recurrent_memory_small"
    assert architectures == {"drop:1": memory, "recompute:2@1": memory,
                             "sentence": "transformer", "local_global": "transformer_local_global_small"}
    assert (tmp_path / "long_range.png").stat().st_size > 0
    capsys.readouterr()
    assert long_range_learning.main(argv) == results
    assert capsys.readouterr().out.count("exists, skipped") == 4
    for wrong in (["--variants", "keep:1"], ["--variants", "memory"], ["--variants", "concat"],
                  ["--variants", "recompute:1@x"], ["--variants", "recompute:1@2", "--epochs", "2"],
                  ["--epochs", "2", "--probe-epochs", "3"], ["--sense-rate", "1"]):
        with pytest.raises(SystemExit):
            long_range_learning.parse_args(wrong)
    shorter = long_range_learning.parse_args(
        ["--workdir", str(tmp_path), "--variants", "recompute:1@3", "--epochs", "4"])
    with pytest.raises(long_range_learning.StepError, match="has no checkpoint3.pt"):
        long_range_learning.check_first_stage(shorter, tmp_path / "sentence")  # trained for 2 epochs
