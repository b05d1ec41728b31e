"""``transformer_associated_memory``: a transformer whose encoder output reads context sentences through the CAMN.

The Associated Memory Network (Jiang et al., section 4): the encoder is fairseq's; for a
sentence with context, its output is the Contextual Associated Memory Network's gated sum H of
fairseq's encoder output (H_source) and the context's contribution (H_context,
``context_network.py``), and the decoder, fairseq's own, reads H through its encoder-decoder
attention ("the output of the gate H is integrated into the encoder-decoder attention", Fig. 2).

Choices the paper leaves open, and why:

- Where: the top encoder layer. x' (eq. 5) is that layer's self-attention block output (after
  its LayerNorm, post-norm), which the top layer hands the encoder between its two blocks
  (``encoder.py``); H_source is that layer's feed-forward block output, fairseq's encoder
  output ("x'_i and a_i after the feed-forward operation as H_source and H_context"). LayerDrop
  and activation checkpointing are refused: each would hide or move x'.
- Pre-norm layers (``--encoder-normalize-before``: NLLB's and mBART's), where no LayerNorm ends a
  block and fairseq's encoder ends in one of its own (``encoder.layer_norm``): H_source is
  fairseq's encoder output, after that LayerNorm, the states the decoder reads, normalised as
  the paper's post-norm H_source is; the gate follows it, as the paper's gate feeds the decoder
  directly. x' is the residual stream at the paper's place, after the top layer's self-attention
  block (the input of its ``final_layer_norm``), through the CAMN's own
  LayerNorm (``source_layer_norm``, a context parameter, fresh: the plain normalisation): the
  feed-forward block's ``final_layer_norm`` normalises the same stream, but it is the pretrained
  block's, trained for its fc1. The CAMN's own blocks stay post-norm (c' and H_context come out
  of a LayerNorm, as x' and H_source do), and a row without context is exactly the pre-norm
  transformer.
- The context encoder's embeddings are the encoder's own (shared ``embed_tokens``, scaled by
  ``embed_scale``, dropout): the paper's context and source share a vocabulary, and a plain
  transformer's checkpoint then starts the context encoder from trained embeddings. The GRU
  reads them without positions (it orders the words itself), so without
  ``--layernorm-embedding``'s LayerNorm, which fairseq applies to the sum of the two; the
  self-attention alone reads the encoder's whole embedding, positions and that LayerNorm too.
- The context: the document's previous ``--context-sentences`` N source sentences (default 1,
  the paper's), from the lane's ``PreviousSentences`` carry (source side only); with
  ``--context-choice next`` its N next sentences (fewer at the document's end), with ``random``
  N sentences of the split's other documents (Table 4's other rows, and the context of Table
  3's last two ablations, "randomly from the training set"), both chosen by the data and
  brought in every batch (``pipeline/chosen_context.py``): the model declares the choice
  (``context_choice``), reads them in ``sentence_context`` and carries nothing. Section 4.3 says
  "at each training step, we compose all the context sentences of the source sentences in the
  batch with size m as the context sentences {c_j}", and eq. 14-15 weigh those m by β. Read
  literally, every sentence would read the m context sentences of its whole batch; the plugin
  reads a sentence's own N previous sentences as its m (which makes Table 4's "context sentence
  size N" its N, and is what the "Multiple Context Attention (m > 1)" paragraph weighs), since
  a batch's other sentences belong to other documents and to whatever batch they fell in,
  and decoding would then depend on the batching. A document's
  first sentence has none (its last one, with ``next``): its row skips the CAMN and its encoder
  output is H_source itself, exactly the plain transformer's, and nothing computed from another
  row's context or padding reaches it. ``--context-combination concatenate`` (default; the
  paper's only experiment, footnote 1) joins the N sentences into one sequence, the break
  between them the ``</s>`` every binarized sentence ends with (the paper's '####'), so the
  dictionary and a plain transformer's checkpoint serve unchanged; ``parallel`` reads each sentence as its own
  sequence and weighs them by eq. 14-15.
- The ablation without both the GRU and the inter-sentence attention is the paper's stack of
  N encoder layers (``--stacked-context-encoder``, ``context_network.py``); ``--no-context-rnn
  --no-inter-sentence-attention`` together keep the single attention block of the CAMN's
  context encoder instead.
- The context is cut, the sentence furthest from the current one first (the oldest previous
  one, the last next one, the last random one in the split's order), so that it and the
  current sentence fit ``--max-source-positions`` together (``ContextCuts``): the batches
  count the context with the sentence within the positions (``pipeline/data.py``), and without
  the GRU the context's embeddings take positions of their own.

The encoder's output dict is fairseq's, with ``encoder_out`` replaced by H; beam search and the
decoder need nothing else. A checkpoint of fairseq's plain ``transformer`` loads: the CAMN's
parameters (``encoder.context_network``) keep their fresh initialisation (logged, ``pipeline/
checkpoint_fit.py``) and ``two_rate_inverse_sqrt`` trains them at ``--context-lr``.
"""
from dataclasses import dataclass, field
from typing import List

import torch
from fairseq.data import data_utils
from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerModel, base_architecture
from torch import Tensor

from ...pipeline.chosen_context import CHOSEN_CONTEXTS, ContextChoice, chosen_sentences
from ...pipeline.checkpoint_fit import FitsTransformerCheckpoints
from ...pipeline.option_ranges import OptionError, Range
from ...pipeline.system import SentenceContext
from ..options import SystemOptions
from ..previous_sentences import PreviousSentencesSystem, unpadded
from ..sizes import small_transformer
from .encoder import AssociatedMemoryEncoder

