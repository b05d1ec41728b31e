"""Sentences packed several to a row: a sentence step's batch without the padding of its widest row.

A sentence step holds one sentence of each of its lanes (``refilled_lanes.py``), of whatever
lengths their documents have: padded one sentence a row, a quarter of a step's tokens were
padding on real documents. Packed, the step's sentences are dealt to fewer, longer rows, each
row the sentences' tokens one after the other (source and target alike, each sentence ending
with its eos as fairseq's do), so only the ends of the rows are padded::

    one a row:    [A A A A A A A . . .]      packed:   [A A A A A A A B B B]
                  [B B B . . . . . . .]                [C C C C C C D D . .]
                  [C C C C C C . . . .]
                  [D D . . . . . . . .]

Each sentence still attends only to itself (``packed_attention.py``: positions restart at each
sentence, attention is confined to it), so a packed batch computes what the same sentences
padded one a row compute, and a model reads each row's sentences' own context (a memory reads
its own lane's, ``systems/recurrent_memory``). What a batch holds besides its tokens is
``PackedRows``: where each sentence lies in which row, and which sentence each token belongs to.

How many rows: the sentences, longest first, each go to the row with the fewest tokens so far
(both sides together); the number of rows is the one, of those giving rows of 1 to 8 sentences,
with the least arithmetic by the estimate of ``step_cost``: its padded tokens, plus the
attention, which grows with a row's length squared (more so the narrower the model).
"""
import heapq
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

SENTENCES_PER_ROW = (1, 2, 3, 4, 6, 8)  # the row sizes tried
ATTENTION_PER_TOKEN = 6  # a token's linear work per unit of attention work, per model dimension

Widths = Sequence[Tuple[int, int]]  # (source, target) tokens of each sentence


def deal_to_rows(widths: Widths, rows: int) -> List[List[int]]:
    """The sentences (by index into ``widths``), longest first, each dealt to the row with the
    fewest tokens so far, into ``rows`` rows; within a row in the order given."""
    heap = [(0, row) for row in range(rows)]
    dealt: List[List[int]] = [[] for _ in range(rows)]
    for sentence in sorted(range(len(widths)), key=lambda i: (-sum(widths[i]), i)):
        tokens, row = heapq.heappop(heap)
        dealt[row].append(sentence)
        heapq.heappush(heap, (tokens + sum(widths[sentence]), row))
    return [sorted(row) for row in dealt if row]


def row_extent(widths: Widths, rows: List[List[int]]) -> Tuple[int, int]:
    """The longest row's source and target tokens."""
    return (max(sum(widths[i][0] for i in row) for row in rows),
            max(sum(widths[i][1] for i in row) for row in rows))


def step_cost(widths: Widths, rows: List[List[int]], embed_dim: int) -> float:
    """Estimated arithmetic of the batch of ``rows``, in token units: its padded tokens (both sides)
    plus its attention (a row's length squared per row and side, over ATTENTION_PER_TOKEN x
    ``embed_dim``, what one token's linear layers cost in the same units)."""
    source, target = row_extent(widths, rows)
    return len(rows) * (source + target + (source * source + target * target) / (ATTENTION_PER_TOKEN * embed_dim))


