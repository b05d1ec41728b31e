"""Contrastive evaluation in context: the test-set readers, the CLI's options and segmentation, a
scorer that carries the memory as training does, and the CLI on models trained through
fairseq-train, where only the memory model can tell the right pronoun."""
import json
import re
import shutil
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from fairseq.data import Dictionary
from fairseq.data.data_utils import post_process
from fairseq.sequence_scorer import SequenceScorer

from conftest import (
    PLUGIN, REPO, TINY_DIMS, TINY_MODEL, batches, build, fairseq_command, make_reads_nonzero, preprocess, run,
    script_in_process, walk,
)
from memory_nmt.evaluation.contrastive import (
    ContrastiveDataError,
    ContrastiveItem,
    contrapro_groups,
    read_context_files,
    read_joined_lines,
    read_voita_json,
    score_items,
)
from memory_nmt_tools import contrastive_eval, prepare_documents, synthetic_documents
from memory_nmt_tools.subword_pieces import dictionary_segmentation


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# Readers


def test_contrapro_layout_groups_by_json_and_drops_empty_context(tmp_path):
    contrapro = tmp_path / "contrapro.json"
    contrapro.write_text(json.dumps([
        {"errors": [{"contrastive": "sie ist rot ."}, {"contrastive": "es ist rot ."}], "ante distance": 1},
        {"errors": [{"contrastive": "er ist alt ."}], "ante distance": 0},
    ]))
    files = [
        write(tmp_path / "c.context.en", ["", "i saw a table .", "", "i saw a table .", "", "i saw a table .",
                                          "we sat .", "i saw a cup .", "we sat .", "i saw a cup ."]),
        write(tmp_path / "c.text.en", ["it is red ."] * 3 + ["it is old ."] * 2),
        write(tmp_path / "c.context.de", ["", "ich sah einen tisch .", "", "ich sah einen tisch .", "",
                                          "ich sah einen tisch .", "wir sassen .", "ich sah eine tasse .",
                                          "wir sassen .", "ich sah eine tasse ."]),
        write(tmp_path / "c.text.de", ["er ist rot .", "sie ist rot .", "es ist rot .", "sie ist alt .", "er ist alt ."]),
    ]
    sizes, distances = contrapro_groups(contrapro)
    first, second = read_context_files(*files, context_size=2, group_sizes=sizes, distances=distances)
    assert (first.context_source, first.context_target) == (["i saw a table ."], ["ich sah einen tisch ."])
    assert first.candidates == ["er ist rot .", "sie ist rot .", "es ist rot ."] and first.distance == 1
    assert second.context_source == ["we sat .", "i saw a cup ."] and second.candidates[0] == "sie ist alt ."
    assert second.where.endswith("c.text.en:4")
    with pytest.raises(ContrastiveDataError, match=r"short\.de: 9 lines, expected 10"):
        read_context_files(files[0], files[1], write(tmp_path / "short.de", ["x"] * 9), files[3], context_size=2)


def test_bawden_pairs_need_the_group_size_when_sources_repeat(tmp_path):
    files = [
        write(tmp_path / "a.prev.en", ["the buildings are done ."] * 4),
        write(tmp_path / "a.current.en", ["they are full ."] * 4),
        write(tmp_path / "a.prev.fr", ["les batiments sont finis ."] * 2 + ["les maisons sont finies ."] * 2),
        write(tmp_path / "a.current.fr", ["ils sont pleins .", "elles sont pleines .",
                                          "elles sont pleines .", "ils sont pleins ."]),
    ]
    pairs = read_context_files(*files, group_size=2)
    assert [(i.context_target, i.candidates[0]) for i in pairs] == [
        (["les batiments sont finis ."], "ils sont pleins ."), (["les maisons sont finies ."], "elles sont pleines .")]
    assert len(read_context_files(*files)) == 2  # equal source and context: the same two items
    with pytest.raises(ContrastiveDataError, match=r"a\.current\.en:3: this candidate's source or context differs"):
        read_context_files(*files, group_size=4)


