"""``transformer_local_global``: Zheng et al.'s (2020) local and global context model, as a document system.

The model builds its encoder (``encoder.py``, section 4.1: each sentence of a chunk encoded by the
local layers, then the chunk by the global layer) and its decoder (``decoder.py``, section 4.2:
fairseq's, its self-attention also reading the previous target sentence) from its options
(``options.py``, where ``--global-layer`` places the global layer), and is the document system the
pipeline calls; this module also registers its architectures.

The ablations of the paper's Table 3, each removing one part (and its parameters):
``--no-document-encoding`` (its "Sent2Doc" row: each sentence's encoder reads that sentence
only, no segment embeddings and no global layer), ``--no-word-position-reset`` (word positions
count on through the chunk, as when "casting the whole source document as an input sequence"),
``--no-segment-embedding``, ``--no-relative-attention`` (the global layer's attention without its
per-distance vectors), ``--no-fusion-gate`` (the residual sum instead of the gate) and
``--no-transformer-xl-decoder`` (fairseq's decoder, which reads no previous sentence).

As a document system (``pipeline/system.py``): ``chunk_sentences`` cuts documents into chunks of at
most ``--chunk-sentences`` sentences (the paper's 20), each a document of its own (``pipeline/chunks.py``).
Training batches hold whole chunks, teacher-forced in one pass: the global layer reads each chunk's
rows, and a decoder layer reads the previous sentence's row of its own input. Decoding goes sentence
by sentence: the chunk is encoded once, at its first sentence, and a lane carries that encoding and
its previous sentence's decoder states (``carry.py``), those of the model's own translation.

Choices the paper leaves open, and why:

- Segment embeddings start at zero and the relative position terms of the decoder too, so a
  model started from a transformer translates one-sentence documents as the transformer does
  (the same translations; scores equal up to the order of float sums); the parameters the model
  adds (segment embeddings, global layer, relative position terms) are its context parameters,
  new in a transformer's checkpoint and trained at ``--context-lr`` by ``two_rate_inverse_sqrt``.
- The global layer is the paper's attention and gate, with no feed-forward block after it (the
  paper gives it none).
- ``--max-relative-sentences K`` (default: ``--max-chunk-sentences`` − 1, nothing clipped) clips the
  sentence distances of the global layer; ``--max-chunk-sentences`` (default ``--chunk-sentences``)
  is how many segment embeddings the model has, so it may decode with shorter chunks than it was
  trained with (``--model-overrides "{'chunk_sentences': 5}"``).
- Without the word-position reset, a word's position is its place in the chunk's words (each
  sentence's ``</s>`` counted), put in through the token embeddings as the segment embedding is.
- Pre-norm layers (``--encoder-normalize-before --decoder-normalize-before``, NLLB's; with
  ``--encoder-learned-pos --decoder-learned-pos --layernorm-embedding``, mBART's): the global layer
  is a pre-norm layer at the top of the stack, before the encoder's final LayerNorm (``encoder.py``,
  ``global_context.py``), and the decoder's self-attention reads the previous sentence's states
  normalised as the current one's (``target_context.py``); a chunk of one sentence is still
  translated as by the pre-norm sentence model.
"""
from typing import List, Optional

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerModel,
    base_architecture,
)
from torch import Tensor

from ...pipeline.carry import Carry
from ...pipeline.checkpoint_fit import CheckpointMismatchError, FitsTransformerCheckpoints
from ...pipeline.option_ranges import OptionError
from ...pipeline.sentence_encoding import SentenceEncoding
from ...pipeline.system import DocumentSystem, SentenceContext
from ...pipeline.teacher_forcing import teacher_forcing_input
from ..sizes import small_transformer
from .carry import ChunkCarry
from .decoder import LocalGlobalDecoder
from .encoder import LocalGlobalEncoder, previous_rows
from .options import LocalGlobalOptions, local_layers
from .target_context import PreviousTarget, aligned_right


