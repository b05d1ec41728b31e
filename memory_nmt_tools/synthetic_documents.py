"""Synthetic parallel documents whose correct translation needs earlier sentences of the document.

Used by the quickstart, the paper's analyses, the tests and the benchmarks; its command line
(``memory-nmt-synthetic-documents``, ``scripts/synthetic_documents.py``) writes documents for
fairseq-preprocess. An English-like source and a German-like target, word level, lower case,
ASCII, tokens separated by single spaces, every sentence ending with " .". Every word translates
deterministically given its own sentence, except two kinds of context-dependent words, drawn
independently and uniformly, so a sentence-level model is at chance:

- ``pronoun`` (chance 1/3): a sentence introduces a noun ("i saw a table ." -> "ich sah einen
  tisch ."), and 1 to 3 sentences later "it" refers to it ("it was red ." -> "er|sie|es war rot .").
  Only noun-free filler sentences lie in between.
- ``sense`` (chance 1/2): the document's first sentence sets a topic (nature or industry); later
  sentences hold an ambiguous word ("the plant was old ." -> "die pflanze|fabrik war alt .").
  Both senses of a word have the same German gender, so articles do not differ: the ambiguous
  noun is the only target token that depends on the topic.

A ``DocumentShape`` changes what a document holds (its defaults are the quickstart's documents):
how far back a pronoun's noun may be, how often a sentence holds an ambiguous word, and how many
ambiguous words and adjectives there are (beyond the listed ones, made-up word pairs, the same
for every seed), so that a sense word can be as rare as a name or a term in real documents.

Only the standard library is used: neither fairseq nor the plugin is imported.
"""
import argparse
import os
import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

# noun -> (translation, gender); nouns that "it" can refer to, equally many of each gender.
NOUNS: Dict[str, Tuple[str, str]] = {
    "table": ("tisch", "m"), "chair": ("stuhl", "m"), "car": ("wagen", "m"),
    "hat": ("hut", "m"), "coat": ("mantel", "m"), "key": ("schluessel", "m"),
    "lamp": ("lampe", "f"), "cup": ("tasse", "f"), "bag": ("tasche", "f"),
    "clock": ("uhr", "f"), "door": ("tuer", "f"), "jacket": ("jacke", "f"),
    "book": ("buch", "n"), "bed": ("bett", "n"), "picture": ("bild", "n"),
    "house": ("haus", "n"), "bike": ("fahrrad", "n"), "window": ("fenster", "n"),
}
GENDERS = ("m", "f", "n")
PRONOUNS: Dict[str, str] = {"m": "er", "f": "sie", "n": "es"}  # German for "it", by gender
INDEFINITE: Dict[str, str] = {"m": "einen", "f": "eine", "n": "ein"}  # accusative "a"
DEFINITE_NOM: Dict[str, str] = {"m": "der", "f": "die", "n": "das"}
DEFINITE_ACC: Dict[str, str] = {"m": "den", "f": "die", "n": "das"}

TOPICS = ("nature", "industry")
# first sentences that set the topic
TOPIC_SENTENCES: Dict[str, List[Tuple[str, str]]] = {
    "nature": [
        ("we walked along the river .", "wir gingen am fluss entlang ."),
        ("we hiked in the forest .", "wir wanderten im wald ."),
        ("we spent the day in the mountains .", "wir verbrachten den tag in den bergen ."),
    ],
    "industry": [
        ("we worked in the workshop .", "wir arbeiteten in der werkstatt ."),
        ("we visited the building site .", "wir besuchten die baustelle ."),
        ("we spent the day in the garage .", "wir verbrachten den tag in der garage ."),
    ],
}
# ambiguous word -> (gender shared by both senses, {topic: translation})
SENSE_WORDS: Dict[str, Tuple[str, Dict[str, str]]] = {
    "plant": ("f", {"nature": "pflanze", "industry": "fabrik"}),
    "spring": ("f", {"nature": "quelle", "industry": "feder"}),
    "nut": ("f", {"nature": "nuss", "industry": "mutter"}),
    "crane": ("m", {"nature": "kranich", "industry": "kran"}),
    "trunk": ("m", {"nature": "stamm", "industry": "koffer"}),
}

