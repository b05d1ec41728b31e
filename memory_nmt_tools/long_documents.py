"""Long synthetic documents that establish several things early and need each of them much later.

For ``examples/learn_to_remember/document_phenomena.py``: documents of tens to hundreds of
sentences in the vocabulary of ``synthetic_documents.py`` (its pronoun, sense and filler
sentences), in which four kinds of target word depend on an earlier sentence, each drawn so that a
sentence model is at chance:

- ``pronoun`` (chance 1/3): "it" refers to the noun 1 to ``max_pronoun_distance`` sentences back
  (fillers between), as in ``synthetic_documents.py``;
- ``topic`` (chance 1/2): the first sentence sets a topic (nature or industry) and a later topic
  sentence switches it; an ambiguous word ("the plant": pflanze or fabrik) takes the current one;
- ``title`` (chance 1/2): 2 to ``max_people`` people are introduced right after the first
  sentence as Mr or Mrs ("i met mrs kalo ." -> "ich traf frau kalo ."), each drawn on its own;
  later sentences name them alone ("kalo was tired ." -> "frau kalo war muede ."), so the
  memory must hold several bindings at once; the people are named unevenly often (the second
  half as often as the first, and so on), so some go unnamed for long;
- ``choice`` (chance 1/2): a word with two valid translations of one gender ("the vase": "lomake"
  or "dubike"): the reference draws one at the document's first use and keeps it at every later
  use (lexical consistency, as Voita et al.'s consistency sets). Each document uses a few such
  words.

Each context word (``synthetic_documents.ContextWord``) keeps two distances: ``distance``, the
sentences back to where the document established what it needs (the topic sentence in force, the
person's introduction, the word's first use, the pronoun's noun), and ``gap``, the sentences back
to the nearest earlier sentence whose reference shows it (that, or a later sense word of the same
topic, mention of the same person, use of the same word). A memory that keeps what was
established bridges ``gap`` sentences; one that chains through every mention does too.

Only the standard library and ``synthetic_documents`` are used.
"""
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

from .synthetic_documents import (
    GENDERS,
    NOUNS,
    PERSON_ADJECTIVES,
    PRONOUNS,
    TOPIC_SENTENCES,
    TOPICS,
    ContextWord,
    SyntheticDocument,
    definite_noun_sentence,
    filler,
    introduction,
    lexicon_of,
    listed_words,
    made_up_word,
    pronoun_sentence,
)

PHENOMENA = ("pronoun", "topic", "title", "choice")
CHANCE = {"pronoun": 1 / 3, "topic": 1 / 2, "title": 1 / 2, "choice": 1 / 2}
TITLES = {"mr": {"nom": "herr", "acc": "herrn"}, "mrs": {"nom": "frau", "acc": "frau"}}
MEETING_VERBS = {"met": {"i": "traf", "we": "trafen"}, "saw": {"i": "sah", "we": "sahen"}}


@dataclass(frozen=True)
class LongDocumentShape:
    """How often each kind of sentence comes after the introductions (the rest are fillers).

    ``switch_rate``: a topic sentence that switches the topic; ``mention_rate``: a person named
    alone; ``sense_rate``: an ambiguous word; ``choice_rate``: a word of two translations;
    ``pronoun_rate``: a pronoun block (its noun, fillers, "it"), which spans 2 to
    ``max_pronoun_distance`` + 1 sentences. ``choice_words``: how many such words a document
    draws its uses from, of the lexicon's ``choice_lexicon``."""

    max_people: int = 4
    max_pronoun_distance: int = 9
    switch_rate: float = 0.01
    mention_rate: float = 0.2
    sense_rate: float = 0.15
    choice_rate: float = 0.15
    pronoun_rate: float = 0.08
    choice_words: int = 3
    names: int = 60
    choice_lexicon: int = 20
    sense_words: int = 20
    adjectives: int = 30

    def __post_init__(self):
        rates = (self.switch_rate, self.mention_rate, self.sense_rate, self.choice_rate, self.pronoun_rate)
        if any(rate < 0 for rate in rates) or sum(rates) > 1:
            raise ValueError(f"rates {rates}: give shares of 0 or more that sum to 1 at most")
        if not 2 <= self.max_people <= self.names:
            raise ValueError(f"max_people {self.max_people}: give 2 to names ({self.names})")
        if not 1 <= self.choice_words <= self.choice_lexicon:
            raise ValueError(f"choice_words {self.choice_words}: give 1 to choice_lexicon ({self.choice_lexicon})")
        if self.max_pronoun_distance < 1:
            raise ValueError(f"max_pronoun_distance {self.max_pronoun_distance}: give 1 or more")

    def lexicon(self) -> "LongLexicon":
        """The names and words of two translations of documents of this shape."""
        return long_lexicon(self.names, self.choice_lexicon, self.sense_words, self.adjectives)

    def words(self):
        """The adjectives and ambiguous words (``synthetic_documents.Lexicon``) of documents of this shape."""
        return lexicon_of(self.sense_words, self.adjectives)