CONTEXT_COMBINATIONS = ("concatenate", "parallel")
CONTEXT_CHOICES = ("previous", *CHOSEN_CONTEXTS)


@register_model("transformer_associated_memory")
class AssociatedMemoryTransformerModel(PreviousSentencesSystem, FitsTransformerCheckpoints, TransformerModel):
    """Transformer with a Contextual Associated Memory Network over context source sentences (Jiang et al.)."""

    def __init__(self, args, encoder, decoder):
        super().__init__(args, encoder, decoder)
        self.context_sentence_count = args.context_sentences
        self.context_combination = args.context_combination
        self.chosen = None
        if args.context_choice != "previous":
            self.chosen = ContextChoice(args.context_choice, args.context_sentences)

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        AssociatedMemoryOptions.add_to(parser)

    @classmethod
    def build_model(cls, args, task):
        associated_memory_base(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return AssociatedMemoryEncoder(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    def context_sentences(self):
        return (0, 0) if self.chosen is not None else (self.context_sentence_count, 0)

    def context_choice(self):
        return self.chosen

    def sentence_context(self, carry, net_input, target_room) -> SentenceContext:
        """Each row's previous source sentences (or those the batch brings, ``--context-choice``),
        cut to fit the positions beside the current one, as ``context_tokens`` (B, J, L) for the
        encoder; none where no row has any."""
        pad = self.encoder.padding_idx
        previous = carry.of_rows()
        if self.chosen is not None:
            sources, nearest_first = chosen_sentences(net_input, self.chosen, pad), True
        else:
            sources, nearest_first = [source for source, _ in previous], False
        contexts = self.sources_beside(sources, unpadded(net_input["src_tokens"], pad), nearest_first)
        inputs = {}
        if any(contexts):
            inputs["context_tokens"] = self.collate_context(contexts)
        return SentenceContext(inputs=inputs, kept=previous)

    def collate_context(self, contexts: List[List[Tensor]]) -> Tensor:
        """(B, J, L), right-padded: J = 1 joined sequence per row (concatenate) or the most
        sentences a row has (at most N), oldest first, a row's missing ones all padding (parallel)."""
        if self.context_combination == "concatenate":
            sequences, width = [[torch.cat(sentences)] if sentences else [] for sentences in contexts], 1
        else:
            sequences, width = contexts, max(len(sentences) for sentences in contexts)
        nothing = next(sentence for sentences in contexts for sentence in sentences)[:0]
        flat = [row[j] if j < len(row) else nothing for row in sequences for j in range(width)]
        tokens = data_utils.collate_tokens(flat, self.encoder.padding_idx, left_pad=False)
        return tokens.view(len(contexts), width, -1)


@dataclass
class AssociatedMemoryOptions(SystemOptions):
    context_sentences: int = field(
        default=1,
        metadata={"help": "source sentences the associated memory reads as a sentence's context "
                          "(--context-choice; 1 is the paper's)",
                  "range": Range(1)},
    )
    context_choice: ChoiceEnum(CONTEXT_CHOICES) = field(
        default="previous",
        metadata={"help": "which (Table 4): the sentence's previous ones in its document (the "
                          "paper's), its next ones (fewer at the document's end), or random ones of "
                          "the split's other documents, drawn from --seed, the epoch and the "
                          "sentence; next and random are read from a binarized split (not "
                          "fairseq-interactive or the hub)"},
    )
    context_combination: ChoiceEnum(CONTEXT_COMBINATIONS) = field(
        default="concatenate",
        metadata={"help": "several context sentences: joined into one sequence (concatenate, the "
                          "paper's experiment) or read one by one and weighed by their mean "
                          "attention score (parallel, eq. 14-15)"},
    )
    no_context_rnn: bool = field(
        default=False,
        metadata={"help": "ablation: the context encoder's self-attention reads the context's "
                          "embeddings (with positions) without the GRU"},
    )
    no_inter_sentence_attention: bool = field(
        default=False,
        metadata={"help": "ablation: every word reads the mean of the context encoder's states "
                          "instead of attending to them (Table 3's row: with --context-choice random)"},
    )
    stacked_context_encoder: bool = field(
        default=False,
        metadata={"help": "ablation without both the GRU and the inter-sentence attention: the "
                          "context's embeddings (with positions) go through a stack of --encoder-layers "
                          "encoder layers, attention and feed-forward, and every word reads the mean of "
                          "its output (implies --no-context-rnn and --no-inter-sentence-attention; Table "
                          "3's row: with --context-choice random)"},
    )

    @classmethod
    def complete(cls, args):
        if args.stacked_context_encoder:
            args.no_context_rnn = args.no_inter_sentence_attention = True

    @classmethod
    def check(cls, args):
        refused = {
            "--encoder-layerdrop": args.encoder_layerdrop > 0,
            "--checkpoint-activations": args.checkpoint_activations,
        }
        for option, given in refused.items():
            if given:
                raise OptionError(
                    f"transformer_associated_memory does not support {option}: the associated "
                    "memory reads the top encoder layer's self-attention block output"
                )


def associated_memory_base(args):
    """transformer-base's defaults, then the associated memory's (a value given is kept and checked)."""
    base_architecture(args)
    AssociatedMemoryOptions.apply(args)


@register_model_architecture("transformer_associated_memory", "transformer_associated_memory")
def transformer_associated_memory(args):
    """transformer-base (6+6 layers, 512/2048, 8 heads) with the associated memory on the previous source sentence."""
    associated_memory_base(args)


@register_model_architecture("transformer_associated_memory", "transformer_associated_memory_small")
def transformer_associated_memory_small(args):
    """A small model for CPUs and tests: 2+2 layers, 128/256, 4 heads."""
    small_transformer(args)
    associated_memory_base(args)
