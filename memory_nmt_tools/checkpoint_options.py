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
languages`` the language options alone, which fairseq-generate and fairseq-interactive take too.
"""
import argparse
import shlex
import sys
from collections.abc import Mapping
from typing import List, Optional

SHAPE_VALUES = (  # options whose value shapes the model's parameters or computation
    "encoder_layers", "decoder_layers", "encoder_embed_dim", "decoder_embed_dim",
    "encoder_ffn_embed_dim", "decoder_ffn_embed_dim", "encoder_attention_heads", "decoder_attention_heads",
    "activation_fn", "max_source_positions", "max_target_positions",
)
SHAPE_FLAGS = (  # ... and whose presence does
    "encoder_normalize_before", "decoder_normalize_before", "encoder_learned_pos", "decoder_learned_pos",
    "layernorm_embedding", "no_scale_embedding", "no_token_positional_embeddings",
    "share_all_embeddings", "share_decoder_input_output_embed",
)
MULTILINGUAL_TASK = "translation_multi_simple_epoch"


class CheckpointOptionsError(Exception):
    """A checkpoint this command cannot read the options of; the message says why."""


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def field(config, name: str):
    if isinstance(config, Mapping):
        return config.get(name)
    return getattr(config, name, None)


def checkpoint_options(path: str, only: str = "all", lang_dict: Optional[str] = None) -> List[str]:
    """The options that build a model of ``path``'s shape, on data with its language tokens
    (``only``: "shape" or "languages" for one of the two); ``lang_dict``: the file of its languages,
    for a checkpoint whose task read them from one (``--lang-dict``)."""
    import memory_nmt  # noqa: F401  (makes fairseq's checkpoints readable: memory_nmt/readable_checkpoints.py)
    from fairseq import checkpoint_utils

    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(path)
    except (OSError, RuntimeError) as error:
        raise CheckpointOptionsError(f"{path}: cannot read it as a fairseq checkpoint ({error})") from None
    config = state.get("cfg") or {}
    model, task = field(config, "model"), field(config, "task")
    if model is None:
        raise CheckpointOptionsError(f"{path}: holds no model config (a fairseq checkpoint from before 0.10?): "
                                     "give the architecture options by hand")
    shape = [item for name in SHAPE_VALUES if field(model, name) is not None
             for item in (option(name), str(field(model, name)))]
    shape += [option(name) for name in SHAPE_FLAGS if field(model, name)]
    if only == "shape":
        return shape
    languages = language_options(path, task or {}, lang_dict)
    return languages if only == "languages" else shape + languages


def language_options(path: str, task, lang_dict: Optional[str]) -> List[str]:
    """The document task's language-token options that place the tokens as ``task`` (a config) did."""
    langs = field(task, "langs")
    if field(task, "lang_dict") and not langs:
        if lang_dict is None:
            raise CheckpointOptionsError(
                f"{path}: its task read its languages from --lang-dict {field(task, 'lang_dict')}: give that file "
                "(the checkpoint's languages, one a line in its order; mBART-50's ML50_langs.txt) as --lang-dict")
        options = ["--lang-dict", lang_dict]
    elif lang_dict is not None:
        raise CheckpointOptionsError(f"{path}: names its languages itself (--langs), so --lang-dict is not needed")
    elif langs:
        options = ["--langs", ",".join(langs) if isinstance(langs, (list, tuple)) else str(langs)]
    else:
        return []
    if field(task, "add_data_source_prefix_tags"):
        options.append("--add-data-source-prefix-tags")
    if field(task, "_name") == MULTILINGUAL_TASK or field(task, "encoder_langtok") or field(task, "decoder_langtok"):
        options += ["--lang-tok-style", str(field(task, "lang_tok_style") or "multilingual")]
        if field(task, "encoder_langtok"):
            options += ["--encoder-langtok", str(field(task, "encoder_langtok"))]
        if field(task, "decoder_langtok"):
            options.append("--decoder-langtok")
    return options


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", help="a fairseq checkpoint (model.pt, checkpoint_best.pt)")
    parser.add_argument("--only", choices=("shape", "languages"),
                        help="print only the model's shape options (for fairseq-train's --arch) or only the "
                             "language-token options (which fairseq-generate and fairseq-interactive need too)")
    parser.add_argument("--lang-dict", metavar="FILE",
                        help="the file of the checkpoint's languages, for a checkpoint whose task read them from one "
                             "(translation_multi_simple_epoch's --lang-dict: mBART-50's ML50_langs.txt)")
    args = parser.parse_args(argv)
    try:
        print(shlex.join(checkpoint_options(args.checkpoint, args.only or "all", args.lang_dict)))
    except CheckpointOptionsError as error:
        sys.exit(f"{parser.prog}: error: {error}")


if __name__ == "__main__":
    main()