@dataclass(frozen=True)
class LongLexicon:
    """Made-up names (one spelling on both sides) and words of two translations (English,
    (gender, (German, German))), the same for every seed."""

    names: Tuple[str, ...]
    choices: Tuple[Tuple[str, Tuple[str, Tuple[str, str]]], ...]


@lru_cache(maxsize=None)
def long_lexicon(names: int, choices: int, sense_words: int, adjectives: int) -> LongLexicon:
    """``names`` made-up names and ``choices`` words of two translations, unlike every word of the
    listed vocabulary and of ``lexicon_of(sense_words, adjectives)``, drawn from a fixed seed."""
    taken = listed_words()
    lexicon = lexicon_of(sense_words, adjectives)
    taken |= {word for pair in lexicon.adjectives for word in pair}
    taken |= {word for english, (_, senses) in lexicon.sense_words for word in (english, *senses.values())}
    taken |= {word for title in TITLES.values() for word in title.values()} | set(TITLES)
    rng = random.Random("memory_nmt long documents lexicon")
    made_names = tuple(made_up_word(rng, taken) for _ in range(names))
    made_choices = tuple(
        (made_up_word(rng, taken), (rng.choice("mf"), (made_up_word(rng, taken, "e"), made_up_word(rng, taken, "e"))))
        for _ in range(choices)
    )
    return LongLexicon(made_names, made_choices)


def _meeting(rng: random.Random, name: str, title: str) -> Tuple[str, str]:
    subject, verb = rng.choice(("i", "we")), rng.choice(sorted(MEETING_VERBS))
    german_subject = {"i": "ich", "we": "wir"}[subject]
    return (f"{subject} {verb} {title} {name} .",
            f"{german_subject} {MEETING_VERBS[verb][subject]} {TITLES[title]['acc']} {name} .")


def _mention(rng: random.Random, name: str, title: str) -> Tuple[Tuple[str, str], str, str]:
    """A sentence naming a person alone, the title's German word it holds and the other title's."""
    other = "mrs" if title == "mr" else "mr"
    adjective, german = rng.choice(sorted(PERSON_ADJECTIVES.items()))
    case, pair = rng.choice([
        ("nom", (f"{name} was {adjective} .", "{} " + f"{name} war {german} .")),
        ("nom", (f"{name} is {adjective} now .", "{} " + f"{name} ist jetzt {german} .")),
        ("acc", (f"i saw {name} again .", "ich sah {} " + f"{name} wieder .")),
        ("acc", (f"we called {name} .", "wir riefen {} " + f"{name} an .")),
    ])
    word = TITLES[title][case]
    return (pair[0], pair[1].format(word)), word, TITLES[other][case]


class _Cues:
    """Where each thing a document establishes was set and last shown, by key."""

    def __init__(self):
        self.established: Dict[Tuple, int] = {}
        self.shown: Dict[Tuple, int] = {}

    def establish(self, key, sentence: int):
        self.established[key] = self.shown[key] = sentence

    def use(self, key, sentence: int) -> Tuple[int, int]:
        """(distance, gap) of a use at ``sentence``, which then shows the key."""
        distance, gap = sentence - self.established[key], sentence - self.shown[key]
        self.shown[key] = sentence
        return distance, gap


def _kind(draw: float, shape: LongDocumentShape, left: int) -> str:
    """The kind of the next sentence for a uniform ``draw`` in [0, 1), by ``shape``'s rates in turn;
    a filler where none is drawn, or where a pronoun block would not fit the ``left`` sentences."""
    for kind, rate in (("switch", shape.switch_rate), ("mention", shape.mention_rate), ("sense", shape.sense_rate),
                       ("choice", shape.choice_rate), ("pronoun", shape.pronoun_rate)):
        if draw < rate:
            return "filler" if kind == "pronoun" and left < 2 else kind
        draw -= rate
    return "filler"


