"""The fairseq-train options that build a document system on a pretrained checkpoint: its shape and language tokens.

``--finetune-from-model`` loads a checkpoint's weights into the model its command line builds, so
that model needs the checkpoint's shape (layers, dimensions, heads, pre-norm layers, learned
positions, embedding norm, activation, shared embeddings, positions), and the data the
checkpoint's dictionary with its language tokens placed as its task placed them (the document
task's ``--langs``, ``--encoder-langtok``, ``--decoder-langtok``, ``--lang-tok-style``:
``memory_nmt/pipeline/language_tokens.py``). This command reads both from the checkpoint's own
config (mBART's ``translation_from_pretrained_bart`` or ``denoising``/``multilingual_denoising``
pretraining, ``translation_multi_simple_epoch``, ``translation``) and prints them as options for
any system's ``--arch``::

    fairseq-train data-bin --user-dir memory_nmt --task document_translation \\
        --arch transformer_recurrent_memory $(memory-nmt-checkpoint-options mbart50/model.pt) \\
        --finetune-from-model mbart50/model.pt ...

A pretraining checkpoint names no translation direction: its languages are all it gives, and the
document task puts their tokens where ``translation_from_pretrained_bart`` does. A checkpoint whose
task read its languages from a file (``--lang-dict``, as mBART-50's finetuned models did) needs the
file: ``--lang-dict ML50_langs.txt``; NLLB's data-source tags after its language tokens become
``--add-data-source-prefix-tags``. ``--only shape`` prints the model's options alone, ``--only
languages`` the language options alone, which fairseq-generate and fairseq-interactive take too;
``--lines`` prints the two on two lines, reading the checkpoint once (an mBART-50 checkpoint is
2.4 GB).
"""
import argparse
import dataclasses
import shlex
import sys
from typing import List, Optional, Tuple

from fairseq import checkpoint_utils

# importing the plugin makes fairseq's checkpoints readable (memory_nmt/fairseq_changes.py)
from memory_nmt.pipeline.checkpoint_files import CheckpointFileError, check_checkpoint_file, config_value
from memory_nmt.pipeline.checkpoint_fit import MODEL_OPTIONS
from memory_nmt.pipeline.checkpoint_languages import LanguageOptions
from memory_nmt.pipeline.language_tokens import read_lang_dict
from memory_nmt.pipeline.option_ranges import OptionError, flag_of


class CheckpointOptionsError(Exception):
    """A checkpoint this command cannot read the options of; the message says why."""


def checkpoint_options(path: str, only: str = "all", lang_dict: Optional[str] = None) -> List[str]:
    """The options that build a model of ``path``'s shape, on data with its language tokens
    (``only``: "shape" or "languages" for one of the two); ``lang_dict``: the file of its languages,
    for a checkpoint whose task read them from one (``--lang-dict``)."""
    shape, languages = shape_and_languages(path, lang_dict, with_languages=only != "shape")
    if only == "shape":
        return shape
    return languages if only == "languages" else shape + languages


def shape_and_languages(path: str, lang_dict: Optional[str] = None,
                        with_languages: bool = True) -> Tuple[List[str], List[str]]:
    """(the shape options, the language options) of ``path``, loaded once; no language options
    without ``with_languages`` (they may need a ``lang_dict`` that a shape does not)."""
    try:
        check_checkpoint_file(path)
        state = checkpoint_utils.load_checkpoint_to_cpu(path)
    except CheckpointFileError as error:
        raise CheckpointOptionsError(str(error)) from None
    except (OSError, RuntimeError) as error:
        raise CheckpointOptionsError(f"{path}: cannot read it as a fairseq checkpoint ({error})") from None
    config = state.get("cfg") or {}
    model, task = config_value(config, "model"), config_value(config, "task")
    if model is None:
        raise CheckpointOptionsError(f"{path}: holds no model config (a fairseq checkpoint from before 0.10?): "
                                     "give the architecture options by hand")
    shape = []
    for name in MODEL_OPTIONS:
        value = config_value(model, name)
        if isinstance(value, bool):
            shape += [flag_of(name)] if value else []
        elif value is not None:
            shape += [flag_of(name), str(value)]
    return shape, (language_options(path, task or {}, lang_dict) if with_languages else [])


def language_options(path: str, task, lang_dict: Optional[str]) -> List[str]:
    """The document task's language-token options that place the tokens as ``task`` (a checkpoint's
    task config) did (``memory_nmt/pipeline/checkpoint_languages.py``); ``lang_dict`` is checked: a
    file that cannot be read, names no language or lacks one the checkpoint's task named is refused."""
    theirs = LanguageOptions.of_checkpoint(task)
    if lang_dict is not None and not theirs.lang_dict:
        raise CheckpointOptionsError(f"{path}: names its languages itself (--langs), so --lang-dict is not needed")
    if theirs.lang_dict and not theirs.langs and lang_dict is None:
        raise CheckpointOptionsError(
            f"{path}: its task read its languages from --lang-dict {theirs.lang_dict}: give that file (the "
            "checkpoint's languages, one a line in its order; mBART-50's ML50_langs.txt) as --lang-dict")
    if lang_dict is not None:
        try:
            langs = read_lang_dict(lang_dict)
        except OptionError as error:
            raise CheckpointOptionsError(str(error)) from None
        lacking = theirs.lacks(langs)
        if theirs.langs and langs != list(theirs.langs):
            raise CheckpointOptionsError(f"--lang-dict {lang_dict}: names other languages than {theirs.lang_dict}, "
                                         f"which {path} was trained with: give that file")
        if lacking:
            raise CheckpointOptionsError(f"--lang-dict {lang_dict}: lacks {', '.join(lacking)}, which {path} was "
                                         "trained on: give the file of the checkpoint's languages")
        theirs = dataclasses.replace(theirs, langs=tuple(langs), lang_dict=lang_dict)
    return theirs.command_line()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", help="a fairseq checkpoint (model.pt, checkpoint_best.pt)")
    printed = parser.add_mutually_exclusive_group()
    printed.add_argument("--only", choices=("shape", "languages"),
                         help="print only the model's shape options (for fairseq-train's --arch) or only the "
                              "language-token options (which fairseq-generate and fairseq-interactive need too)")
    printed.add_argument("--lines", action="store_true",
                         help="print the shape options on one line and the language options on the next, reading "
                              "the checkpoint once")
    parser.add_argument("--lang-dict", metavar="FILE",
                        help="the file of the checkpoint's languages, for a checkpoint whose task read them from one "
                             "(translation_multi_simple_epoch's --lang-dict: mBART-50's ML50_langs.txt)")
    args = parser.parse_args(argv)
    try:
        if args.lines:
            print("\n".join(map(shlex.join, shape_and_languages(args.checkpoint, args.lang_dict))))
        else:
            print(shlex.join(checkpoint_options(args.checkpoint, args.only or "all", args.lang_dict)))
    except CheckpointOptionsError as error:
        sys.exit(f"{parser.prog}: error: {error}")


if __name__ == "__main__":
    main()
