"""examples/recipes/from_pretrained.sh end to end, from a tiny checkpoint of mBART-50's layout trained
by fairseq's own multilingual task, on a few of ../shared/data's real documents; and what the recipe
refuses before any step. (Its own module, so that pytest-xdist runs it beside test_recipes.py.)"""
import os
import shutil
import subprocess
import sys

import pytest

from recipe_runs import RECIPES, last_checkpoint, needs_shared_data, news_documents, run_recipe, text_lines

pytestmark = needs_shared_data

PRETRAINED_SHAPE = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
                    "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
                    "--decoder-attention-heads 2").split()


@pytest.fixture(scope="module")
def from_pretrained_run(tmp_path_factory):
    """from_pretrained.sh end to end on a few real documents, from a tiny checkpoint shaped and trained as
    mBART-50's finetuned models are (mbart_base: pre-norm, learned positions, embedding norm; fairseq's
    translation_multi_simple_epoch with [lang] tokens, its languages read from a --lang-dict file), with
    a sentencepiece model and a dictionary of its own: (work dir, the pretrained checkpoint, the
    language file). The checkpoint is trained on the recipe's own prepared data (its steps prepare
    and binarize, then train .. compare)."""
    import sentencepiece

    tmp_path = tmp_path_factory.mktemp("from_pretrained")
    documents = tmp_path / "documents"
    news_documents(documents, lambda split, lang: f"{split}.{lang}")
    text = [line for lang in ("en", "de") for line in text_lines(documents / f"train.{lang}") if line != "<d>"]
    (tmp_path / "spm-train.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(tmp_path / "spm-train.txt"), model_prefix=str(tmp_path / "spm"),
                                             vocab_size=300, character_coverage=1.0, minloglevel=2)
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    dictionary = tmp_path / "dict.txt"  # mBART's dict.txt: the model's pieces, fairseq's own symbols left out
    dictionary.write_text("".join(f"{pieces.id_to_piece(i)} 1\n" for i in range(pieces.get_piece_size())
                                  if not (pieces.is_unknown(i) or pieces.is_control(i))), encoding="utf-8")
    lang_dict = tmp_path / "mbart 50" / "langs.txt"  # a space, kept by the options' quotes
    lang_dict.parent.mkdir()
    lang_dict.write_text("de\nen\n", encoding="utf-8")
    work = tmp_path / "the work's dir"  # its paths in the options keep a space and a quote
    environment = dict(PRETRAINED=tmp_path / "pretrained.pt", DICT=dictionary,
                       SPM_MODEL=tmp_path / "spm.model", DOCUMENTS=documents, LANG_DICT=lang_dict)
    environment["PRETRAINED"].write_bytes(b"")  # a placeholder: prepare and binarize read no checkpoint
    run_recipe("from_pretrained.sh", work, "--steps", "prepare,binarize", **environment)
    pretrain = subprocess.run(
        [sys.executable, "-m", "fairseq_cli.train", str(work / "data-bin"), "--task", "translation_multi_simple_epoch",
         "--lang-pairs", "en-de", "--lang-dict", str(lang_dict), "--lang-tok-style", "mbart", "--encoder-langtok", "src",
         "--decoder-langtok", "--sampling-method", "temperature", "--arch", "mbart_base", *PRETRAINED_SHAPE,
         "--encoder-normalize-before", "--decoder-normalize-before", "--optimizer", "adam", "--lr", "1e-3",
         "--max-update", "2", "--max-tokens", "1024", "--cpu", "--criterion", "label_smoothed_cross_entropy",
         "--save-dir", str(tmp_path / "pretrained"), "--no-epoch-checkpoints", "-s", "en", "-t", "de",
         "--data-buffer-size", "0"],  # fairseq alone: no thread making batches that could abort its exit
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert pretrain.returncode == 0, pretrain.stderr[-3000:]
    shutil.copyfile(tmp_path / "pretrained" / "checkpoint_last.pt", environment["PRETRAINED"])
    run_recipe("from_pretrained.sh", work, "--steps", "train,generate,score,compare", **environment,
               TRAIN_ARGS="--cpu", GENERATE_ARGS="--cpu --max-len-b 5", SENTENCE_ARGS="--max-update 2",
               SENTENCE_WARMUP=1, FINETUNE_EPOCHS=1, MEMORY_WARMUP=1, COMPARE_LENGTHS="3", COMPARED="concat")
    return work, str(environment["PRETRAINED"]), str(lang_dict)


def test_from_pretrained_finetunes_the_compared_systems_from_the_checkpoint(from_pretrained_run):
    """Every system is built in the pretrained checkpoint's shape (its pre-norm layers, learned
    positions and embedding norm read from it) on data with its dictionary, sentencepiece pieces and
    language tokens (its task's placement, its languages from the file): stage one is finetuned from the
    checkpoint, the memory model and the system of COMPARED (the concatenation model, with the
    recipe's context and in its own batches) from stage one, each for the same budget, and the three
    reach the results table and the comparison, their output free of pieces and language tokens; the
    systems COMPARED leaves out are not trained. (Each system finetuned from such a checkpoint by
    fairseq-train: test_language_tokens.py; the recipe's steps for the other three, from a checkpoint
    of the recipe's own: test_recipes.py.)"""
    work, pretrained, lang_dict = from_pretrained_run
    prepared = text_lines(work / "prep" / "train.en")
    assert all("▁" in line for line in prepared) and not any("@@" in line for line in prepared)
    last = {name: last_checkpoint(work, name) for name in ("sentence", "memory", "concat")}
    sentence = last["sentence"]["cfg"]
    assert (sentence["model"]._name, sentence["task"]["_name"]) == ("transformer", "document_translation")
    assert sentence["checkpoint"]["finetune_from_model"] == pretrained
    stage_one = str(work / "checkpoints" / "sentence" / "checkpoint_best.pt")
    for name, checkpoint in last.items():
        cfg = checkpoint["cfg"]
        model, task = cfg["model"], cfg["task"]
        assert model.encoder_normalize_before and model.decoder_learned_pos and model.layernorm_embedding, name
        assert (model.encoder_layers, model.encoder_embed_dim, model.activation_fn) == (1, 32, "gelu"), name
        assert (task["lang_dict"], task["lang_tok_style"], task["encoder_langtok"], task["decoder_langtok"]) \
            == (lang_dict, "mbart", "src", True), name
        if name != "sentence":
            assert cfg["checkpoint"]["finetune_from_model"] == stage_one, name
            assert checkpoint["extra_state"]["train_iterator"]["epoch"] == 2, f"{name}: not 1 epoch"
    concat = last["concat"]["cfg"]
    assert (concat["model"]._name, concat["model"].source_context, concat["model"].target_context) \
        == ("transformer_context_concat", 1, 0)
    assert concat["checkpoint"]["patience"] == -1, "no early stop before the budget is spent"
    updates = [last[name]["optimizer_history"][-1]["num_updates"] for name in ("memory", "concat")]
    assert updates[0] != updates[1], "in its own batches, the concatenation model's updates differ"
    for name in ("sentence", "memory", "concat"):
        translations = [line.split("\t")[2] for line in text_lines(work / f"generate-{name}.txt")
                        if line.startswith("D-")]
        assert len(translations) == len(text_lines(work / "raw" / "test.de"))
        assert not any("▁" in line or "[de]" in line for line in translations), name
    results = (work / "results.md").read_text(encoding="utf-8")
    compared = (work / "compare.txt").read_text(encoding="utf-8")
    for name in ("sentence", "concat", "memory"):
        assert f"| {name} |" in results
        assert any(line.split()[:1] == [name] for line in compared.splitlines())
    for name in ("sentence_continued", "amn", "local_global"):
        assert not (work / "checkpoints" / name).exists() and f"| {name} |" not in results, name
    assert "| memory |" in results and "| - | - |" in results, "no tokenized BLEU of text in pieces"


def test_from_pretrained_leaves_embedding_sharing_to_the_checkpoint(tmp_path):
    """common.sh's --share-all-embeddings default does not come back when EMBEDDING_ARGS is set empty,
    as from_pretrained.sh sets it: a checkpoint trained without it gets none (its own sharing comes
    with MODEL_ARGS)."""
    command = f'source "{RECIPES}/common.sh"; echo "[$EMBEDDING_ARGS]"'
    for setting, expected in (({}, "[--share-all-embeddings]"), ({"EMBEDDING_ARGS": ""}, "[]")):
        result = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                                env={**os.environ, "WORK_DIR": str(tmp_path), **setting})
        assert result.returncode == 0 and result.stdout.strip() == expected, (setting, result.stdout, result.stderr)


def test_from_pretrained_names_what_is_missing_before_any_step(tmp_path):
    def refusal(**env):
        result = subprocess.run(["bash", str(RECIPES / "from_pretrained.sh")], capture_output=True, text=True,
                                env={**os.environ, "WORK_DIR": str(tmp_path), **env})
        assert result.returncode != 0 and "== " not in result.stderr, result.stderr
        return result.stderr

    assert "give PRETRAINED" in refusal()
    assert f"PRETRAINED={tmp_path}/model.pt does not exist" in refusal(PRETRAINED=f"{tmp_path}/model.pt")
