"""``transformer_context_concat``: fairseq's transformer reading earlier sentences concatenated to the current one.

The concatenation baselines of document-level translation (Tiedemann & Scherrer, 2017: "2-to-1"
reads the previous source sentence too, "2-to-2" also the previous target sentence), as K-to-1
and K-to-K models:

- ``--source-context K``: the encoder reads the document's K previous source sentences, then the
  current one, as one sequence; the decoder attends to all of it.
- ``--target-context K``: the decoder's input starts with the K previous target sentences, a
  forced prefix: the loss and the output cover the current sentence only.

The break token between sentences is the end of sentence ``</s>`` every binarized sentence ends
with, so the dictionary, and a plain transformer's checkpoint, serve unchanged. Source:
``ctx1 </s> ctx2 </s> current </s>``; decoder input: ``</s> tctx1 </s> tctx2 </s>`` then the
current translation (the leading ``</s>`` is fairseq's start of output, and the last context
sentence's ``</s>`` predicts the first word). Sentences with language tokens (``pipeline/
language_tokens.py``) are concatenated as the data holds them, and the prefix starts with the
token the decoder input starts with (mBART's ``[de]``, which also ends each target sentence). With no context (a document's first sentence, or
K = 0) the inputs are exactly the plain transformer's, so the model computes what fairseq's
``transformer`` with the same weights computes, and a ``transformer`` checkpoint loads as is.
The layers are fairseq's own, so this holds for every layout fairseq builds: post-norm, pre-norm
(``--encoder-normalize-before --decoder-normalize-before``, NLLB's) and mBART's (with
``--encoder-learned-pos --decoder-learned-pos --layernorm-embedding``); the model changes only
what the encoder and decoder read.

Where the context comes from (``pipeline/system.py``): each lane carries its document's previous
sentences (``systems/previous_sentences.py``), the target side as the reference in training and
as the model's own translation in decoding (the reference with ``--context-from reference``).

Positions: the context is cut, oldest sentence first, so that context and current sentence fit
the model's positions: ``--max-source-positions`` for the source, and for the target
``--max-target-positions`` less the room the current translation may take (its reference's
length in training, the generator's length limit in decoding). The current sentence is never
cut (the task refuses a sentence longer than the positions). Cuts are counted in
``context_cuts`` and logged with the count at the 1st, 10th, 100th, ... cut (``ContextCuts``).

Decoding: the target prefix is fed once per sentence, at the first beam step, filling the
decoder's incremental state (self-attention keys and values of every prefix token; padded ones
masked); each later step feeds one token, as fairseq does. Prefixes differ in length from row to
row, so positions count a row's real tokens, in decoding as in training. Both steps are the
decoder's own pass over fairseq's layers (``pipeline/transformer_pass.py``), which hands the layers the
incremental state and the positions explicitly.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq.data import data_utils
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
    base_architecture,
)
from torch import Tensor

from ...pipeline.option_ranges import OptionError, Range
from ...pipeline.sentence_encoding import SentenceEncoding
from ...pipeline.system import SentenceContext
from ...pipeline.transformer_pass import ReadingDecoder, decoder_features
from ..options import SystemOptions
from ..previous_sentences import PreviousSentencesSystem, unpadded
from ..sizes import small_transformer


@dataclass(frozen=True, eq=False)
class TargetPrefix:
    """The previous target sentences the decoder reads before the current one: (B, P) tokens,
    right-padded, each row starting with the token decoding starts from."""

    tokens: Tensor

    def reordered(self, new_order: Tensor) -> "TargetPrefix":
        return TargetPrefix(self.tokens.index_select(0, new_order))


class ContextConcatEncoder(TransformerEncoderBase):
    def forward(
        self,
        src_tokens,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        source_with_context: Optional[Tensor] = None,
    ):
        """fairseq's encoder over ``source_with_context`` (the current sentences after their
        context, left-padded) when given, else over ``src_tokens``."""
        if source_with_context is not None:
            src_tokens, src_lengths, token_embeddings = source_with_context, None, None
        return super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)


class ContextConcatDecoder(ReadingDecoder, TransformerDecoderBase):
    def extract_features(
        self,
        prev_output_tokens,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state=None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        reads: Optional[TargetPrefix] = None,
    ):
        """fairseq's decoder features of the current sentence, after the target prefix ``reads``
        (if any): features and attention have one row per token of ``prev_output_tokens``
        (``inner_states`` cover the prefix too)."""
        options = dict(
            full_context_alignment=full_context_alignment,
            alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
        )
        if reads is None:
            return super().extract_features(prev_output_tokens, encoder_out, incremental_state, **options)
        prefix = torch.cat([prev_output_tokens[:, :1], reads.tokens[:, 1:]], dim=1)  # the token decoding starts from
        prefix_lengths = prefix.ne(self.padding_idx).sum(1)
        if incremental_state is None:
            tokens = self._after_prefix(prefix, prev_output_tokens)
            features, extra = super().extract_features(tokens, encoder_out, None, **options)
            return self._rows_from(features, extra, prefix_lengths - 1, prev_output_tokens.size(1))
        if prev_output_tokens.size(1) == 1:  # the first step: the prefix predicts the first word
            features, extra, _ = decoder_features(self, prefix, prefix.size(1), encoder_out, incremental_state,
                                                  positions_count_real_tokens=True, **options)
            return self._rows_from(features, extra, prefix_lengths - 1, 1)
        tokens = torch.cat([prefix, prev_output_tokens[:, 1:]], dim=1)
        features, extra, _ = decoder_features(self, tokens, 1, encoder_out, incremental_state,
                                              positions_count_real_tokens=True, **options)
        return features, extra

    def _after_prefix(self, prefix: Tensor, prev_output_tokens: Tensor) -> Tensor:
        """Each row's prefix, then its ``prev_output_tokens`` without their leading ``</s>``,
        right-padded."""
        if not bool(prev_output_tokens[:, 0].ne(self.padding_idx).all()):
            raise OptionError(
                "transformer_context_concat's target context needs right-padded targets (fairseq's "
                "default); leave out --left-pad-target True"
            )
        rows = [
            torch.cat([own_prefix, current])
            for own_prefix, current in zip(
                unpadded(prefix, self.padding_idx), unpadded(prev_output_tokens[:, 1:], self.padding_idx)
            )
        ]
        return data_utils.collate_tokens(rows, self.padding_idx, self.dictionary.eos())

    @staticmethod
    def _rows_from(features: Tensor, extra: dict, first: Tensor, count: int):
        """``count`` consecutive positions of each row's features (and attention), from ``first``.
        Positions past the batch's width, which only a shorter row's padding asks for, read the
        last column instead; whatever such positions hold, their targets are padding."""
        columns = (first.unsqueeze(1) + torch.arange(count, device=features.device)).clamp(max=features.size(1) - 1)
        features = features.gather(1, columns.unsqueeze(-1).expand(-1, -1, features.size(-1)))
        attention = extra["attn"][0]
        if attention is not None:
            extra["attn"] = [attention.gather(1, columns.unsqueeze(-1).expand(-1, -1, attention.size(-1)))]
        return features, extra


@register_model("transformer_context_concat")
class ContextConcatTransformerModel(PreviousSentencesSystem, TransformerModel):
    """Transformer reading the previous sentences of the document concatenated to the current one."""

    def __init__(self, args, encoder, decoder):
        super().__init__(args, encoder, decoder)
        self.source_context = args.source_context
        self.target_context = args.target_context

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        ContextConcatOptions.add_to(parser)

    @classmethod
    def build_model(cls, args, task):
        context_concat_base(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return ContextConcatEncoder(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return ContextConcatDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

    def context_sentences(self):
        return self.source_context, self.target_context

    def encode(self, src_tokens, src_lengths, return_all_hiddens: bool = False,
               token_embeddings: Optional[Tensor] = None, source_with_context: Optional[Tensor] = None,
               target_prefix: Optional[Tensor] = None) -> SentenceEncoding:
        """The encoder's output over the source (after its context, where given), and the target
        prefix for the decoder to read."""
        encoder_out = self.encoder(src_tokens, src_lengths, return_all_hiddens, token_embeddings,
                                   source_with_context=source_with_context)
        return SentenceEncoding(encoder_out, None if target_prefix is None else TargetPrefix(target_prefix))

    def sentence_context(self, carry, net_input, target_room) -> SentenceContext:
        """The current sentences after their documents' previous ones (source), and the
        previous translations as the decoder's prefix (target), each cut to the positions."""
        previous = carry.of_rows()
        if not any(source or target for source, target in previous):
            return SentenceContext(kept=previous)  # no row has context: the plain transformer's inputs
        pad, eos = self.encoder.padding_idx, self.decoder.dictionary.eos()
        inputs = {}
        if self.source_context:
            sentences = unpadded(net_input["src_tokens"], pad)
            contexts = self.sources_beside([source for source, _ in previous], sentences)
            rows = [torch.cat([*context, sentence]) for context, sentence in zip(contexts, sentences)]
            inputs["source_with_context"] = data_utils.collate_tokens(rows, pad, eos, left_pad=True)
        if self.target_context:
            start = net_input["src_tokens"].new_full((1,), eos)  # the decoder puts its input's first token here
            positions = self.decoder.max_positions()
            bound = (
                f"the decoder's {positions} positions (--max-target-positions) less the {target_room} "
                "the translation may take (the reference's length in training; in decoding the "
                "generator's length limit, --max-len-a / --max-len-b)"
            )
            remedy = "lower --max-len-a / --max-len-b when decoding, or raise --max-target-positions"
            rows = [
                torch.cat([start, *self.context_cuts.fitting(context, positions - target_room - 1, bound, remedy)])
                for _, context in previous
            ]
            inputs["target_prefix"] = data_utils.collate_tokens(rows, pad, eos, left_pad=False)
        return SentenceContext(inputs=inputs, kept=previous)


@dataclass
class ContextConcatOptions(SystemOptions):
    source_context: int = field(
        default=1,
        metadata={"help": "previous source sentences of the document the encoder reads before the current one",
                  "range": Range(0)},
    )
    target_context: int = field(
        default=0,
        metadata={"help": "previous target sentences of the document the decoder reads as a forced "
                          "prefix of the current translation",
                  "range": Range(0)},
    )


def context_concat_base(args):
    """transformer-base's defaults, then the context options' (a value given is kept and checked)."""
    base_architecture(args)
    ContextConcatOptions.apply(args)


@register_model_architecture("transformer_context_concat", "transformer_context_concat")
def transformer_context_concat(args):
    """transformer-base (6+6 layers, 512/2048, 8 heads) reading the previous source sentence (2-to-1)."""
    context_concat_base(args)


@register_model_architecture("transformer_context_concat", "transformer_context_concat_small")
def transformer_context_concat_small(args):
    """A small model for CPUs and tests: 2+2 layers, 128/256, 4 heads."""
    small_transformer(args)
    context_concat_base(args)