def test_voita_json_and_scoring_lines(tmp_path):
    groups = [  # as in deixis_test: two items per source, their target contexts differ
        ("hi . _eos you came .", ["salut . _eos tu es venu .", "salut . _eos vous etes venu ."]),
        ("hi . _eos you came .", ["bonjour . _eos vous etes venu .", "bonjour . _eos tu es venu ."]),
    ]
    path = tmp_path / "deixis_test.json"
    path.write_text(json.dumps([{"src": s, "dst": d, "true_ind": i, "ctx_dist": 1} for i, (s, d) in enumerate(groups)]))
    items = read_voita_json(path)
    assert [(i.context_target, i.source, i.correct, i.distance) for i in items] == [
        (["salut ."], "you came .", 0, 1), (["bonjour ."], "you came .", 1, 1)]
    assert items[1].candidates == ["vous etes venu .", "tu es venu ."]

    src = write(tmp_path / "deixis_test.src", [s for s, d in groups for _ in d])
    dst = write(tmp_path / "deixis_test.dst", [c for _, d in groups for c in d])
    lines = read_joined_lines(src, dst)
    assert [(i.context_target, i.candidates) for i in lines] == [(i.context_target, i.candidates) for i in items[:1]] + [
        (["bonjour ."], ["vous etes venu .", "tu es venu ."])]
    with pytest.raises(ContrastiveDataError, match=r"bad\.src:2 has 1 .* but .*deixis_test\.dst:2 has 2"):
        read_joined_lines(write(tmp_path / "bad.src", ["hi . _eos you came .", "you came ."] * 2), dst)


@pytest.mark.parametrize("field, value, message", [
    ("true_ind", "0", "'true_ind' is a str, not a whole number"),
    ("true_ind", True, "'true_ind' is a bool, not a whole number"),
    ("ctx_dist", "1", "'ctx_dist' is a str, not a whole number"),
    ("dst", "salut . _eos tu es venu .", "'dst' is a str, not a list of candidate strings"),
    ("dst", ["salut . _eos tu es venu .", 3], "'dst' is a list, not a list of candidate strings"),
    ("src", ["hi ."], "'src' is a list, not a string"),
    ("true_ind", None, "'true_ind' is a NoneType, not a whole number"),
    ("true_ind", "missing", "lacks 'src', 'dst' or 'true_ind' (the index of the correct candidate)"),
    ("dst", ["salut . _eos tu es venu ."] * 2, "candidate 1 is the same sentence as the correct candidate (0) (as "
                                               "the file gives it, or once tokenized), so the item could never be "
                                               "scored right"),
])
def test_voita_json_fields_are_checked_by_name(tmp_path, field, value, message):
    """A field of the wrong type, a missing index of the correct candidate (scored as 0 before) or
    a correct candidate given twice (never right) is refused, naming the entry."""
    entry = {"src": "hi . _eos you came .", "dst": ["salut . _eos tu es venu .", "salut . _eos vous etes venu ."],
             "true_ind": 0, "ctx_dist": 1}
    path = tmp_path / "items.json"
    changed = {name: given for name, given in {**entry, field: value}.items() if given != "missing"}
    path.write_text(json.dumps([entry, changed]))
    with pytest.raises(ContrastiveDataError, match=re.escape(f"items.json: entry 1: {message}")):
        read_voita_json(path)


@pytest.mark.parametrize("option, message", [
    ("--path", "no such file; give the document-level model's checkpoint"),
    ("--sentence-model", "no such file; give the sentence-level model's checkpoint"),
    ("--data", "no such directory; give a data-bin directory with the model's dictionaries"),
    ("--sentence-data", "no such directory; give a data-bin directory with the model's dictionaries"),
    ("--bpe-codes", "no such file; give the subword-nmt codes the models' data was segmented with"),
    ("--format voita JSON", "no such file; give the test set's JSON file"),
])
def test_cli_refuses_a_missing_input_before_scoring(tmp_path, option, message, capsys):
    """A typo in --sentence-model (or its data, or the codes) ended in a traceback only after
    the first model had scored every item; the test set's files are checked with them."""
    items, codes = tmp_path / "items.json", tmp_path / "codes"
    items.write_text("[]")
    codes.write_text("")
    checkpoint, data = tmp_path / "checkpoint.pt", tmp_path / "data-bin"
    checkpoint.write_bytes(b"")
    data.mkdir()
    arguments = {"--path": checkpoint, "--sentence-model": checkpoint, "--data": data, "--sentence-data": data,
                 "--bpe-codes": codes, "--format voita JSON": items}
    arguments[option] = tmp_path / "missing"
    command = [str(part) for option, path in arguments.items() for part in (*option.split()[:2], path)]
    with pytest.raises(SystemExit) as refused:
        contrastive_eval.parse_args(command)
    assert refused.value.code == 2
    assert capsys.readouterr().err.endswith(f"error: {option} {tmp_path / 'missing'}: {message}\n")


