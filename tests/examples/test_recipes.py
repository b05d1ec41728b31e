"""The recipes' processing steps (examples/recipes/*.sh) on the real files in ../shared/data.

Runs ted.sh / news.sh / europarl.sh with ``--steps prepare,binarize`` (small BPE) on the
selective-attn dev splits, checks the document index against the known counts, that the data
is binarized, that a rerun skips every step, and that ``score`` reads the raw reference; runs
cpu_preset.sh ``--steps split`` to check its document split; and runs news.sh end to end, through
its compare step, on a few documents with a tiny model. Skipped where ../shared/data is absent.
"""
import json
import os
import shutil
import subprocess

import pytest

from recipe_runs import (
    RECIPES, SELECTIVE_ATTN, first_documents, last_checkpoint, needs_shared_data, news_documents, run_recipe,
    text_lines,
)

DEV_COUNTS = {  # sentences and documents of each dev split (shared/data/README.md)
    ("ted.sh", "IWSLT2017"): (8967, 93),
    ("news.sh", "NC-2016"): (2169, 81),
    ("europarl.sh", "Europarl7"): (3587, 240),
}
SMALL_DOCUMENTS = 3

pytestmark = needs_shared_data


def raw_dir(tmp_path, name):
    """A RAW_DIR holding the real dev split, and its first documents as train and test."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for lang in ("en", "de"):
        dev = SELECTIVE_ATTN / name / f"concatenated_en2de_dev_{lang}.txt"
        os.symlink(dev, raw / f"concatenated_en2de_dev_{lang}.txt")
        for split in ("train", "test"):
            first_documents(dev, SMALL_DOCUMENTS, raw / f"concatenated_en2de_{split}_{lang}.txt")
    return raw


def docid_counts(path):
    docids = path.read_text(encoding="utf-8").split()
    return len(docids), len(dict.fromkeys(docids))


@pytest.fixture(scope="module", params=list(DEV_COUNTS), ids=lambda key: key[1])
def prepared(request, tmp_path_factory):
    """(script, name, work dir, raw dir, output) after ``--steps prepare,binarize``."""
    script, name = request.param
    tmp_path = tmp_path_factory.mktemp(name)
    raw, work = raw_dir(tmp_path, name), tmp_path / "work"
    output = run_recipe(script, work, "--steps", "prepare,binarize", RAW_DIR=raw, BPE_MERGES=500)
    return script, name, work, raw, output


def test_prepare_and_binarize_keep_every_document(prepared):
    script, name, work, _, _ = prepared
    data_bin = work / "data-bin"
    assert docid_counts(data_bin / "valid.en-de.docids") == DEV_COUNTS[(script, name)]
    train_sentences, train_documents = docid_counts(data_bin / "train.en-de.docids")
    assert train_documents == SMALL_DOCUMENTS
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            assert (data_bin / f"{split}.en-de.{lang}.bin").stat().st_size > 0
        bpe_lines = text_lines(work / "prep" / f"{split}.de")
        raw_lines = text_lines(work / "raw" / f"{split}.de")
        assert len(bpe_lines) == len(raw_lines) == docid_counts(
            data_bin / f"{split}.en-de.docids")[0]
    bpe_train = text_lines(work / "prep" / "train.en")
    assert any("@@ " in line for line in bpe_train) and len(bpe_train) == train_sentences
    codes = (work / "prep" / "bpe.codes").read_text(encoding="utf-8").splitlines()
    assert codes[0].startswith("#version") and 1 < len(codes) <= 501  # at most 500 merges


def test_rerun_skips_every_step(prepared):
    script, _, work, raw, _ = prepared
    outputs = sorted(p for p in work.rglob("*") if p.is_file())
    times = {p: p.stat().st_mtime_ns for p in outputs}
    output = run_recipe(script, work, "--steps", "prepare,binarize", RAW_DIR=raw, BPE_MERGES=500)
    for step in ("prepare train", "prepare valid", "prepare test", "binarize"):
        assert f"== {step}: skipped" in output
    assert "+ " not in output  # no command ran
    assert {p: p.stat().st_mtime_ns for p in sorted(p for p in work.rglob("*") if p.is_file())} \
        == times


def test_score_reads_the_raw_reference(prepared):
    """Hypotheses equal to the untokenized reference score 100: the reference is the raw text;
    and the model's tokens equal to the prepared reference without its BPE score 100 the paper's
    way (tokenized BLEU)."""
    _, _, work, _, _ = prepared
    reference = text_lines(work / "raw" / "test.de")
    assert any("&" in line or '"' in line or "," in line for line in reference)
    tokens = [line.replace("@@ ", "") for line in text_lines(work / "prep" / "test.de")]
    assert tokens != reference
    lines = [f"H-{i}\t-0.1\t{tokens[i]}\nD-{i}\t-0.1\t{text}\n" for i, text in reversed(list(enumerate(reference)))]
    (work / "generate-sentence.txt").write_text("".join(lines), encoding="utf-8")
    command = f'source "{RECIPES}/common.sh"; score sentence; results_table sentence'
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "WORK_DIR": str(work)},
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "| sentence | 100.00 | 100.00 | 100.00 | 100.00 |" in (work / "results.md").read_text(encoding="utf-8")
    assert "nrefs:1|case:mixed" in result.stdout and "tok:none" in result.stdout

    older = json.loads((work / "score-sentence.json").read_text(encoding="utf-8"))  # an older run's, untokenized
    del older["tokenized"]
    (work / "score-older.json").write_text(json.dumps(older), encoding="utf-8")
    command = f'source "{RECIPES}/common.sh"; results_table sentence older'
    result = subprocess.run(["bash", "-c", command], env={**os.environ, "WORK_DIR": str(work)},
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "| older | 100.00 | 100.00 | - | - |" in (work / "results.md").read_text(encoding="utf-8")


def test_unknown_positions_are_refused_before_any_step(tmp_path):
    result = subprocess.run(["bash", str(RECIPES / "ted.sh"), "--steps", "prepare"],
                            env={**os.environ, "WORK_DIR": str(tmp_path), "POSITIONS": "absolute"},
                            capture_output=True, text=True)
    assert result.returncode != 0 and "POSITIONS=absolute: give sinusoidal or learned" in result.stderr
    assert "== prepare" not in result.stderr


def test_unknown_option_is_refused(tmp_path):
    result = subprocess.run(["bash", str(RECIPES / "ted.sh"), "--step", "prepare"],
                            env={**os.environ, "WORK_DIR": str(tmp_path)},
                            capture_output=True, text=True)
    assert result.returncode != 0 and "unknown option --step" in result.stderr


@pytest.mark.parametrize("script", ["europarl.sh", "cpu_preset.sh"])
def test_an_unknown_step_is_refused_not_skipped(tmp_path, script):
    """A misspelt step matched none, so the recipe did nothing and exited 0."""
    result = subprocess.run(["bash", str(RECIPES / script), "--steps", "binarize,trian"],
                            env={**os.environ, "WORK_DIR": str(tmp_path)}, capture_output=True, text=True)
    assert result.returncode != 0 and "--steps binarize,trian: unknown step 'trian'" in result.stderr
    assert "== binarize" not in result.stderr, "refused before any step runs"


def test_a_raw_dir_that_does_not_exist_is_named_not_downloaded_into(tmp_path):
    missing = tmp_path / "no-such-dir"
    result = subprocess.run(["bash", str(RECIPES / "europarl.sh"), "--steps", "download,prepare"],
                            env={**os.environ, "WORK_DIR": str(tmp_path / "work"), "RAW_DIR": str(missing)},
                            capture_output=True, text=True)
    assert result.returncode != 0 and f"RAW_DIR={missing} does not exist" in result.stderr
    assert not missing.exists()


def read_marked_documents(path):
    documents = []
    for line in text_lines(path):
        if line == "<d>":
            documents.append([])
        else:
            documents[-1].append(line)
    return documents


@pytest.fixture(scope="module")
def preset_split(tmp_path_factory):
    work = tmp_path_factory.mktemp("preset") / "work"
    run_recipe("cpu_preset.sh", work, "--steps", "split")
    return work


def corpus_documents(corpora, lang):
    """{document id: sentences} over all corpus files."""
    documents = {}
    for docids in sorted(corpora.glob("*.docids")):
        lines = text_lines(docids.with_suffix(f".{lang}"))
        for docid, line in zip(docids.read_text(encoding="utf-8").split(), lines):
            documents.setdefault(docid, []).append(line)
    return documents


def test_preset_holds_out_whole_disjoint_documents(preset_split):
    split_dir = preset_split / "split"
    names = {split: (split_dir / f"{split}.documents").read_text(encoding="utf-8").split()
             for split in ("train", "valid", "test")}
    all_names = [name for split in names.values() for name in split]
    assert len(all_names) == len(set(all_names)) == 1184
    for held_out in ("valid", "test"):
        assert 0.04 < len(names[held_out]) / len(all_names) < 0.06
    for lang in ("en", "de"):
        corpus = corpus_documents(preset_split / "corpora", lang)
        assert set(corpus) == set(all_names)
        for split, split_names in names.items():
            documents = read_marked_documents(split_dir / f"{split}.{lang}")
            assert documents == [corpus[name] for name in split_names]


def test_preset_split_is_deterministic(preset_split, tmp_path):
    other = tmp_path / "work"
    shutil.copytree(preset_split / "corpora", other / "corpora")
    run_recipe("cpu_preset.sh", other, "--steps", "split")
    for path in sorted((preset_split / "split").iterdir()):
        assert path.read_bytes() == (other / "split" / path.name).read_bytes(), path.name


@pytest.fixture(scope="module")
def news_run(tmp_path_factory):
    """news.sh end to end (prepare .. compare) on a few real documents with a tiny model and
    learned positions, comparing the default COMPARED's systems but the concatenation model (which
    test_from_pretrained_recipe.py's run compares): (work dir, the recipe's environment)."""
    tmp_path = tmp_path_factory.mktemp("news")
    raw = tmp_path / "raw"
    news_documents(raw, lambda split, lang: f"concatenated_en2de_{split}_{lang}.txt", valid="dev")
    tiny = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
            "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
            "--decoder-attention-heads 2")
    work = tmp_path / "work"
    environment = dict(RAW_DIR=raw, BPE_MERGES=100, MODEL_ARGS=tiny, TRAIN_ARGS="--cpu",
                       GENERATE_ARGS="--cpu --max-len-b 5", SENTENCE_ARGS="--max-update 2", SENTENCE_WARMUP=1,
                       FINETUNE_EPOCHS=1, MEMORY_WARMUP=1, COMPARE_LENGTHS="3", MAX_TOKENS=2048,
                       CHUNK_SENTENCES=4, LOCAL_GLOBAL_MAX_TOKENS=3072, POSITIONS="learned",
                       COMPARED="sentence_continued amn local_global")
    run_recipe("news.sh", work, "--steps", "prepare,binarize,train,generate,score,compare", **environment)
    return work, environment


def test_compare_step_gives_every_system_the_memory_models_budget(news_run):
    """The Associated Memory Network, the local+global model and the sentence control train for the
    memory model's budget, FINETUNE_EPOCHS whole epochs (the same target tokens, in batches of
    different sizes), and the five systems reach the results table and the side-by-side comparison;
    POSITIONS=learned gives every one of them learned positions. (The concatenation model's run:
    test_from_pretrained_recipe.py.)"""
    work, _ = news_run

    def last(name):
        return last_checkpoint(work, name)

    for name in ("memory", "amn", "local_global", "sentence_continued"):
        assert last(name)["extra_state"]["train_iterator"]["epoch"] == 2, f"{name}: not 1 whole epoch"
        assert last(name)["extra_state"]["train_iterator"]["iterations_in_epoch"] == 0
    updates = {name: last(name)["optimizer_history"][-1]["num_updates"] for name in ("memory", "amn")}
    assert updates["memory"] != updates["amn"], "in its own batches, the Associated Memory Network's updates differ"
    for name in ("sentence", "sentence_continued", "amn", "local_global", "memory"):
        model = last(name)["cfg"]["model"]
        assert model.encoder_learned_pos and model.decoder_learned_pos, f"{name}: POSITIONS=learned not applied"
    amn = last("amn")["cfg"]
    assert (amn["model"]._name, amn["model"].context_sentences) == ("transformer_associated_memory", 1)
    local_global = last("local_global")["cfg"]
    assert (local_global["model"]._name, local_global["model"].chunk_sentences) == ("transformer_local_global", 4)
    assert local_global["dataset"]["max_tokens"] == 3072, "its whole chunks train in LOCAL_GLOBAL_MAX_TOKENS"
    for name in ("amn", "local_global"):
        assert last(name)["cfg"]["lr_scheduler"]["_name"] == "two_rate_inverse_sqrt"
    for name in ("amn", "local_global", "sentence_continued"):  # no early stop before the budget is spent
        assert last(name)["cfg"]["checkpoint"]["patience"] == -1
    results = (work / "results.md").read_text(encoding="utf-8")
    compared = (work / "compare.txt").read_text(encoding="utf-8")
    for name in ("sentence", "sentence_continued", "amn", "local_global", "memory"):
        assert f"| {name} |" in results
        assert any(line.split()[:1] == [name] for line in compared.splitlines())
    assert "MiB@3" in compared and (work / "compare.png").exists()


def test_ablations_step_finetunes_each_configuration_per_seed_and_averages(news_run):
    """Table 3 as a recipe step: each SIDES:LAYERS of ABLATIONS finetuned from the sentence model
    once per seed of SEEDS, with its memory where it says; the table gives each configuration's
    seeds' means (of score files given distinct values here: the tiny models all score 0). A rerun
    skips every finished run and only tabulates: the second configuration (both sides' last layer)
    is given as finished runs (the markers of its steps and its score files), which keeps the test
    to two finetunes."""
    work, environment = news_run
    run_recipe("news.sh", work, "--steps", "ablations", **dict(environment, ABLATIONS="encoder:0", SEEDS="1 2"))

    def give_scores(name, seed, offset):  # distinct values, so that the means tell the runs apart
        path = work / f"score-{name}.json"
        scores = json.loads(path.read_text(encoding="utf-8"))
        values = [10 * seed + offset + part for part in (0.1, 0.2, 0.3, 0.4)]
        scores["s_bleu"], scores["d_bleu"] = values[:2]
        scores["tokenized"]["s_bleu"], scores["tokenized"]["d_bleu"] = values[2:]
        path.write_text(json.dumps(scores), encoding="utf-8")

    for seed in (1, 2):
        trained = f"memory-encoder-0-seed{seed}"
        checkpoint = last_checkpoint(work, trained)
        model, common = checkpoint["cfg"]["model"], checkpoint["cfg"]["common"]
        assert (model.memory_sides, model.memory_layers, common["seed"]) == ("encoder", "0", seed)
        assert checkpoint["extra_state"]["train_iterator"]["epoch"] == 2  # the budget: 1 epoch
        finished = f"memory-both--1-seed{seed}"  # its checkpoint's and translation's markers, a score file
        (work / "checkpoints" / finished).mkdir()
        (work / "checkpoints" / finished / ".done").touch()
        (work / f"generate-{finished}.txt").touch()
        shutil.copyfile(work / f"score-{trained}.json", work / f"score-{finished}.json")
        give_scores(trained, seed, 0)
        give_scores(finished, seed, 1)
    expected = [f"| {sides} | {layers} | 1, 2 | "
                + " | ".join(f"{15 + offset + part:.2f}" for part in (0.1, 0.2, 0.3, 0.4)) + " |"
                for offset, (sides, layers) in enumerate((("encoder", "0"), ("both", "-1")))]
    rerun = run_recipe("news.sh", work, "--steps", "ablations", **dict(environment, ABLATIONS="encoder:0 both:-1",
                                                                       SEEDS="1 2"))
    assert "fairseq_cli.train" not in rerun and "fairseq_cli.generate" not in rerun
    table = (work / "ablations.md").read_text(encoding="utf-8").splitlines()
    assert table[2:5] == [*expected, ""], table


def test_ablations_run_only_when_named_and_are_checked_first(tmp_path):
    wants = subprocess.run(
        ["bash", "-c", f'source "{RECIPES}/common.sh"; STEPS=all; wants train && ! wants ablations && '
         'STEPS=ablations; wants ablations && ! wants train'],
        env={**os.environ, "WORK_DIR": str(tmp_path)}, capture_output=True, text=True)
    assert wants.returncode == 0, wants.stderr
    refused = subprocess.run(["bash", str(RECIPES / "ted.sh"), "--steps", "prepare"],
                             env={**os.environ, "WORK_DIR": str(tmp_path), "ABLATIONS": "both:5 sideways:1"},
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "ABLATIONS: 'sideways:1': give SIDES:LAYERS" in refused.stderr
    assert "== prepare" not in refused.stderr


@pytest.mark.parametrize("compared, message", [
    ("concat transformer", "COMPARED: 'transformer': give some of sentence_continued concat amn local_global"),
    ("concat amn concat", "COMPARED: 'concat' is named twice; name each system once"),
])
def test_compared_systems_are_checked_before_any_step(tmp_path, compared, message):
    refused = subprocess.run(["bash", str(RECIPES / "news.sh"), "--steps", "prepare"],
                             env={**os.environ, "WORK_DIR": str(tmp_path), "COMPARED": compared},
                             capture_output=True, text=True)
    assert refused.returncode != 0 and message in refused.stderr, refused.stderr
    assert "== prepare" not in refused.stderr