ADJECTIVES: Dict[str, str] = {  # properties of things
    "red": "rot", "old": "alt", "new": "neu", "small": "klein", "big": "gross",
    "cheap": "billig", "heavy": "schwer", "broken": "kaputt", "beautiful": "schoen", "green": "gruen",
}
PERSON_ADJECTIVES: Dict[str, str] = {
    "tired": "muede", "happy": "froh", "hungry": "hungrig", "late": "spaet", "sad": "traurig",
}
SUBJECTS: Dict[str, str] = {"i": "ich", "we": "wir"}
VERBS: Dict[str, Dict[str, str]] = {  # english past -> German past, by subject
    "saw": {"i": "sah", "we": "sahen"}, "bought": {"i": "kaufte", "we": "kauften"},
    "found": {"i": "fand", "we": "fanden"}, "painted": {"i": "malte", "we": "malten"},
    "built": {"i": "baute", "we": "bauten"}, "sold": {"i": "verkaufte", "we": "verkauften"},
}
FILLERS: List[Tuple[str, str]] = [  # no nouns, no "it"
    ("we waited there .", "wir warteten dort ."), ("then we waited .", "dann warteten wir ."),
    ("we laughed together .", "wir lachten zusammen ."), ("nothing else happened .", "sonst passierte nichts ."),
    ("i slept well .", "ich schlief gut ."), ("we ate and drank .", "wir assen und tranken ."),
]


DISTANCE_CLASSES = ("pronoun d=1", "pronoun d>1", "sense d=1", "sense d>1")
CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"


@dataclass(frozen=True)
class DocumentShape:
    """What a document holds besides its topic sentence.

    ``max_pronoun_distance``: "it" comes 1 to this many sentences after its noun (only fillers
    between). ``sense_rate``: the share of a document's later sentences that hold an ambiguous
    word, about (None: half the blocks are a sense sentence, the other half a pronoun's noun,
    fillers and "it", so about a quarter with the default distances). ``sense_words`` and
    ``adjectives``: how many there are, the listed ones first, then made-up ones."""

    max_pronoun_distance: int = 3
    sense_rate: Optional[float] = None
    sense_words: int = len(SENSE_WORDS)
    adjectives: int = len(ADJECTIVES)

    def __post_init__(self):
        if self.max_pronoun_distance < 1:
            raise ValueError(f"max_pronoun_distance {self.max_pronoun_distance}: give 1 or more")
        if self.sense_rate is not None and not 0 < self.sense_rate < 1:
            raise ValueError(f"sense_rate {self.sense_rate}: give a share above 0 and below 1")
        if self.sense_words < 1 or self.adjectives < 2:
            raise ValueError(f"sense_words {self.sense_words}, adjectives {self.adjectives}: "
                             "give at least 1 ambiguous word and 2 adjectives")

    def sense_block_chance(self) -> float:
        """The chance that a block is a sense sentence, for which about ``sense_rate`` of the
        sentences hold an ambiguous word: a pronoun block spans its distance plus one sentences,
        (max_pronoun_distance + 3) / 2 on average."""
        if self.sense_rate is None:
            return 0.5
        pronoun_block = (self.max_pronoun_distance + 3) / 2
        return self.sense_rate * pronoun_block / (1 - self.sense_rate + self.sense_rate * pronoun_block)


@dataclass(frozen=True)
class Lexicon:
    """The adjectives (English, German) and ambiguous words (as ``SENSE_WORDS``) of a shape."""

    adjectives: Tuple[Tuple[str, str], ...]
    sense_words: Tuple[Tuple[str, Tuple[str, Dict[str, str]]], ...]


def listed_words() -> set:
    """Every word of the listed vocabulary, on either side: what a made-up word must not be."""
    taken = {word for pairs in (ADJECTIVES, PERSON_ADJECTIVES, SUBJECTS, NOUNS) for pair in pairs.items()
             for word in (pair[0], pair[1] if isinstance(pair[1], str) else pair[1][0])}
    taken |= {word for _, senses in SENSE_WORDS.values() for word in senses.values()}
    taken |= {word for pairs in TOPIC_SENTENCES.values() for pair in pairs for side in pair for word in side.split()}
    taken |= {word for pair in FILLERS for side in pair for word in side.split()}
    return taken


def made_up_word(rng: random.Random, taken: set, ending: str = "") -> str:
    """Two or three consonant-vowel syllables and ``ending``, unlike every word in ``taken`` (which it joins)."""
    while True:
        word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.randint(2, 3))) + ending
        if word not in taken:
            taken.add(word)
            return word


