"""Tests of memory_nmt_tools/long_documents.py: documents whose later words need what their start established
(named apart from tests/pipeline/test_long_documents.py, which measures the cost of long documents)."""
from collections import Counter, defaultdict

import pytest

from memory_nmt_tools import long_documents
from memory_nmt_tools.long_documents import TITLES, LongDocumentShape, first_choices, generate_long_documents
from memory_nmt_tools.synthetic_documents import TOPIC_SENTENCES

pytestmark = pytest.mark.fast
TOPIC_OF = {source: topic for topic, pairs in TOPIC_SENTENCES.items() for source, _ in pairs}


@pytest.fixture(scope="module")
def corpus():
    return generate_long_documents(150, seed=5, min_sentences=10, max_sentences=150)


def words(documents, phenomenon):
    return [(document, word) for document in documents for word in document.context_words
            if word.phenomenon == phenomenon]


def test_lengths_phenomena_and_distances_far_enough(corpus):
    assert generate_long_documents(150, seed=5) == corpus and generate_long_documents(150, seed=6) != corpus
    assert {len(d.source) for d in corpus} <= set(range(10, 151)) and max(len(d.source) for d in corpus) > 140
    counts = Counter(word.phenomenon for d in corpus for word in d.context_words)
    assert set(counts) == set(long_documents.PHENOMENA) and min(counts.values()) > 400
    for phenomenon in ("topic", "title", "choice"):
        distances = [word.distance for _, word in words(corpus, phenomenon)]
        assert sum(d >= 100 for d in distances) > 30, phenomenon
    assert max(word.distance for _, word in words(corpus, "pronoun")) == 9
    assert all(1 <= word.gap <= word.distance for d in corpus for word in d.context_words)


def test_each_word_follows_what_its_document_established_and_its_cue_shows_it(corpus):
    for document in corpus:
        for word in document.context_words:
            tokens = document.target[word.sentence].split()
            assert tokens.count(word.correct) == 1 and not set(tokens) & set(word.alternatives)
            established = document.target[word.sentence - word.distance].split()
            shown = document.target[word.sentence - word.gap].split()
            if word.phenomenon == "topic":
                topic = TOPIC_OF[document.source[word.sentence - word.distance]]  # the topic sentence in force
                between = document.source[word.sentence - word.distance + 1:word.sentence]
                assert not any(sentence in TOPIC_OF for sentence in between)
                assert word.correct in {senses[topic] for _, (_, senses) in LongDocumentShape().words().sense_words}
            elif word.phenomenon == "title":
                names = set(LongDocumentShape().lexicon().names)
                name = next(token for token in document.source[word.sentence].split() if token in names)
                assert name in established and name in shown
                title = "mr" if "herrn" in established else "mrs"
                assert word.correct in TITLES[title].values() and set(shown) & set(TITLES[title].values())
            elif word.phenomenon == "choice":
                assert word.correct in established and word.correct in shown
            else:
                assert word.distance == word.gap


def test_a_sentence_alone_does_not_determine_the_word():
    """Every context word's sentence (its name written NAME) has each alternative's target in the corpus
    (the pronoun sentences are synthetic_documents', whose tests check them)."""
    documents = generate_long_documents(400, seed=9, min_sentences=20, max_sentences=60)
    names = set(LongDocumentShape().lexicon().names)

    def unnamed(sentence):
        return " ".join("NAME" if token in names else token for token in sentence.split())

    targets = defaultdict(Counter)  # source sentence -> its reference targets over the corpus
    for document in documents:
        for source, target in zip(document.source, document.target):
            targets[unnamed(source)][unnamed(target)] += 1
    checked = Counter()
    for document, word in ((d, w) for d in documents for w in d.context_words):
        source, tokens = unnamed(document.source[word.sentence]), unnamed(document.target[word.sentence]).split()
        if sum(targets[source].values()) < 20:
            continue
        for alternative in word.alternatives:
            swapped = " ".join(alternative if token == word.correct else token for token in tokens)
            assert swapped in targets[source], (source, swapped)
        checked[word.phenomenon] += 1
    assert min(checked[phenomenon] for phenomenon in ("topic", "title", "choice")) > 50, checked


def test_several_people_at_once_named_unevenly(corpus):
    for document in corpus[:30]:
        named = Counter(word.sentence - word.distance for _, word in words([document], "title"))
        people = sum(1 for sentence in document.source[1:6] if sentence.split()[2] in ("mr", "mrs"))
        assert 2 <= people <= 4 and all(1 <= sentence <= people for sentence in named)
    gaps = [word.gap for _, word in words(corpus, "title")]
    assert max(gaps) >= 60


def test_the_models_first_choice_is_read_from_its_translation(corpus):
    document = next(d for d in corpus if sum(w.phenomenon == "choice" for w in d.context_words) >= 2)
    word = next(w for w in document.context_words if w.phenomenon == "choice")
    hypothesis = list(document.target)
    first = word.sentence - word.distance
    pair = tuple(sorted([word.correct, *word.alternatives]))
    assert first_choices([document], [hypothesis])[0][pair] == word.correct
    hypothesis[first] = hypothesis[first].replace(word.correct, word.alternatives[0])
    assert first_choices([document], [hypothesis])[0][pair] == word.alternatives[0]
    hypothesis[first] = "nichts ."
    assert first_choices([document], [hypothesis])[0][pair] is None


@pytest.mark.parametrize("fields", [{"mention_rate": 0.9, "sense_rate": 0.2}, {"max_people": 1},
                                    {"choice_words": 0}, {"max_pronoun_distance": 0}])
def test_a_shape_out_of_range_is_refused(fields):
    with pytest.raises(ValueError):
        LongDocumentShape(**fields)
