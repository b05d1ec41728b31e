"""The encoder's global context (Zheng et al., 2020, section 4.1): one layer over all words of a chunk.

The local encoder gives every sentence of a chunk its own representation ``h^L`` (fairseq's
encoder, a batch row per sentence). ``ChunkWords`` lays the words of each chunk's sentences out
in one sequence, sentence after sentence, each word knowing its sentence (segment) in the chunk,
and puts the results back in the sentences' rows. ``GlobalContextLayer`` then computes, over
each chunk's words:

- segment-level relative attention (``SegmentRelativeAttention``, eq. 1): multi-head
  self-attention over every word of the chunk, whose keys and values are shifted by a learned
  vector per relative sentence distance ``k - kappa`` (the query's sentence minus the key's),
  clipped to ``[-max_distance, max_distance]``: ``e = (W^Q x_i)(W^K x_j + g^K_{k-kappa}) / sqrt(d)``,
  ``z_i = sum_j a_ij (W^V x_j + g^V_{k-kappa})``, the vectors split over the heads as the
  projections are;
- gated context fusion: ``g = sigmoid(W_g [h^L; h^G])``, ``h = LayerNorm((1 - g) h^L + g h^G)``.

That is the paper's post-norm layer. In a pre-norm encoder (``--encoder-normalize-before``:
NLLB's, mBART's) the layer reads the residual stream ``x`` of the last local layer, before the
encoder's final LayerNorm (``encoder.py``), and puts the paper's LayerNorms where pre-norm
layers put them: its own LayerNorm (``layer_norm``, which ends the post-norm layer) moves to its
input, ``r = LayerNorm(x)``, which the attention and the gate read (``h^G`` from ``r``,
``g = sigmoid(W_g [r; h^G])``); the fusion is the paper's on the stream, ``(1 - g) x + g h^G``,
and the LayerNorm after it is the encoder's final one. So the gate keeps its meaning (``g = 0``
keeps the local stream, which the encoder's final LayerNorm turns into the sentence model's
output), and without the gate the layer is a pre-norm sublayer, ``x + h^G``, as in post-norm it
is the residual sum of the transformer's post-norm sublayers.

A word attends only to the words of its own chunk (each chunk is its own sequence here). Two of
the paper's ablations (Table 3) remove a part: without relative attention (``relative=False``)
the keys and values are the projections alone, with no per-distance vectors; without the gate
(``gated=False``) the fusion is the transformer's residual sum, ``h = LayerNorm(h^L + h^G)`` (the
paper does not say what replaces the gate; this is the sum its layers use everywhere else).

``sentence_attention`` turns the attention weights into the paper's sentence-to-sentence weights
(Figure 4): ``alpha_{k kappa} = 1/|x_k| sum_i sum_j alpha^{kappa,j}_{k,i}``, here also averaged
over the heads (the paper does not say how its heads are combined).
"""
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from fairseq import utils
from fairseq.modules import FairseqDropout, LayerNorm
from torch import Tensor, nn

from ...pipeline.option_ranges import OptionError