@lru_cache(maxsize=None)
def lexicon_of(sense_words: int, adjectives: int) -> Lexicon:
    """The listed words first, then made-up ones (``made_up_word``, a German-looking ending for
    the German side), drawn from a fixed seed and unlike any other word, so every seed and split
    of a shape share them."""
    taken = listed_words()
    rng = random.Random("memory_nmt synthetic lexicon")
    listed_adjectives = sorted(ADJECTIVES.items())[:adjectives]
    extra_adjectives = [(made_up_word(rng, taken), made_up_word(rng, taken, "ig"))
                        for _ in range(adjectives - len(listed_adjectives))]
    listed_senses = sorted(SENSE_WORDS.items())[:sense_words]
    extra_senses = [
        (made_up_word(rng, taken), (rng.choice("mf"), {"nature": made_up_word(rng, taken, "e"),
                                                       "industry": made_up_word(rng, taken, "er")}))
        for _ in range(sense_words - len(listed_senses))
    ]
    return Lexicon(tuple(sorted(listed_adjectives + extra_adjectives)), tuple(sorted(listed_senses + extra_senses)))


@dataclass
class ContextWord:
    sentence: int  # index of the sentence within its document
    phenomenon: str  # "pronoun" or "sense"
    correct: str  # the correct target word
    alternatives: List[str]  # the wrong target words for the same slot
    distance: int  # sentences back to the cue (antecedent noun, or the topic sentence 0)
    gap: Optional[int] = None  # sentences back to the nearest earlier cue, where another than ``distance``'s

    @property
    def cue_sentence(self) -> int:
        """The index of the sentence ``distance`` back: the one that established what the word needs."""
        return self.sentence - self.distance


@dataclass
class SyntheticDocument:
    """A generated document: its source and target sentences, and the words whose translation
    depends on an earlier sentence (each with its cue)."""

    source: List[str]
    target: List[str]
    context_words: List[ContextWord] = field(default_factory=list)


def _adjective(rng: random.Random, lexicon: Lexicon) -> Tuple[str, str]:
    return rng.choice(lexicon.adjectives)


def filler(rng: random.Random) -> Tuple[str, str]:
    if rng.random() < 0.4:
        (en, de), (subj, verb) = rng.choice(sorted(PERSON_ADJECTIVES.items())), rng.choice(
            [("i was", "ich war"), ("we were", "wir waren"), ("we were very", "wir waren sehr")])
        return f"{subj} {en} .", f"{verb} {de} ."
    return rng.choice(FILLERS)


def introduction(rng: random.Random, noun: str) -> Tuple[str, str]:
    translation, gender = NOUNS[noun]
    subject, verb = rng.choice(sorted(SUBJECTS)), rng.choice(sorted(VERBS))
    head = f"{SUBJECTS[subject]} {VERBS[verb][subject]}"
    when = rng.choice([("", ""), (" yesterday", " gestern"), (" today", " heute")])
    return (f"{subject} {verb} a {noun}{when[0]} .",
            f"{head}{when[1]} {INDEFINITE[gender]} {translation} .")


def pronoun_sentence(rng: random.Random, pronoun: str, lexicon: Lexicon) -> Tuple[str, str]:
    (a, a_de), (b, b_de) = _adjective(rng, lexicon), _adjective(rng, lexicon)
    while b == a:
        b, b_de = _adjective(rng, lexicon)
    return rng.choice([
        (f"it was {a} .", f"{pronoun} war {a_de} ."),
        (f"it was very {a} .", f"{pronoun} war sehr {a_de} ."),
        (f"it was {a} and {b} .", f"{pronoun} war {a_de} und {b_de} ."),
        (f"it is {a} now .", f"{pronoun} ist jetzt {a_de} ."),
        (f"i think it was {a} .", f"ich glaube {pronoun} war {a_de} ."),
    ])


def definite_noun_sentence(rng: random.Random, word: str, gender: str, noun: str,
                           lexicon: Lexicon) -> Tuple[str, str]:
    """A sentence about "the ``word``", translated as the ``noun`` of ``gender``."""
    nom, acc = DEFINITE_NOM[gender], DEFINITE_ACC[gender]
    a, a_de = _adjective(rng, lexicon)
    return rng.choice([
        (f"the {word} was {a} .", f"{nom} {noun} war {a_de} ."),
        (f"the {word} was very {a} .", f"{nom} {noun} war sehr {a_de} ."),
        (f"the {word} is {a} now .", f"{nom} {noun} ist jetzt {a_de} ."),
        (f"i saw the {word} .", f"ich sah {acc} {noun} ."),
        (f"we saw the {word} yesterday .", f"wir sahen gestern {acc} {noun} ."),
    ])