SPM_ITEMS = [  # Voita-style items in raw text, words the spm_model fixture splits into pieces
    {"src": "The lower house passed the budget. _eos She passed it slowly!",
     "dst": ["Das Unterhaus verabschiedete den Haushalt. _eos Sie ging langsam vorbei!",
             "Das Unterhaus verabschiedete den Haushalt. _eos Er ging langsam vorbei!"], "true_ind": 0, "ctx_dist": 1},
    {"src": "New prices, lower. _eos They were newer.",
     "dst": ["Neue Preise, niedriger. _eos Es waren neuere.", "Neue Preise, niedriger. _eos Sie waren neuer."],
     "true_ind": 1, "ctx_dist": 1},
]


def scored_as_the_models_see_them(monkeypatch, tmp_path, arguments):
    """The items contrastive_eval.py's ``main`` hands to the scorer (``arguments``: its options
    but --path), the checkpoint, the model and its scores stand-ins."""
    def load(path, data, use_cuda, model_overrides=None):
        return None, SimpleNamespace(cfg=SimpleNamespace(source_lang="en", target_lang="de")), "transformer"

    def score_items(model, task, items, **kwargs):
        scored.extend(items)
        return [[-float(index) for index in range(len(item.candidates))] for item in items]

    scored = []
    monkeypatch.setattr(contrastive_eval, "load", load)
    monkeypatch.setattr(contrastive_eval.contrastive, "score_items", score_items)
    (tmp_path / "checkpoint.pt").write_bytes(b"")
    contrastive_eval.main(["--path", str(tmp_path / "checkpoint.pt"), "--cpu", *map(str, arguments)])
    return scored


def test_spm_model_segments_every_sentence_as_prepare_documents_does(tmp_path, spm_model, monkeypatch, capsys):
    """With --spm-model, sources, candidates and both contexts reach the models as the sentencepiece
    pieces prepare_documents.py --spm-model writes for the same raw sentences, which fairseq's
    --post-process sentencepiece undoes."""
    items = tmp_path / "items.json"
    items.write_text(json.dumps(SPM_ITEMS))
    raw = read_voita_json(items)
    scored = scored_as_the_models_see_them(monkeypatch, tmp_path, ["--format", "voita", items, "--spm-model", spm_model])
    sentences = sorted({s for item in raw for s in (*item.context_source, item.source, *item.context_target,
                                                    *item.candidates)})
    corpus = write(tmp_path / "corpus.txt", sentences)
    prepare_documents.main(["--format", "blank-lines", "--source", str(corpus), "--target", str(corpus),
                            "--source-lang", "en", "--target-lang", "de", "--output-prefix", str(tmp_path / "spm"),
                            "--spm-model", str(spm_model)])
    pieces = dict(zip(sentences, (tmp_path / "spm.en").read_text(encoding="utf-8").splitlines()))
    assert [item.mapped(pieces.__getitem__, pieces.__getitem__) for item in raw] == scored
    assert all("\u2581" in piece and piece.count(" ") > sentence.count(" ") and
               post_process(piece, "sentencepiece") == sentence for sentence, piece in pieces.items())
    assert capsys.readouterr().out.startswith("2 items (voita:")


@pytest.mark.parametrize("options", [["--moses"], ["--bpe-codes", "codes"], ["--moses", "--bpe-codes", "codes"]],
                         ids=["moses", "bpe-codes", "both"])
def test_spm_model_refuses_moses_and_bpe(tmp_path, spm_model, options, capsys):
    """The pretrained model's pieces are made from raw text, as prepare_documents.py refuses too."""
    items = tmp_path / "items.json"
    items.write_text(json.dumps(SPM_ITEMS))
    (tmp_path / "codes").write_text("")
    with pytest.raises(SystemExit) as refused:
        contrastive_eval.parse_args(["--path", str(items), "--format", "voita", str(items),
                                     "--spm-model", str(spm_model), *(str(tmp_path / o) if o == "codes" else o
                                                                      for o in options)])
    assert refused.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: --spm-model segments raw text with the pretrained model's own pieces: "
        "leave out --moses and --bpe-codes\n")


