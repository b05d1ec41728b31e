"""Document translation from Python: ``from_pretrained(...)`` of any document system's model class.

``DocumentHubInterface`` is fairseq's ``GeneratorHubInterface`` (raw text in, raw text out, with
the checkpoint's or the given ``bpe`` and ``tokenizer``) that translates whole documents: the
sentences of each document carry their context from one to the next, and several documents are
translated together, one batch per sentence round, as ``fairseq-interactive`` does
(``interactive.py``); an error names a sentence by its document and place in the call's
documents. ``translate`` and ``sample`` of single sentences are refused: each needs its document;
so is a keyword that is not a generation option (fairseq's hub would set it and go on), or one whose
value fairseq-generate's option would not take (fairseq's generator failed on it with a TypeError).
A translation is what fairseq-generate prints: without the language token a pretrained
checkpoint's decoding forces or stops at (``language_tokens.py``), which fairseq's hub leaves in.
``from_pretrained`` refuses a directory that is not there, naming the keyword (fairseq's hub went
on with None).
A checkpoint of a sentence-level model trained in fairseq's own ``translation`` task (any class's
``from_pretrained`` loads what the checkpoint holds) translates a document's sentences each
alone, as the document task translates such a model.
"""
import difflib
import os
from typing import List, Sequence

from fairseq.dataclass.configs import GenerationConfig
from fairseq.hub_utils import GeneratorHubInterface
from fairseq_cli.generate import get_symbols_to_strip_from_output
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from .document_task import TranslatesDocuments
from .option_ranges import OptionError, flag_of


class DocumentHubInterface(GeneratorHubInterface):
    def __init__(self, cfg, task, models):
        super().__init__(cfg, task, models)
        self.stripped_symbols = get_symbols_to_strip_from_output(task.build_generator(self.models, cfg.generation))

    def translate_documents(self, documents: List[List[str]], beam: int = 5, **kwargs) -> List[List[str]]:
        """One translation per sentence of each document (a document: a list of sentences)."""
        check_documents(documents)
        options = checked_generation_options({"beam": beam, **kwargs}, self.cfg.generation)
        if not isinstance(self.task, TranslatesDocuments):  # a sentence-level model: no context
            translations = iter(super().sample([s for document in documents for s in document], **options))
            return [[next(translations) for _ in document] for document in documents]
        lines = [line for document in documents for line in [*document, ""]]
        self.task.interactive.begin_input(input_is_lines=False)
        self.task.placements = self.task.interactive.place(lines)
        translations = iter(super().sample(lines, **options))
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
        raise sentences_refused("translate")

    def sample(self, sentences, *args, **kwargs):
        """Refused, as ``translate``: a sentence of a document model needs its document."""
        raise sentences_refused("sample")

    def string(self, tokens) -> str:
        """A translation's tokens as fairseq-generate prints them: without the symbols the task's
        generator strips from its output (the eos it stops at, a language token it forced)."""
        return self.tgt_dict.string(tokens, extra_symbols_to_ignore=self.stripped_symbols)


def sentences_refused(method: str) -> TypeError:
    return TypeError(
        f"{method}() translates sentences without their document; a document model translates documents: use "
        "translate_document(sentences) for one document (a list of sentences) or translate_documents(documents) "
        "for several"
    )


def check_pretrained_paths(model_name_or_path: str, data_name_or_path: str):
    """Refuse a directory of ``from_pretrained`` that is not there (fairseq's hub loads a URL or an
    archive; it took a local path that is not there for None, and failed with a TypeError); a
    ``data_name_or_path`` that starts with '.' is read from the checkpoint's directory, as fairseq reads it."""
    if "://" in model_name_or_path:
        return
    if not os.path.exists(model_name_or_path):
        raise OptionError(f"model_name_or_path={model_name_or_path!r}: no such directory; give the directory of "
                          "the checkpoint (fairseq-train's --save-dir)")
    data = (os.path.join(model_name_or_path, data_name_or_path) if data_name_or_path.startswith(".")
            else data_name_or_path)
    if "://" not in data and not os.path.exists(data):
        raise OptionError(
            f"data_name_or_path={data_name_or_path!r}: no such directory ({os.path.abspath(data)}); give the "
            "directory of the binarized data's dictionaries (fairseq-preprocess's --destdir); one that starts "
            "with '.' is read from the checkpoint's directory"
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


def checked_generation_options(options: dict, generation) -> dict:
    """``options`` as fairseq's generation options take them; a TypeError naming a keyword that is
    neither a generation option (``generation``, the checkpoint's generation config: ``beam``,
    ``max_len_b``, ``lenpen``, ...) nor one of fairseq's hub keywords, with the options it is close
    to, and an ``OptionError`` naming one whose value fairseq-generate's option would not take."""
    known = sorted({*generation.keys(), *HUB_OPTIONS})
    typed = OmegaConf.structured(GenerationConfig)
    checked = {}
    for name, value in options.items():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = (f"did you mean {', '.join(close)}?" if close
                    else "see fairseq's generation options (fairseq-generate --help)")
            raise TypeError(f"{name}={value!r} is not a generation option: {hint}")
        if name not in typed:
            checked[name] = value
            continue
        try:
            typed[name] = value
        except ValidationError as error:
            reason = str(error).splitlines()[0]
            raise OptionError(f"{name}={value!r}: {reason}; give {name} a value that fairseq-generate's "
                              f"{flag_of(name)} takes") from None
        checked[name] = typed[name]
    return checked