def _document(rng: random.Random, num_sentences: int, shape: DocumentShape = DocumentShape()) -> SyntheticDocument:
    """Topic sentence, then shuffled blocks: pronoun blocks (noun, fillers, "it") and sense
    sentences (by default half of the blocks each, so about half the sentences hold a context
    word)."""
    if num_sentences < 1:
        raise ValueError("a document needs at least one sentence")
    lexicon = lexicon_of(shape.sense_words, shape.adjectives)
    pronoun_chance = 1 - shape.sense_block_chance()
    topic = rng.choice(TOPICS)
    remaining, blocks = num_sentences - 1, []  # block: ("sense",) or ("pronoun", distance)
    if remaining >= 3:  # at least one of each phenomenon where the length allows
        distance = min(rng.randint(1, shape.max_pronoun_distance), remaining - 2)
        blocks += [("pronoun", distance), ("sense",)]
        remaining -= distance + 2
    while remaining > 0:
        distance = rng.randint(1, shape.max_pronoun_distance)
        if rng.random() < pronoun_chance and distance < remaining:  # a block of distance + 1 sentences
            blocks.append(("pronoun", distance))
            remaining -= distance + 1
        else:
            blocks.append(("sense",))
            remaining -= 1
    rng.shuffle(blocks)
    pairs = [rng.choice(TOPIC_SENTENCES[topic])]
    items: List[ContextWord] = []
    for block in blocks:
        if block[0] == "sense":
            word, (gender, senses) = rng.choice(lexicon.sense_words)
            items.append(ContextWord(len(pairs), "sense", senses[topic],
                                     [senses[t] for t in TOPICS if t != topic], len(pairs)))
            pairs.append(definite_noun_sentence(rng, word, gender, senses[topic], lexicon))
        else:
            gender = rng.choice(GENDERS)
            noun = rng.choice(sorted(n for n, (_, g) in NOUNS.items() if g == gender))
            pairs.append(introduction(rng, noun))
            pairs.extend(filler(rng) for _ in range(block[1] - 1))
            items.append(ContextWord(len(pairs), "pronoun", PRONOUNS[gender],
                                     [PRONOUNS[g] for g in GENDERS if g != gender], block[1]))
            pairs.append(pronoun_sentence(rng, PRONOUNS[gender], lexicon))
    assert len(pairs) == num_sentences
    return SyntheticDocument([s for s, _ in pairs], [t for _, t in pairs], items)


def generate_documents(num_documents: int, seed: int, min_sentences: int = 4, max_sentences: int = 8,
                       shape: DocumentShape = DocumentShape()) -> List[SyntheticDocument]:
    """``num_documents`` documents of ``min_sentences`` to ``max_sentences`` sentences (uniform)
    of ``shape``."""
    if not 1 <= min_sentences <= max_sentences:
        raise ValueError("need 1 <= min_sentences <= max_sentences")
    rng = random.Random(seed)
    return [_document(rng, rng.randint(min_sentences, max_sentences), shape) for _ in range(num_documents)]


def generate_long_document(num_sentences: int, seed: int) -> SyntheticDocument:
    """One document of exactly ``num_sentences`` sentences (its topic is set by sentence 0)."""
    return _document(random.Random(seed), num_sentences)


def write_documents(documents: Sequence[SyntheticDocument], prefix: str, source_lang: str = "en",
                    target_lang: str = "de") -> None:
    """Writes ``{prefix}.{lang}`` (documents separated by one empty line), ``{prefix}.flat.{lang}``
    (one sentence a line, no empty lines) and ``{prefix}.docids`` (``doc0``, ... per sentence)."""
    if any(not doc.source or len(doc.source) != len(doc.target) for doc in documents):
        raise ValueError("every document needs as many (at least one) source as target sentences")
    if os.path.dirname(prefix):
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
    for lang, side in ((source_lang, "source"), (target_lang, "target")):
        docs = [getattr(doc, side) for doc in documents]
        if any(not s.strip() or "\n" in s for d in docs for s in d):
            raise ValueError("sentences must be non-empty single lines")
        with open(f"{prefix}.{lang}", "w", encoding="utf-8") as f:
            f.write("\n\n".join("\n".join(d) for d in docs) + ("\n" if docs else ""))
        with open(f"{prefix}.flat.{lang}", "w", encoding="utf-8") as f:
            f.writelines(s + "\n" for d in docs for s in d)
    with open(f"{prefix}.docids", "w", encoding="utf-8") as f:
        f.writelines(f"doc{i}\n" for i, doc in enumerate(documents) for _ in doc.source)