@dataclass
class ChunkWords:
    """Where every real word of a batch of sentence rows sits in its chunk's sequence of words.

    Built from the rows' padding mask (B, S), their chunk (B,) and their sentence index in the
    chunk (B,); ``words`` (real words) are given as (row, column) -> (chunk, place)."""

    rows: Tensor
    columns: Tensor
    chunks: Tensor
    places: Tensor
    segments: Tensor  # (chunks, W): the sentence index of each place
    padding: Tensor  # (chunks, W): places past the chunk's words
    sentences: Tensor  # (chunks,): sentences in each chunk
    offsets: Tensor  # (B,): the words of the row's chunk before the row's sentence

    @classmethod
    def of(cls, padding: Tensor, chunk_ids: Tensor, positions: Tensor) -> "ChunkWords":
        chunks, chunk_of_row = torch.unique(chunk_ids, return_inverse=True)
        real = ~padding
        lengths = real.sum(1)
        order = torch.argsort(chunk_of_row * (int(positions.max()) + 1) + positions)
        sorted_chunks, sorted_lengths = chunk_of_row[order], lengths[order]
        before = torch.cumsum(sorted_lengths, 0) - sorted_lengths  # words before the row, all chunks
        first_row = torch.ones_like(sorted_chunks, dtype=torch.bool)
        first_row[1:] = sorted_chunks[1:] != sorted_chunks[:-1]
        chunk_start = before[first_row]  # per chunk, in order
        offset = torch.empty_like(lengths)
        offset[order] = before - chunk_start[sorted_chunks]
        rows, columns = real.nonzero(as_tuple=True)
        rank = (torch.cumsum(real.long(), 1) - 1)[rows, columns]
        places = offset[rows] + rank
        words = torch.zeros(chunks.numel(), dtype=torch.long, device=padding.device).index_add_(
            0, chunk_of_row, lengths
        )
        width = int(words.max())
        segments = torch.zeros(chunks.numel(), width, dtype=torch.long, device=padding.device)
        segments[chunk_of_row[rows], places] = positions[rows]
        sentences = torch.zeros_like(words).index_add_(0, chunk_of_row, torch.ones_like(lengths))
        return cls(
            rows=rows, columns=columns, chunks=chunk_of_row[rows], places=places, segments=segments,
            padding=torch.arange(width, device=padding.device).unsqueeze(0) >= words.unsqueeze(1),
            sentences=sentences, offsets=offset,
        )

    def gather(self, x: Tensor) -> Tensor:
        """The rows' states ``x`` (S, B, C) as the chunks' sequences (chunks, W, C), zero past their words."""
        chunked = x.new_zeros(*self.padding.shape, x.size(-1))
        chunked[self.chunks, self.places] = x[self.columns, self.rows]
        return chunked

    def scatter(self, chunked: Tensor, x: Tensor) -> Tensor:
        """``x`` (S, B, C) with each real word replaced by its place in ``chunked`` (chunks, W, C)."""
        out = x.clone()
        out[self.columns, self.rows] = chunked[self.chunks, self.places]
        return out


class SegmentRelativeAttention(nn.Module):
    """Multi-head self-attention over a chunk's words, keys and values shifted per sentence distance
    (without them, ``relative=False``: plain multi-head self-attention over the chunk)."""

    def __init__(self, embed_dim: int, heads: int, max_distance: int, dropout: float, relative: bool = True):
        super().__init__()
        if embed_dim % heads:
            raise OptionError(f"the embedding dimension {embed_dim} must be divisible by the {heads} heads")
        self.heads, self.head_dim, self.max_distance = heads, embed_dim // heads, max_distance
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        for projection in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(projection.weight, gain=2**-0.5)  # as fairseq's self-attention
        nn.init.xavier_uniform_(self.out_proj.weight)
        self.relative = relative
        if relative:
            self.distance_keys = nn.Parameter(torch.empty(2 * max_distance + 1, embed_dim))
            self.distance_values = nn.Parameter(torch.empty(2 * max_distance + 1, embed_dim))
            nn.init.normal_(self.distance_keys, std=embed_dim**-0.5)
            nn.init.normal_(self.distance_values, std=embed_dim**-0.5)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def distances(self, segments: Tensor) -> Tensor:
        """(chunks, W, W): the index of ``k - kappa``, clipped, for every query and key word."""
        difference = segments.unsqueeze(2) - segments.unsqueeze(1)
        return difference.clamp(-self.max_distance, self.max_distance) + self.max_distance

    def forward(self, x: Tensor, segments: Tensor, padding: Tensor) -> Tuple[Tensor, Tensor]:
        """``x`` (chunks, W, C) -> (chunks, W, C), and the attention weights (chunks, heads, W, W)
        before dropout; ``padding`` (chunks, W) marks places past the words."""
        chunks, width, embed_dim = x.shape

        def heads(t):  # (..., W, C) -> (chunks, heads, W, head_dim)
            return t.view(chunks, width, self.heads, self.head_dim).transpose(1, 2)

        q = heads(self.q_proj(x)) * self.head_dim**-0.5
        k, v = heads(self.k_proj(x)), heads(self.v_proj(x))
        scores = q @ k.transpose(-1, -2)
        if self.relative:
            distance_keys = self.distance_keys.view(-1, self.heads, self.head_dim)
            index = self.distances(segments).unsqueeze(1).expand(-1, self.heads, -1, -1)
            scores = scores + torch.einsum("bhqd,nhd->bhqn", q, distance_keys).gather(-1, index)
        scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        probabilities = utils.softmax(scores, dim=-1).type_as(scores)
        weights = self.dropout_module(probabilities)
        attended = weights @ v
        if self.relative:
            distance_values = self.distance_values.view(-1, self.heads, self.head_dim)
            by_distance = torch.zeros(*weights.shape[:3], distance_values.size(0), dtype=weights.dtype, device=x.device)
            by_distance.scatter_add_(-1, index, weights)
            attended = attended + torch.einsum("bhqn,nhd->bhqd", by_distance, distance_values)
        return self.out_proj(attended.transpose(1, 2).reshape(chunks, width, embed_dim)), probabilities


