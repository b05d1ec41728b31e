"""The local+global model's encoder (Zheng et al., 2020, section 4.1): ``LocalGlobalEncoder``.

Encoder (section 4.1): "the local encoder leverages N−1 stacked layers", then "an additional layer
on the top of the local context encoding layers" (N layers in all). Every sentence of a chunk is
encoded on its own by fairseq's encoder, whose layers are the local layers (the local context
``h^L``: attention within the sentence, word positions restarting at each sentence), its input
adding a learned embedding of the sentence's index in the chunk; on top, the global layer reads
all words of the chunk (``global_context.py``). A chunk of one sentence skips the global layer:
its words keep ``h^L`` (the paper's "global encoding will be dynamically disabled"), so a
one-sentence document, and every sentence with ``--chunk-sentences 1``, is translated as by a
sentence model.

With pre-norm layers (``--encoder-normalize-before``: NLLB's, mBART's) fairseq's encoder ends in
a LayerNorm of its own (``layer_norm``) after its last layer. The global layer is the top layer
of the stack, so it goes before that LayerNorm: it reads the last local layer's residual stream
(fairseq's ``encoder_states``, asked for with ``return_all_hiddens``), and the encoder's
LayerNorm normalises what it gives (``global_context.py``). A chunk of one sentence gets that
LayerNorm of the last local layer's stream, which is exactly fairseq's encoder output.

How many of ``--encoder-layers`` are local is ``options.py``'s ``local_layers``. ``previous_rows``
says, in a batch of whole chunks, which row holds each row's previous sentence, which the decoder
(``decoder.py``) reads (``model.py``'s ``encode``).
"""
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.models.transformer import TransformerEncoderBase
from fairseq.modules.sinusoidal_positional_embedding import SinusoidalPositionalEmbedding
from torch import Tensor, nn

from ...pipeline.context_parameters import tag_context_parameters
from ...pipeline.option_ranges import OptionError
from .global_context import ChunkWords, GlobalContextLayer, sentence_attention


def previous_rows(chunk_ids: Tensor, positions: Tensor) -> Tensor:
    """(B,): for each row, the row holding the previous sentence of its chunk, or -1 at a chunk's start."""
    same_chunk = chunk_ids.unsqueeze(1) == chunk_ids.unsqueeze(0)
    is_previous = same_chunk & (positions.unsqueeze(0) == positions.unsqueeze(1) - 1)
    found = is_previous.any(1)
    return torch.where(found, is_previous.long().argmax(1), torch.full_like(positions, -1))


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
                normalize_before=cfg.encoder.normalize_before,
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
        ends_in_layer_norm = self.layer_norm is not None  # pre-norm
        local = super().forward(src_tokens, token_embeddings=token_embeddings, return_all_hiddens=ends_in_layer_norm)
        states, padding = local["encoder_out"][0], local["encoder_padding_mask"][0]
        several = words.sentences > 1
        attention = None
        if bool(several.any()):
            stream = local["encoder_states"][-1] if ends_in_layer_norm else states
            chunked = words.gather(stream)
            fused, attention = self.global_context(chunked, words.segments, words.padding)
            states = words.scatter(torch.where(several[:, None, None], fused, chunked), stream)
            if ends_in_layer_norm:
                states = self.layer_norm(states)
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
        encoded: Optional[Tensor] = None,
        encoded_padding: Optional[Tensor] = None,
    ):
        """fairseq's encoder output dict of one batch of sentences, in one of two ways:

        - whole chunks (training): the rows are the sentences of chunks (``chunk_ids``, and
          ``chunk_positions`` in them), encoded here;
        - sentence by sentence: ``encoded`` (S, B, C) and ``encoded_padding`` are the rows' sentences
          as their chunk's encoding gave them (``sentence_context``)."""
        if encoded is None and chunk_ids is None:
            raise ValueError("the local+global encoder takes whole chunks (chunk_ids, chunk_positions) or "
                             "its chunks' encoding (encoded): the model's encode gives them")
        if encoded is None:
            encoded, encoded_padding, _, _ = self.encode_chunks(src_tokens, chunk_ids, chunk_positions)
        return {
            "encoder_out": [encoded],
            "encoder_padding_mask": [encoded_padding],
            "encoder_embedding": [],
            "encoder_states": [],
            "src_tokens": [],
            "src_lengths": [],
        }