@pytest.mark.parametrize("model, message", [
    ("sentence.bpe.model", "no such file; pass the sentencepiece model of the pretrained checkpoint"),
    ("dict.txt", "cannot load it"),
])
def test_a_bad_spm_model_is_named_before_the_items_are_read(tmp_path, monkeypatch, model, message):
    """The error prepare_documents.py gives, before any item is read or model loaded."""
    def read_items(args):
        raise AssertionError("the items were read before the sentencepiece model was loaded")

    monkeypatch.setattr(contrastive_eval, "read_items", read_items)
    write(tmp_path / "dict.txt", ["the 10"])
    with pytest.raises(SystemExit, match=re.escape(f"error: --spm-model {tmp_path / model}: {message}")):
        contrastive_eval.main(["--path", str(tmp_path / "dict.txt"), "--format", "voita", str(tmp_path / "dict.txt"),
                               "--spm-model", str(tmp_path / model)])


def spm_items(path, segment=None):
    """SPM_ITEMS written to ``path``, each sentence segmented by ``segment`` (joined with " _eos ")
    if given; the path."""
    def segmented(joined):
        return " _eos ".join(segment(joined.split(" _eos ")))

    path.write_text(json.dumps([{**item, "src": segmented(item["src"]), "dst": [segmented(d) for d in item["dst"]]}
                                if segment else item for item in SPM_ITEMS]))
    return path


def test_a_sentencepiece_checkpoints_dictionary_is_told_from_a_word_one(spm_checkpoint, data_bin):
    """What the refusals below read: a dictionary with ▁ on one symbol in twenty or more."""
    _, spm_data, _ = spm_checkpoint
    assert dictionary_segmentation(Dictionary.load(str(spm_data / "dict.en.txt"))) == "sentencepiece"
    assert dictionary_segmentation(Dictionary.load(str(data_bin / "dict.en.txt"))) is None


@pytest.mark.parametrize("options", [[], ["--moses"]], ids=["raw", "moses"])
def test_a_sentencepiece_checkpoint_is_refused_on_raw_text_without_spm_model(spm_checkpoint, tmp_path, options):
    """Before, it scored the raw words as <unk>."""
    checkpoint, data, _ = spm_checkpoint
    items = spm_items(tmp_path / "items.json")
    with pytest.raises(SystemExit) as refused:
        contrastive_eval.main(["--path", str(checkpoint), "--data", str(data), "--cpu", "--format", "voita", str(items),
                               *options])
    assert refused.value.code == (
        f"error: {checkpoint}: its dictionary holds sentencepiece pieces but the items are not in them ({items}: "
        "entry 0), so it would read their words as <unk>: give --spm-model, the sentencepiece model its data was "
        "segmented with")


def test_items_in_the_checkpoints_pieces_are_scored_as_raw_items_with_its_spm_model(spm_checkpoint, tmp_path,
                                                                                 monkeypatch):
    """A test set segmented beforehand needs no --spm-model: the model reads what --spm-model gives it."""
    def score_items(model, task, items, **kwargs):
        scored.append(items)
        return score(model, task, items, **kwargs)

    checkpoint, data, model = spm_checkpoint
    scored, score = [], contrastive_eval.contrastive.score_items
    monkeypatch.setattr(contrastive_eval.contrastive, "score_items", score_items)
    pieces = spm_items(tmp_path / "pieces.json", lambda sentences: prepare_documents.apply_sentencepiece(
        sentences, prepare_documents.load_sentencepiece(model)))
    for items, options in ((spm_items(tmp_path / "items.json"), ["--spm-model", str(model)]), (pieces, [])):
        contrastive_eval.main(["--path", str(checkpoint), "--data", str(data), "--cpu", "--format", "voita",
                               str(items), *options])
    with_spm_model, segmented_before = scored
    assert [replace(item, where="") for item in with_spm_model] == [replace(item, where="") for item in segmented_before]
    assert "\u2581" in with_spm_model[0].source


