"""``transformer_local_global``: Zheng et al.'s (2020) local and global context model, as a document system.

Encoder (section 4.1): "the local encoder leverages N−1 stacked layers", then "an additional layer
on the top of the local context encoding layers" (N layers in all). Every sentence of a chunk is
encoded on its own by fairseq's encoder, whose layers are the local layers (the local context
``h^L``: attention within the sentence, word positions restarting at each sentence), its input
adding a learned embedding of the sentence's index in the chunk; on top, the global layer reads
all words of the chunk (``global_context.py``). A chunk of one sentence skips the global layer:
its words keep ``h^L`` (the paper's "global encoding will be dynamically disabled"), so a
one-sentence document, and every sentence with ``--chunk-sentences 1``, is translated as by a
sentence model.

``--global-layer`` places the global layer: ``top`` (the default, the paper's) makes the N-th of
the ``--encoder-layers`` N layers the global layer, so N−1 are local; ``extra`` keeps all N local
and adds the global layer above them (N+1 layers), so that a plain N-layer ``transformer``
checkpoint fills every local layer and the decoder (``--finetune-from-model``). ``extra`` is also
the layout of every checkpoint saved before the option existed: its saved options lack it, and
``LocalGlobalOptions.apply`` gives it ``extra``, so it loads and translates as it did.

Decoder (section 4.2): fairseq's decoder whose self-attention also reads the previous target
sentence of the chunk, Transformer-XL style, with no gradient into it (``target_context.py``).

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
"""
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
    base_architecture,
)
from fairseq.modules.sinusoidal_positional_embedding import SinusoidalPositionalEmbedding
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase
from torch import Tensor, nn

from ...pipeline.carry import Carry
from ...pipeline.option_ranges import OptionError, Range
from ...pipeline.system import DocumentSystem, SentenceContext
from ...pipeline.teacher_forcing import teacher_forcing_input
from ..checkpoint_fit import CheckpointMismatchError, FitsTransformerCheckpoints
from ..context_parameters import tag_context_parameters
from ..options import SystemOptions
from ..sizes import small_transformer
from .carry import ChunkCarry, padded_to
from .global_context import ChunkWords, GlobalContextLayer, sentence_attention
from .target_context import PreviousSentence, PreviousSentenceAttention, aligned_right


def previous_rows(chunk_ids: Tensor, positions: Tensor) -> Tensor:
    """(B,): for each row, the row holding the previous sentence of its chunk, or -1 at a chunk's start."""
    same_chunk = chunk_ids.unsqueeze(1) == chunk_ids.unsqueeze(0)
    is_previous = same_chunk & (positions.unsqueeze(0) == positions.unsqueeze(1) - 1)
    found = is_previous.any(1)
    return torch.where(found, is_previous.long().argmax(1), torch.full_like(positions, -1))


GLOBAL_LAYER_PLACES = ("top", "extra")


class EncodedChunks(NamedTuple):
    """The encoder's output for sentence rows of chunks: ``states`` (S, B, C) and ``padding`` (B, S);
    and, where a chunk of several sentences went through the global layer, its attention weights
    (chunks, heads, W, W) with the rows' ``words`` laid out in chunks (``global_context.py``)."""

    states: Tensor
    padding: Tensor
    attention: Optional[Tensor]
    words: Optional[ChunkWords]


