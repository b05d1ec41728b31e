"""Tests of examples/learn_to_remember/document_phenomena.py: long documents scored by phenomenon and
distance, the model's own word choices read from its translation, and the memory probe."""
import json
import re
from collections import Counter
from dataclasses import replace

import pytest

from conftest import REPO, TINY_DIMS, load_script
from memory_nmt_tools.long_documents import LongDocumentShape, generate_long_documents
from memory_nmt_tools.synthetic_documents import SyntheticDocument

document_phenomena = load_script(REPO / "examples" / "learn_to_remember" / "document_phenomena.py")


@pytest.fixture(scope="module")
def documents():
    return generate_long_documents(40, seed=3, min_sentences=30, max_sentences=60)


def choice_pairs(documents):
    return Counter(tuple(sorted([w.correct, *w.alternatives])) for d in documents for w in d.context_words
                   if w.phenomenon == "choice")


@pytest.mark.fast
def test_own_choice_counts_the_later_uses_of_words_whose_first_translation_varies(documents):
    args = document_phenomena.parse_args(["--varied", "0.1"])
    references = [list(d.target) for d in documents]
    kept = document_phenomena.own_choice(args, documents, references)
    uses = sum(1 for d in documents for w in d.context_words if w.phenomenon == "choice")
    counted, used = kept["words"]
    assert used == len(choice_pairs(documents)) and 0 < counted <= used
    assert all(right == total for right, total in kept["kept"].values())  # the reference keeps its choice
    assert 0 < sum(total for _, total in kept["kept"].values()) <= uses

    always_first = []  # every use the first translation of its pair: consistent, but by never choosing
    for document in documents:
        first_of = {t: sorted([w.correct, *w.alternatives])[0] for w in document.context_words
                    if w.phenomenon == "choice" for t in [w.correct, *w.alternatives]}
        always_first.append([" ".join(first_of.get(token, token) for token in sentence.split())
                             for sentence in document.target])
    consistent_but_fixed = document_phenomena.own_choice(args, documents, always_first)
    assert consistent_but_fixed["words"][0] == 0 and consistent_but_fixed["kept"] == {}

    flipped = []  # the first use as the reference, every later use the other translation
    for document, reference in zip(documents, references):
        sentences = list(reference)
        for word in document.context_words:
            if word.phenomenon == "choice":
                sentences[word.sentence] = sentences[word.sentence].replace(word.correct, word.alternatives[0])
        flipped.append(sentences)
    inconsistent = document_phenomena.own_choice(args, documents, flipped)
    assert inconsistent["words"] == kept["words"] and all(right == 0 for right, _ in inconsistent["kept"].values())


@pytest.mark.fast
def test_each_probe_point_names_the_source_token_that_asks_and_the_answer(documents):
    shape = LongDocumentShape()
    points = document_phenomena.probe_points(documents, shape)
    words = [(n, w) for n, d in enumerate(documents) for w in d.context_words]
    assert len(points) == len(words)
    names, choices = set(shape.lexicon().names), dict(shape.lexicon().choices)
    for point, (number, word) in zip(points, words):
        source = documents[number].source[word.sentence].split()
        assert (point.document, point.sentence, point.target_word) == (number, word.sentence, word.correct)
        assert point.cue_sentence == word.sentence - word.distance
        assert point.source_token in source and point.group == (word.phenomenon,
                                                                document_phenomena.bucket(word.distance))
        if word.phenomenon == "title":
            assert point.source_token in names and point.answer == ("mrs" if word.correct == "frau" else "mr")
        elif word.phenomenon == "choice":
            assert choices[point.source_token][1][int(point.answer)] == word.correct
        elif word.phenomenon == "pronoun":
            assert (point.source_token, point.answer) == ("it", word.correct)
        else:
            assert point.answer in ("nature", "industry")
    assert [document_phenomena.bucket(d) for d in (1, 2, 9, 10, 29, 30, 99, 100, 500)] == [
        "1", "2-9", "2-9", "10-29", "10-29", "30-99", "30-99", "100+", "100+"]