def _long_document(rng: random.Random, num_sentences: int, shape: LongDocumentShape) -> SyntheticDocument:
    """A topic sentence, the people's introductions, then sentences drawn at ``shape``'s rates."""
    people = rng.randint(2, shape.max_people)
    lexicon, words = shape.lexicon(), shape.words()
    cues, pairs, items = _Cues(), [], []
    topic = rng.choice(TOPICS)
    pairs.append(rng.choice(TOPIC_SENTENCES[topic]))
    cues.establish("topic", 0)
    names = rng.sample(lexicon.names, people)
    titles = {name: rng.choice(sorted(TITLES)) for name in names}
    for name in names:
        cues.establish(("title", name), len(pairs))
        pairs.append(_meeting(rng, name, titles[name]))
    choices = rng.sample(lexicon.choices, shape.choice_words)
    chosen: Dict[str, int] = {}
    weights = [1 / (rank + 1) for rank in range(people)]

    def item(phenomenon, key, correct, alternatives):
        distance, gap = cues.use(key, len(pairs))
        items.append(ContextWord(len(pairs), phenomenon, correct, alternatives, distance, gap))

    while len(pairs) < num_sentences:
        left = num_sentences - len(pairs)
        kind = _kind(rng.random(), shape, left)
        if kind == "switch":
            topic = TOPICS[1 - TOPICS.index(topic)]
            cues.establish("topic", len(pairs))
            pairs.append(rng.choice(TOPIC_SENTENCES[topic]))
        elif kind == "mention":
            name = rng.choices(names, weights)[0]
            pair, word, other = _mention(rng, name, titles[name])
            item("title", ("title", name), word, [other])
            pairs.append(pair)
        elif kind == "sense":
            english, (gender, senses) = rng.choice(words.sense_words)
            item("topic", "topic", senses[topic], [senses[t] for t in TOPICS if t != topic])
            pairs.append(definite_noun_sentence(rng, english, gender, senses[topic], words))
        elif kind == "choice":
            english, (gender, translations) = rng.choice(choices)
            if english in chosen:
                item("choice", ("choice", english), translations[chosen[english]],
                     [translations[1 - chosen[english]]])
            else:
                chosen[english] = rng.randrange(2)
                cues.establish(("choice", english), len(pairs))
            pairs.append(definite_noun_sentence(rng, english, gender, translations[chosen[english]], words))
        elif kind == "pronoun":
            distance = rng.randint(1, min(shape.max_pronoun_distance, left - 1))
            gender = rng.choice(GENDERS)
            noun = rng.choice(sorted(n for n, (_, g) in NOUNS.items() if g == gender))
            pairs.append(introduction(rng, noun))
            pairs.extend(filler(rng) for _ in range(distance - 1))
            items.append(ContextWord(len(pairs), "pronoun", PRONOUNS[gender],
                                     [PRONOUNS[g] for g in GENDERS if g != gender], distance, distance))
            pairs.append(pronoun_sentence(rng, PRONOUNS[gender], words))
        else:
            pairs.append(filler(rng))
    return SyntheticDocument([s for s, _ in pairs], [t for _, t in pairs], items)


def check_lengths(shape: LongDocumentShape, min_sentences: int, max_sentences: int):
    """Refuse lengths that leave a document no room to introduce its people and name one (ValueError)."""
    if not shape.max_people + 2 <= min_sentences <= max_sentences:
        raise ValueError(f"give max_people + 2 ({shape.max_people + 2}) <= min_sentences ({min_sentences}) "
                         f"<= max_sentences ({max_sentences})")


def generate_long_documents(num_documents: int, seed: int, min_sentences: int = 10, max_sentences: int = 150,
                            shape: LongDocumentShape = LongDocumentShape()) -> List[SyntheticDocument]:
    """``num_documents`` documents of ``min_sentences`` to ``max_sentences`` sentences (uniform)."""
    check_lengths(shape, min_sentences, max_sentences)
    rng = random.Random(seed)
    return [_long_document(rng, rng.randint(min_sentences, max_sentences), shape) for _ in range(num_documents)]


def translation_pair(word: ContextWord) -> Tuple[str, str]:
    """The two translations of a ``choice`` word, in alphabetical order: the word's key across documents."""
    return tuple(sorted([word.correct, *word.alternatives]))


def first_choices(documents: List[SyntheticDocument], hypotheses: List[List[str]]
                  ) -> List[Dict[Tuple[str, ...], Optional[str]]]:
    """Per document, for each word of two translations it uses (keyed by ``translation_pair``), the
    translation its hypothesis wrote at the word's first use: the first of the pair found there, or
    None where neither is."""
    choices = []
    for document, hypothesis in zip(documents, hypotheses):
        firsts = {}
        for word in document.context_words:
            if word.phenomenon != "choice":
                continue
            pair = translation_pair(word)
            if pair in firsts:
                continue
            first_use = word.cue_sentence
            tokens = set(hypothesis[first_use].split())
            firsts[pair] = next((translation for translation in pair if translation in tokens), None)
        choices.append(firsts)
    return choices