class GlobalContextLayer(nn.Module):
    """Segment-level relative attention over a chunk, fused with the local representation by a gate
    (``relative`` and ``gated`` False: the ablations of the module docstring); a post-norm layer,
    or with ``normalize_before`` a pre-norm one (the module docstring)."""

    def __init__(self, embed_dim: int, heads: int, max_distance: int, dropout: float, attention_dropout: float,
                 relative: bool = True, gated: bool = True, normalize_before: bool = False):
        super().__init__()
        self.attention = SegmentRelativeAttention(embed_dim, heads, max_distance, attention_dropout, relative)
        self.gate = nn.Linear(2 * embed_dim, embed_dim) if gated else None
        self.layer_norm = LayerNorm(embed_dim)
        self.normalize_before = normalize_before
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def forward(self, local: Tensor, segments: Tensor, padding: Tensor) -> Tuple[Tensor, Tensor]:
        """The fused representation of each chunk's words ``local`` (chunks x W x C), and the
        attention weights (chunks, heads, W, W). Post-norm: ``local`` is ``h^L`` and the result
        ``h``; pre-norm: ``local`` is the residual stream and the result the fused stream, which
        the encoder's final LayerNorm normalises."""
        read = self.layer_norm(local) if self.normalize_before else local
        attended, weights = self.attention(read, segments, padding)
        global_ = self.dropout_module(attended)
        if self.gate is None:
            fused = local + global_
        else:
            gate = torch.sigmoid(self.gate(torch.cat([read, global_], dim=-1)))
            fused = (1 - gate) * local + gate * global_
        return (fused if self.normalize_before else self.layer_norm(fused)), weights


def sentence_attention(weights: Tensor, segments: Tensor, padding: Tensor, sentences: Optional[int] = None) -> Tensor:
    """Figure 4's sentence-to-sentence weights of the chunks: (chunks, N, N), row k the mean over
    the heads and over sentence k's words of the weight each word gives the words of sentence
    kappa (each row sums to 1), from ``weights`` (chunks, heads, W, W) with the chunks'
    ``segments`` and ``padding`` (chunks, W); N is ``sentences`` or the most a chunk has."""
    count = int(segments.max()) + 1 if sentences is None else sentences
    real = (~padding).type_as(weights)
    by_word = weights.mean(1) * real.unsqueeze(2)  # (chunks, W queries, W keys), padding queries zero
    one_hot = torch.nn.functional.one_hot(segments, count).type_as(weights) * real.unsqueeze(-1)  # (chunks, W, N)
    summed = one_hot.transpose(1, 2) @ by_word @ one_hot  # (chunks, N queries' sentences, N keys' sentences)
    words = one_hot.sum(1).unsqueeze(-1)  # (chunks, N, 1)
    return summed / words.clamp(min=1)