def pack(widths: Widths, embed_dim: int, max_tokens: Optional[int] = None) -> List[List[int]]:
    """The rows of the least ``step_cost`` among rows of 1 to 8 sentences (``SENTENCES_PER_ROW``)
    that fit ``max_tokens`` (``padded_tokens``); of them all where none does."""
    options = {-(-len(widths) // size) for size in SENTENCES_PER_ROW}
    candidates = [deal_to_rows(widths, count) for count in sorted(options, reverse=True)]
    fitting = [rows for rows in candidates if max_tokens is None or padded_tokens(widths, rows) <= max_tokens]
    return min(fitting or candidates, key=lambda rows: step_cost(widths, rows, embed_dim))


def padded_tokens(widths: Widths, rows: List[List[int]]) -> int:
    """The batch's tokens as --max-tokens counts them: its rows times the longer side's longest row."""
    return len(rows) * max(row_extent(widths, rows))


@dataclass
class PackedRows:
    """Where the N sentences of a packed batch lie (tensors; in a batch as ``to_batch``'s dict, which
    fairseq moves to the device with the rest).

    ``sentence_row`` (N,): each sentence's row; ``source_start``/``target_start`` (N,): its first
    column on each side; ``source_length``/``target_length`` (N,): its tokens, eos included.
    ``source_sentence``/``target_sentence`` (rows, columns): the sentence (0..N-1) each token
    belongs to; a row's padding belongs to its last sentence, so that a padding position still
    attends to something, as fairseq's padding positions do. ``source_positions`` /
    ``target_positions``: each token's position within its sentence, as fairseq numbers them
    (``padding_idx + 1`` for a sentence's first token, ``padding_idx`` for padding).
    ``row_sentences`` (rows, K): the sentences of each row in order, -1 beyond its last.
    """

    sentence_row: Tensor
    source_start: Tensor
    source_length: Tensor
    target_start: Tensor
    target_length: Tensor
    source_sentence: Tensor
    target_sentence: Tensor
    source_positions: Tensor
    target_positions: Tensor
    row_sentences: Tensor

    def to_batch(self) -> Dict[str, Tensor]:
        return dict(self.__dict__)

    @property
    def sentences(self) -> int:
        return self.sentence_row.numel()

    def side(self, side: str) -> Tuple[Tensor, Tensor, Tensor]:
        """(start, length, token-to-sentence map) of ``side``, 'source' or 'target'."""
        return getattr(self, f"{side}_start"), getattr(self, f"{side}_length"), getattr(self, f"{side}_sentence")

    def unpack(self, packed: Tensor, side: str) -> Tuple[Tensor, Tensor]:
        """Per sentence, the states ``packed`` (columns x rows x C, as fairseq's layers hold them) of
        its tokens on ``side``: (longest sentence x N x C), right-padded, and its padding mask (N x
        longest), True at padding."""
        start, length, _ = self.side(side)
        longest = int(length.max())
        offsets = torch.arange(longest, device=packed.device)
        padding = offsets[None, :] >= length[:, None]
        columns = (start[:, None] + offsets[None, :]).clamp(max=packed.size(0) - 1)
        gathered = packed[columns, self.sentence_row[:, None]]  # N x longest x C
        return gathered.masked_fill(padding[..., None], 0).transpose(0, 1), padding

    def other_sentences(self, queries: str, keys, causal: bool = False) -> Tensor:
        """(rows x query columns x key columns), True where the query token of side ``queries`` and
        the key (of side ``keys``, or of the per-row slots whose sentences ``keys`` gives) belong
        to different sentences, or, ``causal``, the key comes after the query: the attention to
        forbid."""
        query_sentence = getattr(self, f"{queries}_sentence")
        key_sentence = getattr(self, f"{keys}_sentence") if isinstance(keys, str) else keys
        forbidden = query_sentence[:, :, None] != key_sentence[:, None, :]
        if causal:
            columns = torch.arange(query_sentence.size(1), device=forbidden.device)
            forbidden = forbidden | (columns[None, :] > columns[:, None])[None]
        return forbidden

    def per_row(self, per_sentence: Tensor) -> Tuple[Tensor, Tensor]:
        """Something each sentence has (slots x N x C, such as the memory it reads) laid out per row:
        (K x slots) x rows x C, a row's sentences' one after the other, and (rows x (K x slots)) the
        sentence each belongs to (-1 beyond a row's last sentence)."""
        slots, _, channels = per_sentence.shape
        rows, most = self.row_sentences.shape
        gathered = per_sentence[:, self.row_sentences.clamp(min=0)]  # slots x rows x K x C
        gathered = gathered.permute(2, 0, 1, 3).reshape(most * slots, rows, channels)
        return gathered, self.row_sentences.repeat_interleave(slots, dim=1)


def collate_packed(sources: Sequence[Tensor], targets: Sequence[Tensor], rows: List[List[int]], pad: int,
                   eos: int) -> Tuple[Dict[str, Tensor], Tensor, PackedRows]:
    """The batch of sentences ``sources``/``targets`` (fairseq's: each ending with eos) in ``rows``:
    ``net_input`` (``src_tokens``, ``src_lengths``, ``prev_output_tokens``, each row's sentences
    one after the other, right-padded; a sentence's decoder input is its target with the eos
    moved to its front, as fairseq's collater makes it), the ``target`` and the ``PackedRows``."""
    count = len(sources)
    sentence_row = torch.empty(count, dtype=torch.long)
    start = {"source": torch.empty(count, dtype=torch.long), "target": torch.empty(count, dtype=torch.long)}
    length = {"source": torch.tensor([len(s) for s in sources]), "target": torch.tensor([len(t) for t in targets])}
    width = {side: max(int(sum(length[side][i] for i in row)) for row in rows) for side in length}
    tokens = {side: torch.full((len(rows), width[side]), pad, dtype=torch.long) for side in length}
    decoder_input = torch.full((len(rows), width["target"]), pad, dtype=torch.long)
    sentence = {side: torch.empty(len(rows), width[side], dtype=torch.long) for side in length}
    positions = {side: torch.full((len(rows), width[side]), pad, dtype=torch.long) for side in length}
    row_sentences = torch.full((len(rows), max(len(row) for row in rows)), -1, dtype=torch.long)
    for r, row in enumerate(rows):
        row_sentences[r, :len(row)] = torch.tensor(row)
        for side, texts in (("source", sources), ("target", targets)):
            column = 0
            for i in row:
                n = len(texts[i])
                tokens[side][r, column:column + n] = texts[i]
                if side == "target":
                    decoder_input[r, column] = eos
                    decoder_input[r, column + 1:column + n] = texts[i][:-1]
                sentence[side][r, column:column + n] = i
                positions[side][r, column:column + n] = torch.arange(pad + 1, pad + 1 + n)
                start[side][i] = column
                column += n
            sentence[side][r, column:] = row[-1]
        sentence_row[row] = r
    net_input = {
        "src_tokens": tokens["source"],
        "src_lengths": tokens["source"].ne(pad).sum(1),
        "prev_output_tokens": decoder_input,
    }
    layout = PackedRows(
        sentence_row=sentence_row, source_start=start["source"], source_length=length["source"],
        target_start=start["target"], target_length=length["target"],
        source_sentence=sentence["source"], target_sentence=sentence["target"],
        source_positions=positions["source"], target_positions=positions["target"], row_sentences=row_sentences,
    )
    return net_input, tokens["target"], layout
