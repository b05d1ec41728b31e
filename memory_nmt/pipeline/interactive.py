"""Document mode for ``fairseq-interactive``: one sentence per line, an empty line ends a document.

fairseq-interactive reads its input in buffers of ``--buffer-size`` lines and, for each buffer,
asks the task to encode the lines, to build a dataset and an iterator over it, then calls
``inference_step`` batch by batch with only the source tokens, and prints one result per line.
``InteractiveSession`` follows the documents across buffers: each non-empty line belongs to the
open document (a lane) or starts a new one; an empty line closes the open document and gets an
empty translation, so the output stays aligned with the input. Within a buffer, batch r holds the
r-th line of each document in it (documents in several buffers carry their context over); the
empty lines come last, in a batch of their own. A line that is not valid UTF-8 is refused with its
place, as a split's files are; a UTF-8 byte order mark at the start of the input (U+FEFF, which
some editors write) is dropped, as ``prepare_documents.py`` drops it, where fairseq would read it
as part of the first word. As fairseq-interactive passes only the source tokens to
``inference_step``, the session queues each batch's lanes (and chunk inputs) as the collater makes
it, and the task takes them back, in order, for the generator. ``--max-tokens`` bounds a batch's
current lines; the context a system prepends to them (``system.py``) comes on top. A line longer
than the model's source positions is refused with its line number, as in a split.

A system that reads a whole chunk's source before translating its first sentence (``chunks.py``)
gets its chunks from the buffers: a chunk ends after ``chunk_sentences`` lines of its document, and
also where a buffer ends, since the lines after it are not read yet. Buffers end every
``--buffer-size`` lines of the input, wherever documents end, so a document that goes on past a
buffer's end has its chunk cut there: with fairseq-interactive's default ``--buffer-size 1`` every
line is a chunk of its own (no context), and only a buffer that holds the whole input keeps every
chunk as fairseq-generate makes it (the hub places all its documents at once). Cuts are counted
and logged with the count at the 1st, 10th, 100th, ... cut.
"""
import logging
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq.data import FairseqDataset

from .chunks import chunk_inputs
from .data import DocumentDataError, side_limits

logger = logging.getLogger(__name__)

BYTE_ORDER_MARK = "\ufeff"


@dataclass(frozen=True)
class Placement:
    lane: Optional[int]  # None: an empty line, the end of a document
    continues: bool  # the line goes on with the lane's sentences on earlier lines
    line: int  # its number in the input, from 1
    document: int  # the number of its document in the input (the one it ends, for an empty line), from 1
    sentence: int  # its number in its document, from 1 (0 for an empty line)


@dataclass(frozen=True)
class BatchLanes:
    ids: torch.Tensor  # line numbers in the buffer, in the batch's row order
    lanes: torch.Tensor
    continues: torch.Tensor
    document_ends: bool  # a batch of empty lines
    chunks: Dict[str, torch.Tensor] = field(default_factory=dict)  # net_input's chunk entries (``chunks.py``)


