"""Tests of memory_nmt_tools/synthetic_documents.py and its command line."""
import subprocess
import sys
from collections import Counter, defaultdict

import pytest

from conftest import REPO
from memory_nmt_tools import synthetic_documents

SCRIPT = REPO / "scripts" / "synthetic_documents.py"


@pytest.fixture(scope="module")
def corpus():
    return synthetic_documents.generate_documents(600, seed=7)


def items(documents, phenomenon=None):
    return [(doc, item) for doc in documents for item in doc.context_words
            if phenomenon in (None, item.phenomenon)]


def test_deterministic_for_a_seed_and_different_for_another():
    a, b = synthetic_documents.generate_documents(50, seed=1), synthetic_documents.generate_documents(50, seed=1)
    c = synthetic_documents.generate_documents(50, seed=2)
    assert a == b
    assert [d.source for d in a] != [d.source for d in c]
    assert synthetic_documents.generate_long_document(30, 5) == synthetic_documents.generate_long_document(30, 5)


def test_sentence_counts_tokens_and_vocabulary(corpus):
    lengths = Counter(len(doc.source) for doc in corpus)
    assert set(lengths) == set(range(4, 9))  # every length of the default range, none outside
    short = synthetic_documents.generate_documents(100, seed=3, min_sentences=2, max_sentences=3)
    assert {len(d.source) for d in short} == {2, 3}
    for doc in corpus:
        assert len(doc.source) == len(doc.target)
        for sentence in doc.source + doc.target:
            tokens = sentence.split(" ")
            assert 4 <= len(tokens) <= 12 and tokens[-1] == "." and all(tokens), sentence
            assert sentence == sentence.lower()
    for side in ("source", "target"):
        vocabulary = {w for doc in corpus for s in getattr(doc, side) for w in s.split()}
        assert 60 <= len(vocabulary) <= 150, (side, len(vocabulary))
    with pytest.raises(ValueError):
        synthetic_documents.generate_documents(3, seed=0, min_sentences=5, max_sentences=4)


def test_phenomena_present_and_about_half_the_sentences(corpus):
    for doc in corpus:
        phenomena = {item.phenomenon for item in doc.context_words}
        assert phenomena == {"pronoun", "sense"}
        assert [i.sentence for i in doc.context_words] == sorted({i.sentence for i in doc.context_words})
    sentences = sum(len(doc.source) for doc in corpus)
    assert 0.4 <= len(items(corpus)) / sentences <= 0.6


def test_balance_makes_chance_known(corpus):
    pronouns = Counter(item.correct for _, item in items(corpus, "pronoun"))
    assert set(pronouns) == {"er", "sie", "es"}
    for form, count in pronouns.items():
        assert abs(count / sum(pronouns.values()) - 1 / 3) <= 0.05, pronouns
    nature = {senses["nature"] for _, senses in synthetic_documents.SENSE_WORDS.values()}
    senses = [item.correct in nature for _, item in items(corpus, "sense")]
    assert abs(sum(senses) / len(senses) - 1 / 2) <= 0.05
    for _, item in items(corpus):
        expected = 3 if item.phenomenon == "pronoun" else 2
        assert len({item.correct, *item.alternatives}) == expected


def test_cue_is_really_there(corpus):
    topic_of = {s: t for t, pairs in synthetic_documents.TOPIC_SENTENCES.items() for s, _ in pairs}
    for doc in corpus:
        topic = topic_of[doc.source[0]]  # every document opens with a topic sentence
        for item in doc.context_words:
            cue = item.sentence - item.distance
            tokens = doc.source[item.sentence].split()
            if item.phenomenon == "pronoun":
                assert 1 <= item.distance <= 3 and "it" in tokens
                nouns = [w for w in doc.source[cue].split() if w in synthetic_documents.NOUNS]
                assert len(nouns) == 1, doc.source[cue]
                translation, gender = synthetic_documents.NOUNS[nouns[0]]
                assert translation in doc.target[cue].split()
                assert item.correct == synthetic_documents.PRONOUNS[gender]
                for between in doc.source[cue + 1:item.sentence]:  # nothing else "it" could mean
                    words = set(between.split())
                    assert not words & (set(synthetic_documents.NOUNS) | set(synthetic_documents.SENSE_WORDS) | {"it"})
            else:
                assert cue == 0 and item.distance == item.sentence >= 1
                word = [w for w in tokens if w in synthetic_documents.SENSE_WORDS]
                assert len(word) == 1
                assert item.correct == synthetic_documents.SENSE_WORDS[word[0]][1][topic]
            assert item.correct in doc.target[item.sentence].split()