class LocalGlobalEncoder(TransformerEncoderBase):
    """fairseq's encoder, whose layers are the local layers (``cfg.encoder.layers`` of them), with the
    segment embeddings and the global layer; ``cfg``'s ablation flags leave parts out."""

    def __init__(self, cfg, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        embed_dim = cfg.encoder.embed_dim
        self.reads_document = not cfg.no_document_encoding
        self.resets_word_positions = not cfg.no_word_position_reset
        self.segment_embeddings = None
        self.global_context = None
        if self.reads_document:
            if not cfg.no_segment_embedding:
                self.segment_embeddings = nn.Embedding(cfg.max_chunk_sentences, embed_dim)
                nn.init.zeros_(self.segment_embeddings.weight)
                tag_context_parameters(self.segment_embeddings)
            self.global_context = GlobalContextLayer(
                embed_dim, cfg.encoder.attention_heads, cfg.max_relative_sentences, cfg.dropout,
                cfg.attention_dropout, relative=not cfg.no_relative_attention, gated=not cfg.no_fusion_gate,
            )
            tag_context_parameters(self.global_context)

    def encode_chunks(self, src_tokens: Tensor, chunk_ids: Tensor, positions: Tensor) -> EncodedChunks:
        """Sentences (rows of ``src_tokens``) of chunks: row r is sentence ``positions[r]`` of chunk
        ``chunk_ids[r]``. The local encoding, fused with the global one in chunks of several
        sentences (each sentence alone with ``--no-document-encoding``)."""
        if not self.reads_document:
            local = super().forward(src_tokens)
            return EncodedChunks(local["encoder_out"][0], local["encoder_padding_mask"][0], None, None)
        words = ChunkWords.of(src_tokens.eq(self.padding_idx), chunk_ids, positions)
        token_embeddings = self.embed_tokens(src_tokens)
        if self.segment_embeddings is not None:
            if int(positions.max()) >= self.segment_embeddings.num_embeddings:
                raise OptionError(
                    f"a chunk holds sentence {int(positions.max()) + 1}, but the model has segment embeddings for "
                    f"{self.segment_embeddings.num_embeddings} (--max-chunk-sentences): decode with "
                    "--chunk-sentences at most that"
                )
            token_embeddings = token_embeddings + self.segment_embeddings(positions).unsqueeze(1) / self.embed_scale
        if not self.resets_word_positions and self.embed_positions is not None:
            shift = self.chunk_position_shift(src_tokens, words.offsets)
            token_embeddings = token_embeddings + shift / self.embed_scale
        local = super().forward(src_tokens, token_embeddings=token_embeddings)
        states, padding = local["encoder_out"][0], local["encoder_padding_mask"][0]
        several = words.sentences > 1
        attention = None
        if bool(several.any()):
            chunked = words.gather(states)
            fused, attention = self.global_context(chunked, words.segments, words.padding)
            states = words.scatter(torch.where(several[:, None, None], fused, chunked), states)
        return EncodedChunks(states, padding, attention, words)

    def chunk_position_shift(self, src_tokens: Tensor, offsets: Tensor) -> Tensor:
        """(B, S, C): what moves each word's position embedding from its place in its sentence to its
        place in its chunk, ``offsets[r]`` words further (``--no-word-position-reset``)."""
        own = utils.make_positions(src_tokens, self.padding_idx)
        in_chunk = torch.where(src_tokens.ne(self.padding_idx), own + offsets.unsqueeze(1), own)
        if isinstance(self.embed_positions, SinusoidalPositionalEmbedding):
            table = SinusoidalPositionalEmbedding.get_embedding(
                int(in_chunk.max()) + 1, self.embed_positions.embedding_dim, self.padding_idx
            ).to(device=src_tokens.device, dtype=self.embed_tokens.weight.dtype)
            return table[in_chunk] - table[own]
        table = self.embed_positions.weight
        if int(in_chunk.max()) >= table.size(0):
            raise OptionError(
                f"--no-word-position-reset: a chunk of {int(in_chunk.max()) - self.padding_idx} words goes past "
                f"the {table.size(0) - self.padding_idx - 1} learned positions (--max-source-positions): give "
                "shorter --chunk-sentences, or sinusoidal positions"
            )
        return F.embedding(in_chunk, table, self.padding_idx) - F.embedding(own, table, self.padding_idx)

    def sentence_attention(self, src_tokens: Tensor) -> Tensor:
        """The global layer's sentence-to-sentence weights (the paper's Figure 4) of one chunk whose
        sentences, in order, are the rows of ``src_tokens``: (N, N), row k sentence k's weights
        over the chunk's sentences (``global_context.sentence_attention``)."""
        if self.global_context is None:
            raise OptionError("the model was trained with --no-document-encoding: it has no global layer to read")
        rows = src_tokens.size(0)
        chunk_ids = torch.zeros(rows, dtype=torch.long, device=src_tokens.device)
        encoded = self.encode_chunks(src_tokens, chunk_ids, torch.arange(rows, device=src_tokens.device))
        if encoded.attention is None:  # one sentence: no global layer ran
            return src_tokens.new_ones(1, 1, dtype=torch.float)
        return sentence_attention(encoded.attention, encoded.words.segments, encoded.words.padding, rows)[0]

    def encode_given_chunks(self, chunk_src_tokens: Tensor, chunk_lengths: Tensor):
        """The chunks whose sentences are the rows of ``chunk_src_tokens``, ``chunk_lengths[i]`` rows
        for chunk i: (encoded (chunks, N, S, C), padding (chunks, N, S))."""
        chunk_ids = torch.repeat_interleave(torch.arange(chunk_lengths.numel(), device=chunk_lengths.device), chunk_lengths)
        starts = torch.repeat_interleave(torch.cumsum(chunk_lengths, 0) - chunk_lengths, chunk_lengths)
        positions = torch.arange(chunk_ids.numel(), device=chunk_ids.device) - starts
        states, padding, _, _ = self.encode_chunks(chunk_src_tokens, chunk_ids, positions)
        shape = (chunk_lengths.numel(), int(chunk_lengths.max()), states.size(0))
        encoded = states.new_zeros(*shape, states.size(-1))
        encoded[chunk_ids, positions] = states.transpose(0, 1)
        encoded_padding = torch.ones(shape, dtype=torch.bool, device=padding.device)
        encoded_padding[chunk_ids, positions] = padding
        return encoded, encoded_padding

    def forward(
        self,
        src_tokens,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        chunk_positions: Optional[Tensor] = None,
        chunk_ids: Optional[Tensor] = None,
        chunk_lengths: Optional[Tensor] = None,
        chunk_src_tokens: Optional[Tensor] = None,
        encoded: Optional[Tensor] = None,
        encoded_padding: Optional[Tensor] = None,
        target_memory: Optional[List[Tensor]] = None,
        target_memory_padding: Optional[Tensor] = None,
    ):
        """The encoder output of one batch of sentences, and what the decoder reads of the
        previous sentence, in one of two ways:

        - whole chunks (training): the rows are the sentences of chunks (``chunk_ids``, and
          ``chunk_positions`` in them); they are encoded here, and ``previous_rows`` tells the
          decoder where each row's previous sentence is;
        - sentence by sentence: ``encoded`` (S, B, C) and ``encoded_padding`` are the rows'
          sentences as their chunk's encoding gave them (``sentence_context``), and
          ``target_memory`` the decoder states of each row's previous sentence. ``chunk_lengths`` and
          ``chunk_src_tokens`` were read there.

        Without either, every row is a chunk of one sentence."""
        if encoded is None:
            if chunk_ids is None:
                chunk_ids = torch.arange(src_tokens.size(0), device=src_tokens.device)
                chunk_positions = torch.zeros_like(chunk_ids)
            encoded, encoded_padding, _, _ = self.encode_chunks(src_tokens, chunk_ids, chunk_positions)
            rows = [previous_rows(chunk_ids, chunk_positions)]
        else:
            rows = []
        return {
            "encoder_out": [encoded],
            "encoder_padding_mask": [encoded_padding],
            "encoder_embedding": [],
            "encoder_states": [],
            "src_tokens": [],
            "src_lengths": [],
            "previous_rows": rows,
            "target_memory": [] if target_memory is None else list(target_memory),
            "target_memory_padding": [] if target_memory_padding is None else [target_memory_padding],
        }

    def reorder_encoder_out(self, encoder_out, new_order):
        """Beam search moves rows; the previous sentence's states move with them."""
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        reordered["previous_rows"] = []
        reordered["target_memory"] = [states.index_select(1, new_order) for states in encoder_out["target_memory"]]
        reordered["target_memory_padding"] = [p.index_select(0, new_order) for p in encoder_out["target_memory_padding"]]
        return reordered


class LocalGlobalDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer whose self-attention reads the previous sentence too."""

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        return PreviousSentenceAttention(embed_dim, cfg.decoder.attention_heads, cfg.attention_dropout)


class LocalGlobalDecoder(TransformerDecoderBase):
    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn, output_projection=output_projection)
        for index, layer in enumerate(self.layers):
            layer.self_attn.layer = index
            tag_context_parameters(layer.self_attn.relative_positions)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return LocalGlobalDecoderLayer(cfg, no_encoder_attn)

    @contextmanager
    def _reading(self, previous: PreviousSentence):
        attentions = [layer.self_attn for layer in self.layers]
        for attention in attentions:
            attention.previous = previous
        try:
            yield
        finally:
            for attention in attentions:
                attention.previous = None

    def extract_features(
        self,
        prev_output_tokens,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state=None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        """fairseq's decoder features, each self-attention reading the previous sentence that came
        with ``encoder_out``. On whole sentences (no ``incremental_state``) ``extra`` gains
        ``target_states`` (each layer's input) and ``target_padding``, for the next sentence."""
        encoder_out = encoder_out or {}
        rows, memory, memory_padding = (encoder_out.get(key) or None for key in (
            "previous_rows", "target_memory", "target_memory_padding"))
        previous = PreviousSentence(
            memory=memory, memory_padding=memory_padding[0] if memory_padding else None,
            previous_rows=rows[0] if rows else None, record=incremental_state is None,
        )
        with self._reading(previous):
            features, extra = super().extract_features(
                prev_output_tokens, encoder_out, incremental_state=incremental_state,
                full_context_alignment=full_context_alignment, alignment_layer=alignment_layer,
                alignment_heads=alignment_heads,
            )
        if previous.record:
            extra["target_states"] = [previous.states[index] for index in range(len(self.layers))]
            extra["target_padding"] = prev_output_tokens.eq(self.padding_idx)
        return features, extra


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

    def chunk_sentences(self) -> int:
        return self.args.chunk_sentences

    def sentence_context(self, carry, lanes, continues, net_input, target_room) -> SentenceContext:
        """Whole chunks (training): the rows' chunks are their lanes. Sentence by sentence: each
        row's sentence as its chunk's encoding gave it (a chunk is encoded at its first
        sentence, from ``chunk_src_tokens``), and the decoder states of its previous sentence."""
        if "chunk_positions" not in net_input:
            raise OptionError(
                "transformer_local_global reads its documents in chunks: translate with --task "
                "document_translation, whose batches say where each sentence stands in its chunk"
            )
        positions = net_input["chunk_positions"]
        if carry is None and "chunk_lengths" not in net_input:
            return SentenceContext(inputs={"chunk_ids": lanes})
        rows = lanes.numel()
        if continues is None:
            continues = torch.full((rows,), carry is not None, dtype=torch.bool, device=lanes.device)
        starting = (~continues).nonzero().squeeze(1)
        continuing = continues.nonzero().squeeze(1)
        parts = []  # (rows, encoded, padding)
        if continuing.numel():
            parts.append((continuing, carry.encoded, carry.encoded_padding))
        if starting.numel():
            lengths = net_input.get("chunk_lengths")
            if lengths is None or not bool(lengths[starting].gt(0).all()):
                raise ValueError("a row starts a chunk, but the batch does not give the chunk's source sentences")
            parts.append((starting, *self.encoder.encode_given_chunks(net_input["chunk_src_tokens"], lengths[starting])))
        sentences = max(encoded.size(1) for _, encoded, _ in parts)
        width = max(encoded.size(2) for _, encoded, _ in parts)
        first = parts[0][1]
        encoded = first.new_zeros(rows, sentences, width, first.size(-1))
        encoded_padding = torch.ones(rows, sentences, width, dtype=torch.bool, device=first.device)
        for part_rows, part, part_padding in parts:
            encoded[part_rows] = padded_to(padded_to(part, 1, sentences, 0.0), 2, width, 0.0)
            encoded_padding[part_rows] = padded_to(padded_to(part_padding, 1, sentences, True), 2, width, True)
        everyone = torch.arange(rows, device=lanes.device)
        current, current_padding = encoded[everyone, positions], encoded_padding[everyone, positions]
        words = ~current_padding.all(0)
        inputs = {"encoded": current[:, words].transpose(0, 1), "encoded_padding": current_padding[:, words]}
        if self.reads_previous_target:
            memory_length = carry.memory_padding.size(1) if continuing.numel() else 0
            memory = [first.new_zeros(memory_length, rows, first.size(-1)) for _ in self.decoder.layers]
            memory_padding = torch.ones(rows, memory_length, dtype=torch.bool, device=first.device)
            if continuing.numel():
                for layer, states in enumerate(carry.memory):
                    memory[layer][:, continuing] = states
                memory_padding[continuing] = carry.memory_padding
            inputs.update(target_memory=memory, target_memory_padding=memory_padding)
        return SentenceContext(inputs=inputs, kept=(encoded, encoded_padding))

    def carry_out(self, context, lanes, net_input, target, encoder_out, decoder_extra=None) -> Carry:
        """Each lane's chunk encoding and the decoder states of this sentence's translation (none
        with ``--no-transformer-xl-decoder``); without a teacher-forced pass (decoding), the decoder
        is run once over ``target`` to record them. Whole chunks carry nothing on."""
        if context.kept is None:
            return Carry(lanes)
        encoded, encoded_padding = context.kept
        if not self.reads_previous_target:
            return ChunkCarry(lanes, encoded, encoded_padding, [], encoded_padding.new_zeros(lanes.numel(), 0))
        if decoder_extra is None:
            _, decoder_extra = self.decoder(
                teacher_forcing_input(target, self.decoder.dictionary), encoder_out=encoder_out, features_only=True
            )
        memory, memory_padding = [], None
        for states in decoder_extra["target_states"]:
            aligned, memory_padding = aligned_right(states, decoder_extra["target_padding"])
            memory.append(aligned)
        return ChunkCarry(lanes, encoded, encoded_padding, memory, memory_padding)


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
