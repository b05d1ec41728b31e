"""memory_nmt_tools/context_usage.py: CXMI, the cross-entropy on the references without context minus with
it, in bits per token: 0 for the sentence model and for a system whose context is removed on both
sides, not 0 for one that reads its context; on contrastive items, the correct candidate's
log-probability per token with its context minus without, by distance; and, trained on the
quickstart's documents (generated small), the memory model's is positive."""
import json
import math
import os
from dataclasses import replace

import pytest

from conftest import MEMORY_TRAIN, fairseq_command, preprocess, run
from memory_nmt.evaluation import contrastive
from memory_nmt_tools import context_usage, synthetic_documents
from memory_nmt_tools.contrastive_eval import load


def test_without_context_data_makes_every_sentence_of_the_split_a_document(data_bin, tmp_path):
    from memory_nmt.pipeline.data import read_docids

    alone = context_usage.without_context_data(data_bin, "test", tmp_path / "alone")
    assert sorted(p.name for p in alone.iterdir()) == sorted(p.name for p in data_bin.iterdir())
    for path in alone.iterdir():
        if path.name == "test.en-de.docids":
            assert not path.is_symlink()
            lines = path.read_text().splitlines()
            assert len(lines) == len((data_bin / path.name).read_text().splitlines()) == len(set(lines))
        else:
            assert path.is_symlink() and os.readlink(path) == str((data_bin / path.name).resolve())
    documents = read_docids(str(alone / "test.en-de.docids"), len(lines))
    assert len(documents) == len(lines) and all(document.length == 1 for document in documents)


def test_cxmi_is_zero_without_context_and_not_with_it(data_bin, sentence_checkpoint, concat_checkpoint, tmp_path):
    """The sentence model, and the 2-to-2 concatenation model with its context removed (--model-overrides
    K = 0), score the references alike with and without the document index; the concatenation model as
    trained does not."""
    sentence = context_usage.split_cxmi(sentence_checkpoint, data_bin, "test", tmp_path, max_tokens=200)
    removed = context_usage.split_cxmi(concat_checkpoint, data_bin, "test", tmp_path, max_tokens=200,
                                       model_overrides={"source_context": 0, "target_context": 0})
    concat = context_usage.split_cxmi(concat_checkpoint, data_bin, "test", tmp_path, max_tokens=200)
    assert abs(sentence["bits_per_token"]) < 1e-6 and abs(removed["bits_per_token"]) < 1e-6
    assert abs(concat["bits_per_token"]) > 1e-4
    assert concat["tokens"] == sentence["tokens"] == sum(
        len(line.split()) + 1 for line in (data_bin.parent / "raw" / "test.de").read_text().splitlines() if line
    )
    assert concat["bits_per_token"] == pytest.approx(
        concat["without_context_bits_per_token"] - concat["with_context_bits_per_token"], abs=1e-12
    )


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """The test documents' context words, as the data_bin fixture made them."""
    documents = synthetic_documents.generate_documents(6, seed=3, min_sentences=2, max_sentences=6)
    path = tmp_path_factory.mktemp("items") / "items.json"
    path.write_text(json.dumps(synthetic_documents.contrastive_items(documents)))
    return contrastive.read_voita_json(str(path))


def test_contrastive_cxmi_is_the_correct_candidates_gain_per_token_by_distance(data_bin, concat_checkpoint, items):
    """Against the item-by-item definition: the correct candidate's summed log-probability with the
    item's context minus without, over its tokens and end of sentence, in bits, summed by distance."""
    model, task, _ = load(concat_checkpoint, data_bin, use_cuda=False)
    scores, cxmi = context_usage.contrastive_context_use(model, task, items)
    assert scores == contrastive.score_items(model, task, items)
    gained, tokens = {}, {}
    for item in items:
        with_context = contrastive.score_items(model, task, [item])[0][item.correct]
        alone = contrastive.score_items(model, task, [replace(item, context_source=[], context_target=[])])
        length = len(item.candidates[item.correct].split()) + 1
        for key in ("all", str(item.distance)):
            gained[key] = gained.get(key, 0.0) + (with_context - alone[0][item.correct]) / math.log(2)
            tokens[key] = tokens.get(key, 0) + length
    assert sorted(cxmi) == sorted(gained) and "1" in cxmi
    for key in gained:
        assert cxmi[key]["tokens"] == tokens[key]
        assert cxmi[key]["bits_per_token"] == pytest.approx(gained[key] / tokens[key], abs=1e-5)
    assert abs(cxmi["all"]["bits_per_token"]) > 1e-4


def test_contrastive_cxmi_of_the_sentence_model_is_zero(data_bin, sentence_checkpoint, items):
    model, task, _ = load(sentence_checkpoint, data_bin, use_cuda=False)
    _, cxmi = context_usage.contrastive_context_use(model, task, items)
    assert cxmi["all"]["items"] == len(items)
    assert all(value["bits_per_token"] == 0 for value in cxmi.values())


@pytest.fixture(scope="module")
def quickstart_memory(tmp_path_factory):
    """The quickstart's documents, generated small (120 training documents), binarized, and a tiny
    memory model trained on them for 12 epochs: (data, checkpoint)."""
    root = tmp_path_factory.mktemp("quickstart_small")
    for split, count, seed in (("train", 120, 1), ("valid", 10, 1001), ("test", 20, 2001)):
        documents = synthetic_documents.generate_documents(count, seed=seed)
        synthetic_documents.write_documents(documents, str(root / "raw" / split))
    preprocess(
        "--source-lang", "en", "--target-lang", "de",
        *(f"--{split}pref={root / 'raw' / split}.flat" for split in ("train", "valid", "test")),
        "--destdir", str(root / "bin"), "--joined-dictionary", "--workers", "1",
    )
    for split in ("train", "valid", "test"):
        (root / "bin" / f"{split}.en-de.docids").write_bytes((root / "raw" / f"{split}.docids").read_bytes())
    run([fairseq_command("fairseq-train"), str(root / "bin"), *MEMORY_TRAIN, "--lr", "3e-3", "--warmup-updates", "30",
         "--max-tokens", "400", "--max-epoch", "12", "--save-dir", str(root / "checkpoints")])
    return root / "bin", root / "checkpoints" / "checkpoint_last.pt"


def test_the_memory_models_cxmi_is_positive_on_the_quickstarts_documents(quickstart_memory, tmp_path):
    data, checkpoint = quickstart_memory
    cxmi = context_usage.split_cxmi(checkpoint, data, "test", tmp_path, batch_size=32)
    assert cxmi["bits_per_token"] > 0.01, cxmi
