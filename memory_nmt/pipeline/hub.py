"""Document translation from Python: ``from_pretrained(...)`` of any document system's model class.

``DocumentHubInterface`` is fairseq's ``GeneratorHubInterface`` (raw text in, raw text out, with
the checkpoint's or the given ``bpe`` and ``tokenizer``) that translates whole documents: the
sentences of each document carry their context from one to the next, and several documents are
translated together, one batch per sentence round, as ``fairseq-interactive`` does
(``interactive.py``); an error names a sentence by its document and place in the call's
documents. ``translate`` of single sentences is refused: each needs its document, and so is a
keyword that is not a generation option (fairseq's hub would set it and go on).
A checkpoint of a sentence-level model trained in fairseq's own ``translation`` task (any class's
``from_pretrained`` loads what the checkpoint holds) translates a document's sentences each
alone, as the document task translates such a model.
"""
import difflib
from typing import List, Sequence

from fairseq.hub_utils import GeneratorHubInterface

from .document_task import TranslatesDocuments


class DocumentHubInterface(GeneratorHubInterface):
    def translate_documents(self, documents: List[List[str]], beam: int = 5, **kwargs) -> List[List[str]]:
        """One translation per sentence of each document (a document: a list of sentences)."""
        check_documents(documents)
        check_generation_options(kwargs, self.cfg.generation)
        if not isinstance(self.task, TranslatesDocuments):  # a sentence-level model: no context
            translations = iter(super().translate([s for document in documents for s in document], beam=beam, **kwargs))
            return [[next(translations) for _ in document] for document in documents]
        lines = [line for document in documents for line in [*document, ""]]
        self.task.interactive.begin_input(input_is_lines=False)
        self.task.placements = self.task.interactive.place(lines)
        translations = iter(super().translate(lines, beam=beam, **kwargs))
        return [[next(translations) for _ in [*document, ""]][:-1] for document in documents]

    def translate_document(self, sentences: List[str], beam: int = 5, **kwargs) -> List[str]:
        """One translation per sentence, the context carried from sentence to sentence."""
        if isinstance(sentences, str):
            raise TypeError(
                "translate_document takes the document's sentences as a list of strings, not one "
                "string: split the text into sentences first"
            )
        return self.translate_documents([sentences], beam=beam, **kwargs)[0]

    def translate(self, sentences, *args, **kwargs):
        """Refused: a sentence of a document model needs its document."""
        raise TypeError(
            "a document model translates documents: use translate_document(sentences) for one "
            "document (a list of sentences) or translate_documents(documents) for several"
        )


def check_documents(documents):
    """A list of documents, each a list of non-empty strings, or a TypeError/ValueError saying
    which document and sentence is not."""
    if isinstance(documents, str) or not isinstance(documents, Sequence):
        raise TypeError(
            f"translate_documents takes a list of documents, each a list of sentences; got a "
            f"{type(documents).__name__}"
        )
    for number, document in enumerate(documents, 1):
        if isinstance(document, str) or not isinstance(document, Sequence):
            raise TypeError(
                f"document {number} is a {type(document).__name__}: give each document as a list "
                "of sentences (strings)"
            )
        for index, sentence in enumerate(document, 1):
            if not isinstance(sentence, str):
                raise TypeError(
                    f"document {number}: sentence {index} is a {type(sentence).__name__}, not a string"
                )
            if not sentence.strip():
                raise ValueError(f"document {number}: sentence {index} is empty; every sentence needs text")


HUB_OPTIONS = (  # the keywords of fairseq's GeneratorHubInterface.generate besides generation options
    "verbose", "skip_invalid_size_inputs", "inference_step_args", "prefix_allowed_tokens_fn",
)


def check_generation_options(options: dict, generation) -> None:
    """A TypeError naming a keyword that is neither a generation option (``generation``, the
    checkpoint's generation config: ``beam``, ``max_len_b``, ``lenpen``, ...) nor one of fairseq's
    hub keywords, with the options it is close to."""
    known = sorted({*generation.keys(), *HUB_OPTIONS})
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = (f"did you mean {', '.join(close)}?" if close
                    else "see fairseq's generation options (fairseq-generate --help)")
            raise TypeError(f"{name}={options[name]!r} is not a generation option: {hint}")
