"""The local+global model's options (``LocalGlobalOptions``), and how many encoder layers are local (``local_layers``).

``--global-layer`` places the global layer: ``top`` (the default, the paper's) makes the N-th of
the ``--encoder-layers`` N layers the global layer, so N−1 are local; ``extra`` keeps all N local
and adds the global layer above them (N+1 layers), so that a plain N-layer ``transformer``
checkpoint fills every local layer and the decoder (``--finetune-from-model``). ``extra`` is also
the layout of every checkpoint saved before the option existed: its saved options lack it, and
``LocalGlobalOptions.apply`` gives it ``extra``, so it loads and translates as it did.

The model (``model.py``) declares these options and builds its encoder (``encoder.py``) with
``local_layers`` layers; the ablation flags leave parts of the encoder and decoder out.
"""
from dataclasses import dataclass, field
from typing import Optional

from fairseq.dataclass import ChoiceEnum

from ...pipeline.option_ranges import OptionError, Range
from ..options import SystemOptions

GLOBAL_LAYER_PLACES = ("top", "extra")

MOST_CHUNK_SENTENCES = 1000  # a chunk goes whole into one training batch; the paper's have 20


def local_layers(args) -> int:
    """The local encoder's layers: ``--encoder-layers`` less the global layer's place (``--global-layer top``)."""
    return args.encoder_layers - 1 if args.global_layer == "top" else args.encoder_layers


@dataclass
class LocalGlobalOptions(SystemOptions):
    chunk_sentences: int = field(
        default=20,
        metadata={"help": "documents are translated in chunks of at most this many sentences, the "
                          "encoder reading a whole chunk (20 is the paper's)",
                  "range": Range(1, MOST_CHUNK_SENTENCES)},
    )
    max_chunk_sentences: Optional[int] = field(
        default=None,
        metadata={"help": "segment embeddings the model has: the longest chunk it can read "
                          "(default: --chunk-sentences)",
                  "range": Range(1, MOST_CHUNK_SENTENCES)},
    )
    max_relative_sentences: Optional[int] = field(
        default=None,
        metadata={"help": "the global layer's relative attention clips sentence distances to at most "
                          "this many either way, at most --max-chunk-sentences minus 1 (the default: "
                          "nothing clipped)",
                  "range": Range(0)},
    )

    global_layer: ChoiceEnum(GLOBAL_LAYER_PLACES) = field(
        default="top",
        metadata={"help": "where the global layer goes: top (the paper's): the last of the "
                          "--encoder-layers layers is the global layer, the others local; extra: all "
                          "--encoder-layers layers local and the global layer above them, so that a "
                          "transformer checkpoint with as many layers fills them (finetuning from one)"},
    )
    no_document_encoding: bool = field(
        default=False,
        metadata={"help": "ablation: each sentence's encoder reads that sentence only (no segment "
                          "embeddings, no global layer)"},
    )
    no_word_position_reset: bool = field(
        default=False,
        metadata={"help": "ablation: word positions count on through the chunk instead of restarting "
                          "at each sentence"},
    )
    no_segment_embedding: bool = field(
        default=False,
        metadata={"help": "ablation: no embedding of the sentence's index in its chunk"},
    )
    no_relative_attention: bool = field(
        default=False,
        metadata={"help": "ablation: the global layer's attention has no vectors per sentence distance"},
    )
    no_fusion_gate: bool = field(
        default=False,
        metadata={"help": "ablation: the global layer adds its attention to the local representation "
                          "(residual sum) instead of gating the two"},
    )
    no_transformer_xl_decoder: bool = field(
        default=False,
        metadata={"help": "ablation: the decoder reads no previous target sentence (fairseq's decoder)"},
    )

    @classmethod
    def apply(cls, args):
        """As every system's, except for a checkpoint saved before ``--global-layer`` existed, whose
        global layer is above all its layers: it gets ``extra``. A command line not giving the option
        lacks it too (fairseq leaves a model option not given out of the namespace), so the two are
        told apart by fairseq's ``_name``, which a model config gets once it is saved (or about to
        be: fairseq-train builds from the converted config, after this ran on its command line)."""
        if hasattr(args, "_name") and not hasattr(args, "global_layer"):
            args.global_layer = "extra"
        super().apply(args)

    @classmethod
    def complete(cls, args):
        if args.max_chunk_sentences is None:
            args.max_chunk_sentences = args.chunk_sentences
        if args.max_relative_sentences is None:
            args.max_relative_sentences = args.max_chunk_sentences - 1

    @classmethod
    def check(cls, args):
        if args.chunk_sentences > args.max_chunk_sentences:
            raise OptionError(
                f"--chunk-sentences {args.chunk_sentences}: give 1 or more, at most --max-chunk-sentences "
                f"{args.max_chunk_sentences} (the segment embeddings the model has)"
            )
        if args.max_relative_sentences > args.max_chunk_sentences - 1:
            raise OptionError(
                f"--max-relative-sentences {args.max_relative_sentences}: give 0 to "
                f"{args.max_chunk_sentences - 1} (--max-chunk-sentences minus 1: a chunk holds no "
                "sentences further apart)"
            )
        if args.global_layer == "top" and args.encoder_layers < 2:
            place = ("is the global layer's place, which --no-document-encoding leaves out" if args.no_document_encoding
                     else "is the global layer")
            raise OptionError(
                f"--encoder-layers {args.encoder_layers} with --global-layer top leaves no local layer (the last "
                f"layer {place}): give --encoder-layers 2 or more, or --global-layer extra"
            )
        if getattr(args, "checkpoint_activations", False) or getattr(args, "offload_activations", False):
            raise OptionError(
                "transformer_local_global does not support --checkpoint-activations: its decoder "
                "layers read the previous sentence given per forward call"
            )
        if getattr(args, "cross_self_attention", False):
            raise OptionError("transformer_local_global does not support --cross-self-attention")
        if getattr(args, "decoder_layerdrop", 0) > 0:
            raise OptionError(
                "transformer_local_global does not support --decoder-layerdrop: each decoder layer reads what "
                "the same layer read of the previous sentence"
            )