def test_source_sentence_alone_does_not_determine_the_context_word():
    documents = synthetic_documents.generate_documents(2000, seed=11)
    targets = defaultdict(Counter)  # source sentence -> its reference targets over the corpus
    for doc in documents:
        for s, t in zip(doc.source, doc.target):
            targets[s][t] += 1
    checked = Counter()
    for doc, item in items(documents):
        source, tokens = doc.source[item.sentence], doc.target[item.sentence].split()
        assert tokens.count(item.correct) == 1
        if sum(targets[source].values()) < 25:
            continue  # too rare to have met every alternative
        for alternative in item.alternatives:
            # the same source with the cue changed: only the context word differs in the target
            swapped = " ".join(alternative if w == item.correct else w for w in tokens)
            assert swapped in targets[source], (source, swapped)
        checked[item.phenomenon] += 1
    assert checked["pronoun"] > 300 and checked["sense"] > 300
    context_targets = {w for _, item in items(documents) for w in [item.correct, *item.alternatives]}
    for source, ts in targets.items():  # any source with several targets: they differ in one slot
        if len(ts) > 1:
            words = [t.split() for t in ts]
            assert len({len(w) for w in words}) == 1, source
            slots = [i for i, column in enumerate(zip(*words)) if len(set(column)) > 1]
            assert len(slots) == 1 and {w[slots[0]] for w in words} <= context_targets, source


def test_context_accuracy_on_references_and_swapped_references(corpus):
    references = [list(doc.target) for doc in corpus]
    result = synthetic_documents.context_accuracy(corpus, references)
    n_pronoun, n_sense = len(items(corpus, "pronoun")), len(items(corpus, "sense"))
    near = {kind: sum(1 for _, item in items(corpus, kind) if item.distance == 1) for kind in ("pronoun", "sense")}
    assert 0 < near["pronoun"] < n_pronoun and 0 < near["sense"] < n_sense
    assert result == {"pronoun": (n_pronoun, n_pronoun), "sense": (n_sense, n_sense),
                      "all": (n_pronoun + n_sense, n_pronoun + n_sense),
                      "pronoun d=1": (near["pronoun"],) * 2, "pronoun d>1": (n_pronoun - near["pronoun"],) * 2,
                      "sense d=1": (near["sense"],) * 2, "sense d>1": (n_sense - near["sense"],) * 2}
    swapped, hedged = [list(r) for r in references], [list(r) for r in references]
    for doc, swap, hedge in zip(corpus, swapped, hedged):
        for item in doc.context_words:
            swap[item.sentence] = " ".join(item.alternatives[-1] if w == item.correct else w
                                           for w in swap[item.sentence].split())
            hedge[item.sentence] += " " + item.alternatives[0]
    wrong = synthetic_documents.context_accuracy(corpus, swapped)
    assert wrong["pronoun"] == (0, n_pronoun) and wrong["sense"] == (0, n_sense)
    assert all(wrong[key][0] == 0 for key in synthetic_documents.DISTANCE_CLASSES)
    assert synthetic_documents.context_accuracy(corpus, hedged)["all"] == (0, n_pronoun + n_sense)
    with pytest.raises(ValueError):
        synthetic_documents.context_accuracy(corpus, references[:-1])


def test_write_documents_blank_line_format(tmp_path):
    documents = synthetic_documents.generate_documents(20, seed=4)
    prefix = str(tmp_path / "sub" / "train")
    synthetic_documents.write_documents(documents, prefix, "en", "de")
    for lang, side in (("en", "source"), ("de", "target")):
        text = open(f"{prefix}.{lang}", encoding="utf-8").read()
        assert text.endswith(".\n") and not text.startswith("\n") and "\n\n\n" not in text
        assert [block.split("\n") for block in text.rstrip("\n").split("\n\n")] == [
            getattr(d, side) for d in documents]
        flat = open(f"{prefix}.flat.{lang}", encoding="utf-8").read().split("\n")
        assert flat[-1] == "" and "" not in flat[:-1]
        assert flat[:-1] == [s for d in documents for s in getattr(d, side)]
    docids = open(f"{prefix}.docids", encoding="utf-8").read().split("\n")[:-1]
    assert len(docids) == sum(len(d.source) for d in documents)
    assert docids == [f"doc{i}" for i, d in enumerate(documents) for _ in d.source]


def test_cli_writes_the_files(tmp_path):
    prefix = str(tmp_path / "cli")
    subprocess.run([sys.executable, SCRIPT, "--documents", "5", "--seed", "9", "--output-prefix", prefix,
                    "--min-sentences", "3", "--max-sentences", "5"], check=True, cwd=str(tmp_path))
    documents = synthetic_documents.generate_documents(5, 9, 3, 5)
    assert open(f"{prefix}.de", encoding="utf-8").read() == "\n\n".join(
        "\n".join(d.target) for d in documents) + "\n"
    assert len(open(f"{prefix}.flat.en").read().splitlines()) == sum(len(d.source) for d in documents)