def test_items_in_pieces_are_refused_with_a_segmentation(spm_checkpoint, tmp_path):
    """--spm-model (or --moses, --bpe-codes) would segment them again."""
    checkpoint, data, model = spm_checkpoint
    pieces = spm_items(tmp_path / "pieces.json", lambda sentences: prepare_documents.apply_sentencepiece(
        sentences, prepare_documents.load_sentencepiece(model)))
    with pytest.raises(SystemExit) as refused:
        contrastive_eval.main(["--path", str(checkpoint), "--data", str(data), "--cpu", "--format", "voita",
                               str(pieces), "--spm-model", str(model)])
    assert refused.value.code == (
        f"error: {pieces}: entry 0: the item is in sentencepiece pieces already, which --moses, --bpe-codes and "
        "--spm-model would segment again: leave them out, or give the raw text")


@pytest.mark.parametrize("sentence_model", ["transformer", "transformer_recurrent_memory_small (--sentence-model)"])
def test_the_table_keeps_the_two_models_apart(sentence_model):
    """With --sentence-model, the header ran the two architectures' names together (names longer
    than the fixed column width had no space left between them) and the cells stood apart from
    their names."""
    results = {"transformer_recurrent_memory_small": {"1": (40, 40), "all": (40, 40)},
               sentence_model: {"1": (20, 40), "all": (20, 40)}}
    header, rule, *rows = contrastive_eval.table(results).splitlines()
    assert re.split(r" {2,}", header) == ["distance", *results]
    assert rule == "-" * len(header)
    ends = []  # cells are right-aligned under their names
    for name in results:
        ends.append(header.index(name, ends[-1] if ends else 0) + len(name))
    for row, cells in zip(rows, (["100.0% (40/40)", "50.0% (20/40)"],) * 2):
        assert len(row) == len(header)
        assert [row[:end].split()[-2:] for end in ends] == [cell.split() for cell in cells]


# Scorer


def document_items(raw, split="test"):
    """Items of a split's own documents: each sentence after the first, in context, against the
    target of another sentence; the same documents the task's batches hold."""
    sources = (raw / f"{split}.flat.en").read_text().splitlines()
    targets = (raw / f"{split}.flat.de").read_text().splitlines()
    docids = (raw / f"{split}.docids").read_text().splitlines()
    items = []
    for line in range(len(sources)):
        start = docids.index(docids[line])
        if line > start:
            items.append((line, ContrastiveItem(
                sources[start:line], targets[start:line], sources[line],
                [targets[line], targets[(line + 1) % len(targets)]], correct=0, where=f"line {line}")))
    return items


def reference_scores(task, steps, logits):
    """Summed log-probabilities of each sentence's reference, from walking whole documents."""
    dataset = task.dataset("test")
    scores = {}
    for sentence, sentence_logits in logits.items():
        target = dataset[sentence]["target"]
        log_probs = torch.log_softmax(sentence_logits[: target.numel()].float(), dim=-1)
        scores[sentence] = log_probs.gather(-1, target.unsqueeze(-1)).sum().item()
    return scores


def test_scorer_carries_the_memory_as_training_does(data_bin):
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    make_reads_nonzero(model)
    model.eval()
    steps = batches(task, "test")
    walked = reference_scores(task, steps, walk(model, steps))
    lines, items = zip(*document_items(data_bin.parent / "raw"))
    assert len({len(i.context_source) for i in items}) > 2, "items of several context lengths"
    scores = score_items(model, task, items, max_tokens=60)  # many batches
    for line, item_scores in zip(lines, scores):
        assert item_scores[0] == pytest.approx(walked[line], abs=1e-4)
    alone = [score_items(model, task, [item])[0] for item in items[:4]]
    torch.testing.assert_close(torch.tensor(alone), torch.tensor(scores[:4]), rtol=0, atol=1e-4)

    other = next(i for i in items if len(i.context_source) == len(items[0].context_source)
                 and i.context_source != items[0].context_source)
    swapped = ContrastiveItem(other.context_source, other.context_target,
                              items[0].source, items[0].candidates, 0, "swapped")
    assert abs(score_items(model, task, [swapped])[0][0] - scores[0][0]) > 1e-3, "another item's context changes nothing"