class InteractiveSession:
    """Documents of one fairseq-interactive run, line by line across buffers. The hub places each
    call's documents as an input of its own (``begin_input``): its lanes go on, its numbering of
    lines, documents and sentences starts again."""

    def __init__(self):
        self.next_lane = 0
        self.open_lane: Optional[int] = None
        self.open_lines = 0  # of the open lane
        self.closed_lanes: List[int] = []  # documents (chunks) that ended in this buffer
        self.finished_lanes: List[int] = []  # ... in earlier buffers: all their lines are translated
        self.pending = deque()
        self.chunk_sentences: Optional[int] = None  # the model's, when it reads whole chunks
        self.chunks_cut_by_buffers = 0
        self.begin_input()

    def begin_input(self, input_is_lines: bool = True):
        """Number the lines to come from 1, and their documents; ``input_is_lines``: a place is an
        input line (fairseq-interactive's), else a sentence of the documents given (the hub's)."""
        self.input_is_lines = input_is_lines
        self.lines_placed = 0
        self.documents_begun = 0
        self.document_open = False
        self.document_sentences = 0  # of the open document

    def where(self, placement: Placement) -> str:
        """A line's place in the input, as a user finds it."""
        sentence = f"document {placement.document}, sentence {placement.sentence}"
        return f"input line {placement.line} ({sentence})" if self.input_is_lines else sentence

    def without_byte_order_mark(self, lines: List[str]) -> List[str]:
        """One buffer of fairseq-interactive's lines as they are placed and encoded: the input's
        first without a byte order mark."""
        if self.input_is_lines and self.lines_placed == 0 and lines:
            return [lines[0].removeprefix(BYTE_ORDER_MARK), *lines[1:]]
        return lines

    def place(self, lines: List[str]) -> List[Placement]:
        """Each line's lane, in the order given (one buffer of fairseq-interactive's)."""
        self.finished_lanes += self.take_closed_lanes()
        if self.chunk_sentences is not None and self.open_lane is not None:
            goes_on = bool(lines) and bool(lines[0].strip())
            if goes_on and self.open_lines < self.chunk_sentences:
                self._count_chunk_cut()
            self.finished_lanes.append(self.open_lane)
            self.open_lane = None
        placements = []
        for line in lines:
            self.lines_placed += 1
            if not line.strip():
                self._close_open_lane()
                placements.append(Placement(None, False, self.lines_placed, max(self.documents_begun, 1), 0))
                self.document_open = False
                continue
            if not self.document_open:
                self.document_open, self.documents_begun, self.document_sentences = True, self.documents_begun + 1, 0
            self.document_sentences += 1
            if self.open_lane is not None and self.open_lines == self.chunk_sentences:
                self._close_open_lane()  # the chunk is full: the document goes on in a new one
            continues = self.open_lane is not None
            if not continues:
                self.open_lane, self.next_lane, self.open_lines = self.next_lane, self.next_lane + 1, 0
            self.open_lines += 1
            placements.append(Placement(self.open_lane, continues, self.lines_placed, self.documents_begun,
                                        self.document_sentences))
            check_decoded(line, self.where(placements[-1]))
        return placements

    def _count_chunk_cut(self):
        """A buffer ends inside a chunk whose document goes on: count it, log the 1st, 10th, ... cut."""
        self.chunks_cut_by_buffers += 1
        if str(self.chunks_cut_by_buffers).rstrip("0") == "1":
            logger.warning(
                "chunk cut by fairseq-interactive's buffer %d times so far, the latest at input "
                "line %d: a document went on past the buffer's end, so its chunk ends there (the "
                "model reads a whole chunk before translating it, and the lines after the buffer "
                "are not read yet) and the document goes on in a new chunk; buffers end every "
                "--buffer-size lines wherever documents end: to keep every chunk whole, give a "
                "--buffer-size of at least the input's lines, or translate with fairseq-generate",
                self.chunks_cut_by_buffers, self.lines_placed,
            )

    def _close_open_lane(self):
        if self.open_lane is not None:
            self.closed_lanes.append(self.open_lane)
        self.open_lane = None

    def take(self, rows: int) -> BatchLanes:
        if not self.pending:
            raise RuntimeError("fairseq-interactive ran a batch the document session did not make")
        batch = self.pending.popleft()
        if batch.ids.numel() != rows:
            raise RuntimeError(f"batch of {rows} lines, but the session made one of {batch.ids.numel()}")
        return batch

    def take_closed_lanes(self) -> List[int]:
        closed, self.closed_lanes = self.closed_lanes, []
        return closed

    def take_finished_lanes(self) -> List[int]:
        """Lanes that ended in earlier buffers: what they carry can be forgotten at any batch."""
        finished, self.finished_lanes = self.finished_lanes, []
        return finished