def context_accuracy(documents: Sequence[SyntheticDocument],
                     hypotheses: Sequence[Sequence[str]]) -> Dict[str, Tuple[int, int]]:
    """(correct, total) per phenomenon ("pronoun", "sense"), per phenomenon and distance to its
    cue ("pronoun d=1": the previous sentence, "pronoun d>1": further back; likewise "sense d=1",
    "sense d>1"), and for "all". A context word is correct when its hypothesis sentence holds the
    correct word as a token and none of the alternatives."""
    if len(hypotheses) != len(documents):
        raise ValueError(f"{len(hypotheses)} hypothesis documents for {len(documents)} documents")
    counts = {key: [0, 0] for key in ("pronoun", "sense", "all", *DISTANCE_CLASSES)}
    for doc, hyps in zip(documents, hypotheses):
        if len(hyps) != len(doc.target):
            raise ValueError(f"{len(hyps)} hypotheses for a document of {len(doc.target)} sentences")
        for item in doc.context_words:
            tokens = set(hyps[item.sentence].split())
            ok = item.correct in tokens and not tokens.intersection(item.alternatives)
            near = f"{item.phenomenon} {'d=1' if item.distance == 1 else 'd>1'}"
            for key in (item.phenomenon, near, "all"):
                counts[key][0] += int(ok)
                counts[key][1] += 1
    return {key: (c, t) for key, (c, t) in counts.items()}


def contrastive_items(documents: Sequence[SyntheticDocument]) -> List[dict]:
    """One contrastive item per context word, in the json of Voita et al. (2019) (``src``, ``dst``,
    ``true_ind``, ``ctx_dist``; sentences joined by " _eos "): the document up to the word's
    sentence, and its reference against the same sentence with each wrong word instead."""
    entries = []
    for document in documents:
        for word in document.context_words:
            reference = document.target[word.sentence]
            candidates = [reference] + [
                " ".join(alternative if token == word.correct else token for token in reference.split())
                for alternative in word.alternatives
            ]
            entries.append({
                "src": " _eos ".join(document.source[: word.sentence + 1]),
                "dst": [" _eos ".join(document.target[: word.sentence] + [c]) for c in candidates],
                "true_ind": 0,
                "ctx_dist": word.distance,
            })
    return entries


def add_shape_options(parser: argparse.ArgumentParser) -> None:
    """``DocumentShape``'s fields as command-line options (defaults: the quickstart's documents)."""
    default = DocumentShape()
    parser.add_argument("--max-pronoun-distance", type=int, default=default.max_pronoun_distance,
                        help="'it' comes 1 to this many sentences after its noun (default: %(default)s)")
    parser.add_argument("--sense-rate", type=float, default=default.sense_rate,
                        help="share of a document's later sentences holding an ambiguous word, about "
                        "(default: half the blocks, about a quarter of the sentences)")
    parser.add_argument("--sense-words", type=int, default=default.sense_words,
                        help="how many ambiguous words, made-up ones beyond the %(default)s listed")
    parser.add_argument("--adjectives", type=int, default=default.adjectives,
                        help="how many adjectives, made-up ones beyond the %(default)s listed")


def shape_of(parser: argparse.ArgumentParser, args) -> DocumentShape:
    """The ``DocumentShape`` of ``add_shape_options``'s options (a parser error if out of range)."""
    try:
        return DocumentShape(args.max_pronoun_distance, args.sense_rate, args.sense_words, args.adjectives)
    except ValueError as error:
        parser.error(str(error))


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--output-prefix", required=True)
    parser.add_argument("--min-sentences", type=int, default=4)
    parser.add_argument("--max-sentences", type=int, default=8)
    add_shape_options(parser)
    parser.add_argument("--source-lang", default="en")
    parser.add_argument("--target-lang", default="de")
    args = parser.parse_args(argv)
    docs = generate_documents(args.documents, args.seed, args.min_sentences, args.max_sentences, shape_of(parser, args))
    write_documents(docs, args.output_prefix, args.source_lang, args.target_lang)


if __name__ == "__main__":
    main()