@pytest.mark.parametrize("length", [1, 2, 3, 10, 100, 1000])
def test_long_document_has_exact_length(length):
    doc = synthetic_documents.generate_long_document(length, seed=length)
    assert len(doc.source) == len(doc.target) == length
    phenomena = {item.phenomenon for item in doc.context_words}
    if length >= 4:
        assert phenomena == {"pronoun", "sense"}
    if length >= 100:
        assert 0.4 <= len(doc.context_words) / length <= 0.6
        assert max(i.distance for i in doc.context_words if i.phenomenon == "sense") > length // 2


LONG_RANGE_SHAPE = synthetic_documents.DocumentShape(
    max_pronoun_distance=1, sense_rate=0.2, sense_words=40, adjectives=60
)


@pytest.mark.parametrize("rate", [0.1, 0.2, 0.4])
def test_a_shape_sets_how_often_a_sentence_holds_an_ambiguous_word(rate):
    shape = synthetic_documents.DocumentShape(max_pronoun_distance=1, sense_rate=rate)
    documents = synthetic_documents.generate_documents(300, seed=5, min_sentences=20, max_sentences=40, shape=shape)
    later_sentences = sum(len(doc.source) - 1 for doc in documents)
    assert abs(len(items(documents, "sense")) / later_sentences - rate) <= 0.05
    assert {item.distance for _, item in items(documents, "pronoun")} == {1}


def test_a_shape_adds_made_up_words_whose_sense_only_the_first_sentence_fixes():
    documents = synthetic_documents.generate_documents(
        400, seed=6, min_sentences=4, max_sentences=40, shape=LONG_RANGE_SHAPE
    )
    lexicon = synthetic_documents.lexicon_of(40, 60)
    senses = dict(lexicon.sense_words)
    assert len(senses) == 40 and set(synthetic_documents.SENSE_WORDS) < set(senses)
    assert len(lexicon.adjectives) == 60 and set(synthetic_documents.ADJECTIVES.items()) < set(lexicon.adjectives)
    target_words = [word for _, (_, both) in lexicon.sense_words for word in both.values()]
    target_words += [german for _, german in lexicon.adjectives]
    assert len(set(target_words)) == len(target_words)  # no two words, sense or adjective, alike
    assert not {english for english, _ in lexicon.adjectives} & set(senses)
    topic_of = {s: t for t, pairs in synthetic_documents.TOPIC_SENTENCES.items() for s, _ in pairs}
    used = set()
    for doc in documents:
        for _, item in items([doc], "sense"):
            word = [w for w in doc.source[item.sentence].split() if w in senses]
            assert len(word) == 1 and item.distance == item.sentence
            assert item.correct == senses[word[0]][1][topic_of[doc.source[0]]]
            assert item.alternatives == [sense for sense in senses[word[0]][1].values() if sense != item.correct]
            assert item.correct in doc.target[item.sentence].split()
            used.add(word[0])
    assert used == set(senses)
    again = synthetic_documents.generate_documents(
        50, seed=99, min_sentences=4, max_sentences=40, shape=LONG_RANGE_SHAPE
    )
    assert {w for d in again for s in d.source for w in s.split()} <= {
        w for d in documents for s in d.source for w in s.split()}  # one lexicon for every seed


@pytest.mark.parametrize("fields", [dict(max_pronoun_distance=0), dict(sense_rate=0.0), dict(sense_rate=1.0),
                                    dict(sense_words=0), dict(adjectives=1)])
def test_a_shape_out_of_range_is_refused(fields):
    with pytest.raises(ValueError):
        synthetic_documents.DocumentShape(**fields)


def test_cli_takes_the_shape(tmp_path):
    prefix = str(tmp_path / "shaped")
    subprocess.run([sys.executable, SCRIPT, "--documents", "5", "--seed", "9", "--output-prefix", prefix,
                    "--max-pronoun-distance", "1", "--sense-rate", "0.2", "--sense-words", "40",
                    "--adjectives", "60"], check=True, cwd=str(tmp_path))
    documents = synthetic_documents.generate_documents(5, 9, shape=LONG_RANGE_SHAPE)
    assert open(f"{prefix}.en", encoding="utf-8").read() == "\n\n".join("\n".join(d.source) for d in documents) + "\n"
    refused = subprocess.run([sys.executable, SCRIPT, "--documents", "5", "--seed", "9", "--output-prefix", prefix,
                              "--sense-rate", "1.5"], capture_output=True, text=True, cwd=str(tmp_path))
    assert refused.returncode == 2 and "sense_rate 1.5" in refused.stderr