def test_trains_scores_translates_and_probes_each_variant(tmp_path, capsys):
    argv = ["--workdir", str(tmp_path), "--variants", "", "--variant", "queue=--memory-update queue",
            "--documents", "6", "--test-documents", "3", "--min-sentences", "8", "--max-sentences", "12",
            "--epochs", "1", "--model-args", " ".join(TINY_DIMS), "--max-tokens", "300", "--beam", "1",
            "--generate-args", "--max-len-a 0 --max-len-b 12", "--probe"]
    results = document_phenomena.main(argv)
    printed = capsys.readouterr().out
    test = generate_long_documents(3, seed=1 + 2000, min_sentences=8, max_sentences=12)
    counts = Counter(w.phenomenon for d in test for w in d.context_words)
    assert list(results) == [("queue", 1)]
    for scores in results.values():
        for kind in ("distance", "gap"):
            assert {p: sum(t for _, t in b.values()) for p, b in scores[kind].items()} == dict(counts)
        first_named = sum(w.phenomenon == "title" and w.gap == w.distance for d in test for w in d.context_words)
        assert sum(t for _, t in scores["introduced"].get("title", {}).values()) == first_named > 0
        assert sum(t for _, t in scores["first's title"].get("title", {}).values()) == first_named - sum(
            w.phenomenon == "title" and w.gap == w.distance == w.sentence - 1 for d in test for w in d.context_words)
    state = json.loads((tmp_path / "queue" / "checkpoints" / "checkpoint1.probe.json").read_text())
    assert state["queue"] and sorted(state["reads"]) == sorted(state["pushes"]) == ["decoder.1", "encoder.1"]
    for needs in state["pushes"].values():  # every sentence but a document's last, once, by what is needed of it
        assert sum(count for _, count in needs.values()) == sum(len(d.source) - 1 for d in test)
        assert needs["title"][1] == len({(n, w.sentence - w.distance) for n, d in enumerate(test)
                                         for w in d.context_words if w.phenomenon == "title"})
        assert all(0 <= total <= count for total, count in needs.values())
    assert "queue encoder.1 title" in printed and "\nqueue, epoch 1 (" in printed and "own choice kept" in printed
    pushed = printed[printed.index("\npushed: "):]
    for layer in ("encoder.1", "decoder.1"):
        assert re.search(rf"^  queue {re.escape(layer)} +.*title \d\.\d\d \(\d+\).*nothing \d\.\d\d \(\d+\)$", pushed,
                         re.M), pushed
    words = Counter((w.phenomenon, document_phenomena.bucket(w.distance)) for d in test for w in d.context_words)
    for layer, groups in state["found"].items():  # every context word once, its read's share on its cue's slot
        assert {tuple(group.split()): count for group, (_, count) in groups.items()} == words, layer
        assert all(0 <= total <= count for total, count in groups.values())
    found = printed[printed.index("\nfound: "):]
    for layer in ("encoder.1", "decoder.1"):
        assert re.search(rf"^  queue {re.escape(layer)} title +.*\d\.\d\d \(\d+\)", found, re.M), found
    assert "title, first named, by person" in printed and "title, later persons" in printed
    from fairseq import checkpoint_utils

    saved = checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "queue" / "checkpoints" / "checkpoint1.pt"))
    assert saved["cfg"]["model"].memory_update == "queue"
    capsys.readouterr()
    assert document_phenomena.main(argv) == results  # a rerun trains and scores nothing again
    assert capsys.readouterr().out.count("exists, skipped") == 1
    for wrong in (["--variants", "local_global"], ["--variant", "memory=--memory-size 4"], ["--variant", "x"],
                  ["--score-epochs", "13"], ["--mention-rate", "0.9"], ["--min-sentences", "5"]):
        with pytest.raises(SystemExit):
            document_phenomena.parse_args(wrong)


@pytest.mark.fast
def test_a_title_named_for_the_first_time_is_counted_by_the_persons_place_among_the_introductions(documents):
    names = set(LongDocumentShape().lexicon().names)
    counted = Counter()
    for document in documents:
        introduced = [next(t for t in s.split() if t in names) for s in document.source[1:] if s.split()[1:2] in (
            ["met"], ["saw"]) and s.split()[2] in ("mr", "mrs")]  # the meeting sentences, in order
        for word in document.context_words:
            found = document_phenomena.groups(document, word)
            assert (found["distance"], found["gap"]) == (document_phenomena.bucket(word.distance),
                                                         document_phenomena.bucket(word.gap))
            if "introduced" not in found:
                assert word.phenomenon != "title" or word.gap < word.distance
                continue
            name = document_phenomena.asking_token(document, word, names)
            assert introduced[int(found["introduced"]) - 1] == name  # the place of the person it names
            titles = [s.split()[2] for s in document.source[1:len(introduced) + 1]]
            assert found.get("first's title") == (None if found["introduced"] == "1" else
                                                  "same" if titles[0] == document_phenomena.title_of(word) else "other")
            assert not any(name in document.source[s].split() for s in range(word.sentence - word.gap + 1,
                                                                                word.sentence))
            counted[found["introduced"]] += 1
    assert set(counted) == {"1", "2", "3", "4"} and counted["1"] > counted["4"]


@pytest.mark.fast
def test_short_documents_are_shuffled_among_the_long_training_documents():
    long_only = document_phenomena.training_documents(document_phenomena.parse_args(["--documents", "20"]))
    args = document_phenomena.parse_args(["--documents", "20", "--short-documents", "30",
                                          "--short-max-sentences", "12"])
    mixed = document_phenomena.training_documents(args)
    lengths = [len(document.source) for document in mixed]
    assert len(mixed) == 50 and sum(10 <= length <= 12 for length in lengths) >= 30
    assert {tuple(d.source) for d in long_only} <= {tuple(d.source) for d in mixed}  # the long ones unchanged
    assert lengths[:20] != [len(document.source) for document in long_only]  # and not all first
    assert document_phenomena.training_documents(args)[7].source == mixed[7].source  # one corpus a seed
    with pytest.raises(SystemExit):
        document_phenomena.parse_args(["--short-documents", "5", "--short-max-sentences", "5"])


@pytest.mark.fast
def test_reach_counts_the_context_words_whose_need_is_near_and_the_name_prior_follows_training(documents):
    reach = document_phenomena.within_reach(documents)
    words = [w for d in documents for w in d.context_words]
    for phenomenon in ("pronoun", "topic", "title", "choice"):
        mine = [w for w in words if w.phenomenon == phenomenon]
        assert reach["distance"][phenomenon] == [len(mine)] + [
            sum(w.distance <= r for w in mine) for r in document_phenomena.REACHES]
        assert reach["gap"][phenomenon][1] == sum(w.gap <= 1 for w in mine)
    assert reach["distance"]["pronoun"] == reach["gap"]["pronoun"]  # a pronoun's noun is shown only once

    names = set(LongDocumentShape().lexicon().names)
    right, total = document_phenomena.name_prior(documents, documents, names)
    assert total == sum(w.phenomenon == "title" for w in words) and total / 2 < right < total
    flipped = [SyntheticDocument(d.source, d.target, [
        replace(w, correct=w.alternatives[0], alternatives=[w.correct]) if w.phenomenon == "title" else w
        for w in d.context_words]) for d in documents]
    assert document_phenomena.name_prior(documents, flipped, names) == [total - right, total]