def test_scores_are_fairseq_sequence_scores_without_memory_reads(data_bin):
    _, plain, _, _ = build(data_bin, "--arch", "transformer", *TINY_DIMS, task="translation")
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    model.load_state_dict(plain.state_dict())  # the Output Attention adds nothing: the plain model
    _, items = zip(*document_items(data_bin.parent / "raw"))
    plain_scores = score_items(plain.eval(), task, items)
    torch.testing.assert_close(torch.tensor(score_items(model, task, items)), torch.tensor(plain_scores), rtol=0, atol=1e-4)

    scorer = SequenceScorer(task.target_dictionary)
    item = items[0]
    encode = lambda d, s: d.encode_line(s, add_if_not_exist=False).long()  # noqa: E731
    for candidate, score in zip(item.candidates, plain_scores[0]):
        sample = {"net_input": {"src_tokens": encode(task.source_dictionary, item.source)[None],
                                "src_lengths": torch.tensor([len(item.source.split()) + 1]),
                                "prev_output_tokens": torch.cat([torch.tensor([task.target_dictionary.eos()]),
                                                                 encode(task.target_dictionary, candidate)[:-1]])[None]},
                  "target": encode(task.target_dictionary, candidate)[None]}
        assert scorer.generate([plain], sample)[0][0]["positional_scores"].sum().item() == pytest.approx(score, abs=1e-4)


# The command line on trained models

TRAINING = [
    "--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
    "--encoder-ffn-embed-dim", "128", "--decoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4",
    "--decoder-attention-heads", "4", "--share-all-embeddings", "--dropout", "0.0",
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "1.0", "--lr", "3e-3",
    "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "50", "--warmup-init-lr", "1e-7",
    "--label-smoothing", "0.1", "--max-tokens", "512", "--max-update", "160", "--disable-validation",
    "--save-interval", "1000", "--no-epoch-checkpoints", "--cpu", "--seed", "1", "--user-dir", str(PLUGIN),
]
MODELS = {
    "memory": ["--task", "document_translation", "--arch", "transformer_recurrent_memory_small",
               "--criterion", "document_label_smoothed_cross_entropy", "--optimization-window", "2-4",
               "--memory-size", "4"],
    "sentence": ["--task", "translation", "--arch", "transformer", "--criterion", "label_smoothed_cross_entropy",
                 "--required-batch-size-multiple", "1"],
}


def pronoun_documents(count, seed):
    """Documents cut after their pronoun sentence: a topic sentence, perhaps a sense sentence, a
    noun, then "it" one sentence later (4-sentence documents hold exactly one such pronoun)."""
    documents = []
    for document in synthetic_documents.generate_documents(count, seed=seed, min_sentences=4, max_sentences=4):
        (word,) = [w for w in document.context_words if w.phenomenon == "pronoun"]
        end = word.sentence + 1
        documents.append(synthetic_documents.SyntheticDocument(document.source[:end], document.target[:end], [word]))
    return documents


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A memory model and a sentence model trained for the same 160 updates on 600 documents (at
    120, trained with one thread, the memory model missed 1 of the 40 pronouns: too thin a margin)."""
    root = tmp_path_factory.mktemp("contrastive")
    synthetic_documents.write_documents(pronoun_documents(600, seed=1), str(root / "raw" / "train"))
    preprocess("--source-lang", "en", "--target-lang", "de", "--trainpref", str(root / "raw" / "train.flat"),
               "--destdir", str(root / "bin"), "--joined-dictionary", "--workers", "1")
    shutil.copy(root / "raw" / "train.docids", root / "bin" / "train.en-de.docids")
    for name, arguments in MODELS.items():
        run([fairseq_command("fairseq-train"), str(root / "bin"), *arguments, *TRAINING,
             "--save-dir", str(root / name)])
    return root


def test_only_the_memory_model_tells_the_pronoun(trained, monkeypatch, capsys):
    items = trained / "pronouns.json"
    items.write_text(json.dumps(synthetic_documents.contrastive_items(pronoun_documents(40, seed=2))))
    result = script_in_process(monkeypatch, capsys, REPO / "scripts" / "contrastive_eval.py", "--json", "--cpu",
                               "--path", str(trained / "memory" / "checkpoint_last.pt"), "--data", str(trained / "bin"),
                               "--sentence-model", str(trained / "sentence" / "checkpoint_last.pt"),
                               "--format", "voita", str(items))
    assert result.returncode == 0, result.stderr[-2000:]
    accuracy = json.loads(result.stdout)  # rows labelled by the checkpoints' architectures
    memory, sentence = accuracy["transformer_recurrent_memory_small"], accuracy["transformer"]
    assert memory["all"]["total"] == sentence["all"]["total"] == 40
    assert memory["all"]["accuracy"] == 1.0
    assert sentence["all"]["accuracy"] <= 0.5
    assert memory["1"] == memory["all"]