UNDECODED_BYTE = re.compile("[\udc80-\udcff]")  # a byte Python's surrogateescape could not decode


def check_decoded(line: str, where: str):
    """Refuse a line that was not valid UTF-8: Python reads such bytes from a standard input as
    lone surrogates (its ``surrogateescape``), which the dictionary would take as unknown words."""
    undecodable = UNDECODED_BYTE.search(line)
    if undecodable:
        raise DocumentDataError(
            f"{where}: not valid UTF-8 (character {undecodable.start() + 1} of the line, byte "
            f"0x{ord(undecodable[0]) - 0xDC00:02x}); give the input in UTF-8, e.g. convert it with iconv"
        )


class InteractiveLines(FairseqDataset):
    """One buffer of lines (``pairs``: fairseq's dataset of them) placed in documents."""

    def __init__(self, pairs, placements: List[Placement], session: InteractiveSession):
        super().__init__()
        self.pairs = pairs
        self.placements = placements
        self.session = session
        self.segments = {}  # lane -> its lines in this buffer, in order
        for line, placement in enumerate(placements):
            if placement.lane is not None:
                self.segments.setdefault(placement.lane, []).append(line)

    def __getitem__(self, index):
        return self.pairs[index]

    def __len__(self):
        return len(self.pairs)

    def check_positions(self, max_positions):
        """Refuse a line longer than the model's source positions: nothing of a line is cut."""
        limit, _ = side_limits(max_positions)
        if limit is None:
            return
        for index, placement in enumerate(self.placements):
            size = int(self.pairs.src_sizes[index])
            if size > limit:
                raise DocumentDataError(
                    f"{self.session.where(placement)} has {size} tokens, more than the {limit} the "
                    "model takes; shorten or split it, or raise --max-source-positions"
                )

    def batches(self, max_sentences: Optional[int], max_tokens: Optional[int]) -> List[List[int]]:
        """Line numbers per batch: round r holds the r-th line of each document, within limits."""
        rounds = [
            [segment[r] for segment in self.segments.values() if r < len(segment)]
            for r in range(max((len(s) for s in self.segments.values()), default=0))
        ]
        ends = [line for line, placement in enumerate(self.placements) if placement.lane is None]
        batches = []
        for lines in rounds + ([ends] if ends else []):
            batch, width = [], 0
            for line in lines:
                width = max(width, int(self.pairs.num_tokens(line)))
                if batch and (
                    (max_sentences and len(batch) >= max_sentences)
                    or (max_tokens and (len(batch) + 1) * width > max_tokens)
                ):
                    batches.append(batch)
                    batch, width = [], int(self.pairs.num_tokens(line))
                batch.append(line)
            batches.append(batch)
        return batches

    def collater(self, samples):
        batch = self.pairs.collater(samples)
        ids = batch["id"]
        placements = [self.placements[line] for line in ids.tolist()]
        chunks = {}
        if self.session.chunk_sentences is not None and placements[0].lane is not None:
            segments = [self.segments[p.lane] for p in placements]
            chunks = chunk_inputs(
                [segment.index(line) for segment, line in zip(segments, ids.tolist())],
                [None if p.continues else [self.pairs[i]["source"] for i in segment] for p, segment in zip(placements, segments)],
                self.pairs.src_dict.pad(),
            )
        self.session.pending.append(
            BatchLanes(
                ids=ids,
                lanes=torch.tensor([-1 if p.lane is None else p.lane for p in placements]),
                continues=torch.tensor([p.continues for p in placements]),
                document_ends=placements[0].lane is None,
                chunks=chunks,
            )
        )
        return batch


def empty_translation(eos: int) -> dict:
    """fairseq's hypothesis for a line that ends a document: nothing but the end of sentence, scored 0."""
    return {
        "tokens": torch.tensor([eos]),
        "score": torch.tensor(0.0),
        "attention": None,
        "alignment": [],
        "positional_scores": torch.tensor([0.0]),
    }