@register_model("transformer_local_global")
class LocalGlobalTransformerModel(DocumentSystem, FitsTransformerCheckpoints, TransformerModel):
    """Local and global context over chunks of a document (Zheng et al., 2020)."""

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        LocalGlobalOptions.add_to(parser)

    @classmethod
    def build_model(cls, args, task):
        local_global_base(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        cfg.encoder.layers = local_layers(args)
        return LocalGlobalEncoder(cfg, src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        decoder = TransformerDecoderBase if args.no_transformer_xl_decoder else LocalGlobalDecoder
        return decoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

    @property
    def reads_previous_target(self) -> bool:
        return isinstance(self.decoder, LocalGlobalDecoder)

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        """As every system loads a checkpoint (``checkpoint_fit.py``); a plain transformer's with more
        encoder layers than this model has local ones is refused, saying to finetune with
        ``--global-layer extra``."""
        local = len(self.encoder.layers)
        plain = not any(key.startswith("encoder.global_context.") for key in state_dict)
        deeper = any(key.startswith(f"encoder.layers.{local}.") for key in state_dict)
        if plain and self.args.global_layer == "top" and deeper:
            raise CheckpointMismatchError(
                f"the checkpoint is a transformer's with more than {local} encoder layers, but with "
                f"--global-layer {self.args.global_layer} this model has {local} local layers (--encoder-layers "
                f"{local + 1}, the last of them the global layer's place): finetune from it with "
                "--global-layer extra, which keeps every layer of the checkpoint local and adds the global layer above"
            )
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def encode(self, src_tokens, src_lengths=None, return_all_hiddens: bool = False,
               token_embeddings: Optional[Tensor] = None, chunk_positions: Optional[Tensor] = None,
               chunk_ids: Optional[Tensor] = None, chunk_lengths: Optional[Tensor] = None,
               chunk_src_tokens: Optional[Tensor] = None, encoded: Optional[Tensor] = None,
               encoded_padding: Optional[Tensor] = None, target_memory: Optional[List[Tensor]] = None,
               target_memory_padding: Optional[Tensor] = None) -> SentenceEncoding:
        """The encoder's output, of whole chunks (``chunk_ids``, ``chunk_positions``; neither: every row
        a chunk of one sentence) or of sentences their chunk's encoding gave (``encoded``), and what
        the decoder reads of each row's previous sentence (``PreviousTarget``): its row among whole
        chunks, or the states carried from it (``target_memory``). ``chunk_lengths`` and
        ``chunk_src_tokens`` (a chunk's source, in the batch) were read by ``starting_carry``."""
        if encoded is None and chunk_ids is None:
            chunk_ids = torch.arange(src_tokens.size(0), device=src_tokens.device)
            chunk_positions = torch.zeros_like(chunk_ids)
        encoder_out = self.encoder(src_tokens, src_lengths, return_all_hiddens, token_embeddings,
                                   chunk_positions=chunk_positions, chunk_ids=chunk_ids, encoded=encoded,
                                   encoded_padding=encoded_padding)
        if not self.reads_previous_target:
            return SentenceEncoding(encoder_out)
        if encoded is None:
            return SentenceEncoding(encoder_out, PreviousTarget(previous_rows=previous_rows(chunk_ids, chunk_positions)))
        return SentenceEncoding(encoder_out, PreviousTarget(memory=target_memory, memory_padding=target_memory_padding))

    def chunk_sentences(self) -> int:
        return self.args.chunk_sentences

    def starting_carry(self, lanes, rows, net_input) -> Carry:
        """A chunk's first sentence: the chunk's source sentences, which the batch brings
        (``chunk_src_tokens``, ``chunk_lengths``), encoded, and no previous sentence. Whole chunks
        (training) carry nothing: their source is the batch's."""
        whole_chunks = "chunk_lengths" not in net_input and rows.numel() == net_input["src_tokens"].size(0)
        if whole_chunks:
            return Carry(lanes)
        lengths = net_input.get("chunk_lengths")
        if lengths is None or not bool(lengths[rows].gt(0).all()):
            raise ValueError("a row starts a chunk, but the batch does not give the chunk's source sentences")
        lengths = lengths[rows]
        encoded, encoded_padding = self.encoder.encode_given_chunks(net_input["chunk_src_tokens"], lengths)
        no_memory = [encoded.new_zeros(0, lanes.numel(), encoded.size(-1)) for _ in self.decoder.layers]
        return ChunkCarry(
            lanes, encoded, encoded_padding, no_memory if self.reads_previous_target else [],
            encoded_padding.new_ones(lanes.numel(), 0),
        )

    def sentence_context(self, carry, net_input, target_room) -> SentenceContext:
        """Whole chunks (training): the rows' chunks are their lanes. Sentence by sentence: each
        row's sentence as its chunk's encoding gave it (a chunk is encoded at its first
        sentence, ``starting_carry``), and the decoder states of its previous sentence."""
        if "chunk_positions" not in net_input:
            raise OptionError(
                "transformer_local_global reads its documents in chunks: translate with --task "
                "document_translation, whose batches say where each sentence stands in its chunk"
            )
        if not isinstance(carry, ChunkCarry):
            return SentenceContext(inputs={"chunk_ids": carry.lanes})
        everyone = torch.arange(carry.lanes.numel(), device=carry.lanes.device)
        positions = net_input["chunk_positions"]
        current, current_padding = carry.encoded[everyone, positions], carry.encoded_padding[everyone, positions]
        words = ~current_padding.all(0)
        inputs = {"encoded": current[:, words].transpose(0, 1), "encoded_padding": current_padding[:, words]}
        if self.reads_previous_target:
            inputs.update(target_memory=carry.memory, target_memory_padding=carry.memory_padding)
        return SentenceContext(inputs=inputs, kept=(carry.encoded, carry.encoded_padding))

    def carry_out(self, context, lanes, net_input, target, encoding, decoder_extra=None) -> Carry:
        """Each lane's chunk encoding and the decoder states of this sentence's translation (none
        with ``--no-transformer-xl-decoder``); without a teacher-forced pass (decoding), the decoder
        is run once over ``target`` to record them. Whole chunks carry nothing on."""
        if context.kept is None:
            return Carry(lanes)
        encoded, encoded_padding = context.kept
        if not self.reads_previous_target:
            return ChunkCarry(lanes, encoded, encoded_padding, [], encoded_padding.new_zeros(lanes.numel(), 0))
        if decoder_extra is None:
            _, decoder_extra = self.decode(
                teacher_forcing_input(target, self.decoder.dictionary), encoding, features_only=True
            )
        memory, memory_padding = [], None
        for states in decoder_extra["target_states"]:
            aligned, memory_padding = aligned_right(states, decoder_extra["target_padding"])
            memory.append(aligned)
        return ChunkCarry(lanes, encoded, encoded_padding, memory, memory_padding)


def local_global_base(args):
    """transformer-base's defaults, then the local+global options' (a value given is kept and checked)."""
    base_architecture(args)
    LocalGlobalOptions.apply(args)


@register_model_architecture("transformer_local_global", "transformer_local_global")
def transformer_local_global(args):
    """transformer-base (6+6 layers, 512/2048, 8 heads) with the global layer and the previous-sentence decoder."""
    local_global_base(args)


@register_model_architecture("transformer_local_global", "transformer_local_global_small")
def transformer_local_global_small(args):
    """A small model for CPUs and tests: 2+2 layers, 128/256, 4 heads."""
    small_transformer(args)
    local_global_base(args)
