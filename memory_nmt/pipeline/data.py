"""Documents and their sentence steps in lanes, for the ``document_translation`` task.

A split is fairseq-preprocess output (a ``LanguagePairDataset`` of sentences) plus its
document index ``{split}.{src}-{tgt}.docids``: one document id per sentence line, each
document's sentences contiguous and in order (``read_docids``). ``DocumentDataset`` is the split
with its documents; it fills groups of lanes and makes their sentence steps (``lane_steps.py``),
which the planners (``planners.py``) deal to workers and batches.

How documents become steps in validation and decoding (``planners.DocumentLanes``), with 5
documents A(3 sentences) B(3) C(2) D(2) E(1)::

    groups (documents of similar length,        group 0: lanes A B   group 1: lanes C D E
    within --max-tokens / --batch-size):
    steps of group 0:  step 0 = [A1 B1]  step 1 = [A2 B2]  step 2 = [A3 B3]
    steps of group 1:  step 0 = [C1 D1 E1]  step 1 = [C2 D2]       (E has left its lane)

Step t of a group holds sentence t of every document of the group that is that long, so
consecutive steps of a group continue the same documents, each in its own lane (lane numbers go
with every batch, see ``carry.py``). Documents are sorted by length before groups are filled, so
lanes empty late. ``--max-tokens`` bounds the padded tokens of every step, counting the previous
sentences a system prepends to each sentence (``step_tokens``).

Training in lanes that refill (``refilled_lanes.py``: a lane takes its next document as soon as
one ends) and on whole chunks has steps of its own. Each kind of step is a type of
``lane_steps.py`` that collates its own batch (``samples.py``'s ``LaneStep``).

A system whose sentences read context sentences the data chooses (the next ones, or random ones
of other documents: ``chosen_context.py``) gets, in every batch, each row's chosen sentences
(``DocumentDataset.choosing``, a view of the split for one seed and epoch), and the steps' widths
count them as they count previous sentences.

Systems that read a whole chunk's source (``chunks.py``) see chunks of their documents as the
documents: lanes hold chunks. Their training batches hold whole chunks (one step a group, every
sentence of its chunks a row, ``whole_chunk_groups``); their other batches are sentence steps as
above, each row telling its sentence's index in its chunk, and a chunk's first sentence bringing
the source of the whole chunk.

No sentence is ever dropped: a sentence that does not fit ``--max-tokens`` or the model's
positions is an error that names its document and sentence.
"""
import itertools
import os
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
from fairseq.data import FairseqDataset

from memory_nmt_tools.document_index import read_document_ids
from memory_nmt_tools.text_files import TextFileError

from .chosen_context import ChosenSentences, ContextChoice, choose
from .chunks import cut_into_chunks
from .errors import InputError
from .lane_steps import ChunkStep, SentenceStep, StepPosition, WholeChunkStep
from .option_ranges import OptionError


class DocumentDataError(InputError):
    pass


@dataclass(frozen=True)
class Document:
    doc_id: str
    first: int  # index of its first sentence in the split
    length: int  # number of sentences


def read_docids(path: str, num_sentences: int) -> List[Document]:
    """The documents of a split's document index (read by ``memory_nmt_tools.document_index``, whose
    rules training, decoding and the scores share), checked against the ``num_sentences`` of the
    binarized split."""
    if not os.path.exists(path):
        raise DocumentDataError(
            f"{path}: document index not found. Every split needs one document id per "
            "sentence line beside the binarized data (see scripts/prepare_documents.py)"
        )
    if os.path.isdir(path):
        raise DocumentDataError(
            f"{path}: a directory, where the split's document index should be: remove it and put "
            "the document index there (one document id per sentence line, see "
            "scripts/prepare_documents.py)"
        )
    try:
        ids = read_document_ids(path)
    except TextFileError as error:
        raise DocumentDataError(str(error)) from None
    if len(ids) != num_sentences:
        raise DocumentDataError(
            f"{path}: {len(ids)} lines, but the binarized split has {num_sentences} "
            "sentences; the document index must have one line per sentence"
        )
    documents: List[Document] = []
    first = 0
    for doc_id, lines in itertools.groupby(ids):  # each document's lines are contiguous
        length = len(list(lines))
        documents.append(Document(doc_id, first, length))
        first += length
    return documents


def parse_window(spec: str) -> Tuple[Optional[int], Optional[int]]:
    """``full`` -> (None, None); ``N`` -> (N, N); ``A-B`` -> (A, B)."""
    if spec == "full":
        return None, None
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", spec)
    low, high = (int(match[1]), int(match[2] or match[1])) if match else (0, 0)
    if not match or low < 1 or high < low:
        raise OptionError(
            f"--optimization-window {spec!r}: give 'full', a number of sentence steps "
            "such as 4, or a range such as 1-8"
        )
    return low, high


class DocumentDataset(FairseqDataset):
    """The sentences of a split (``pairs``) and its documents, batched as described above;
    ``chosen``: each sentence's chosen context sentences, in a view made by ``choosing``."""

    def __init__(self, pairs, documents: Sequence[Document], stream: str, docids_path: str,
                 chosen: Optional[ChosenSentences] = None):
        super().__init__()
        self.pairs = pairs
        self.documents = list(documents)
        self.stream = stream
        self.docids_path = docids_path
        self.chosen = chosen

    def choosing(self, choice: Optional[ContextChoice], seed: int, epoch: int) -> "DocumentDataset":
        """The split whose batches bring each sentence's context sentences of ``choice`` drawn
        for ``seed`` and ``epoch`` (``chosen_context.py``); itself when ``choice`` is None."""
        if choice is None:
            return self
        return DocumentDataset(self.pairs, self.documents, self.stream, self.docids_path,
                               choose(choice, self, seed, epoch))

    def __getitem__(self, index):
        return self.pairs[index]

    def __len__(self):
        return len(self.pairs)

    @property
    def sizes(self):
        return self.pairs.sizes

    @property
    def src(self):
        """The source sentences (fairseq-generate's --replace-unk reads their original text)."""
        return self.pairs.src

    @property
    def tgt(self):
        return self.pairs.tgt

    def num_tokens(self, index):
        return self.pairs.num_tokens(index)

    def size(self, index):
        return self.pairs.size(index)

    def document_of(self, index: int) -> Tuple[Document, int]:
        for document in self.documents:
            if document.first <= index < document.first + document.length:
                return document, index - document.first
        raise IndexError(index)

    def _describe(self, index: int) -> str:
        document, position = self.document_of(index)
        return (
            f"sentence {position + 1} of document {document.doc_id!r} "
            f"(line {index + 1} of {self.docids_path})"
        )

    def check_positions(self, max_positions):
        """Refuse sentences longer than the model takes: dropping one would shift the context."""
        if max_positions is None:
            return
        max_source, max_target = side_limits(max_positions)
        sizes = np.asarray(self.pairs.sizes).reshape(len(self.pairs), -1)
        for column, limit, side in ((0, max_source, "source"), (-1, max_target, "target")):
            if limit is None:
                continue
            too_long = np.flatnonzero(sizes[:, column] > limit)
            if len(too_long):
                index = int(too_long[0])
                raise DocumentDataError(
                    f"{self._describe(index)} has {int(sizes[index, column])} {side} tokens, "
                    f"more than the {limit} the model takes ({len(too_long)} such sentences). "
                    "A document loses no sentence: shorten or split them in the raw data, or "
                    "raise --max-source-positions / --max-target-positions"
                )

    def step_tokens(self, document: Document, context: Tuple[int, int], max_positions) -> List[int]:
        """The tokens each sentence of ``document`` takes in a batch: the sentence with the
        previous sentences of its document that its system reads besides it (``context``: how
        many source and target sentences) and its chosen source sentences (``chosen``), each
        side at most the model's positions, to which the system cuts the context."""
        first, length = document.first, document.length
        if context == (0, 0) and self.chosen is None:
            return [int(self.pairs.num_tokens(first + t)) for t in range(length)]
        widths = np.zeros(length, dtype=np.int64)
        chosen = self.chosen.tokens[first:first + length] if self.chosen is not None else 0
        sides = ((self.pairs.src_sizes, context[0], chosen), (self.pairs.tgt_sizes, context[1], 0))
        for (sizes, previous, chosen_tokens), limit in zip(sides, side_limits(max_positions)):
            if sizes is None:
                continue
            own = np.asarray(sizes[first:first + length], dtype=np.int64)
            running = np.concatenate([[0], np.cumsum(own)])
            start = np.maximum(0, np.arange(length) - previous)
            with_context = running[1:] - running[start] + chosen_tokens
            if limit is not None:
                with_context = np.maximum(np.minimum(with_context, limit), own)
            widths = np.maximum(widths, with_context)
        return [int(width) for width in widths]

    def groups(
        self,
        max_tokens: Optional[int],
        max_sentences: Optional[int],
        context: Tuple[int, int] = (0, 0),
        max_positions=None,
        chunk_sentences: Optional[int] = None,
    ) -> List[List[Document]]:
        """Fill groups with documents (or their chunks of at most ``chunk_sentences``) of similar
        length, longest first, within the limits (each step's rows times its widest)."""
        self.require_a_batch_size(max_tokens, max_sentences)
        documents = cut_into_chunks(self.documents, chunk_sentences) if chunk_sentences else self.documents
        ordered = sorted(documents, key=lambda d: (-d.length, d.first))
        groups: List[List[Document]] = []
        held: List[int] = []  # rows of each step of the open group
        widest: List[int] = []  # the widest row of each step of the open group
        for document in ordered:
            tokens = self.step_tokens(document, context, max_positions)
            # a chunk's first step encodes all its sentences: as many rows, as wide as its widest
            rows = [document.length if chunk_sentences and t == 0 else 1 for t in range(document.length)]
            if chunk_sentences and max_tokens is not None and document.length * max(tokens) > max_tokens:
                raise DocumentDataError(
                    f"the chunk of {document.length} sentences from {self._describe(document.first)} "
                    f"takes {document.length * max(tokens)} padded tokens when its first sentence is "
                    f"translated (the whole chunk is encoded then), more than --max-tokens {max_tokens}; "
                    "raise --max-tokens or lower --chunk-sentences"
                )
            if chunk_sentences:
                tokens[0] = max(tokens)
            self.refuse_wider_than(max_tokens, document, tokens, context)
            fits = bool(groups) and (max_sentences is None or len(groups[-1]) < max_sentences)
            if fits and max_tokens is not None:  # the document is the group's shortest: steps 0..len-1
                fits = all(
                    (held[t] + rows[t]) * max(widest[t], width) <= max_tokens for t, width in enumerate(tokens)
                )
            if not fits:
                groups.append([])
                held, widest = [0] * len(tokens), [0] * len(tokens)
            groups[-1].append(document)
            for t, width in enumerate(tokens):
                held[t] += rows[t]
                widest[t] = max(widest[t], width)
        return groups

    @staticmethod
    def require_a_batch_size(max_tokens: Optional[int], max_sentences: Optional[int]):
        if max_tokens is None and max_sentences is None:
            raise OptionError("give --max-tokens or --batch-size to size the batches")

    def refuse_wider_than(self, max_tokens: Optional[int], document: Document, tokens: Sequence[int], context: Tuple[int, int]):
        """Refuse a sentence of ``document`` whose ``tokens`` (with ``context``) exceed ``max_tokens``."""
        if max_tokens is not None and max(tokens) > max_tokens:
            index = document.first + int(np.argmax(tokens))
            with_context = ""
            if self.chosen is not None:
                with_context = f" with the context sentences its system reads ({self.chosen.choice.option()})"
            elif context != (0, 0):
                with_context = " with the previous sentences its system reads"
            raise DocumentDataError(
                f"{self._describe(index)} has {max(tokens)} tokens{with_context}, more than "
                f"--max-tokens {max_tokens}; raise --max-tokens"
            )

    def whole_chunk_groups(
        self, max_tokens: Optional[int], max_sentences: Optional[int], chunk_sentences: int
    ) -> List[List[Document]]:
        """Fill groups with the documents' chunks of at most ``chunk_sentences``, each group one
        batch with a row per sentence: at most ``max_sentences`` rows, whose padded tokens (rows
        times the widest) stay within ``max_tokens``. Chunks of similar widths go together."""
        self.require_a_batch_size(max_tokens, max_sentences)
        widths = {
            chunk: [int(self.pairs.num_tokens(index)) for index in range(chunk.first, chunk.first + chunk.length)]
            for chunk in cut_into_chunks(self.documents, chunk_sentences)
        }
        ordered = sorted(widths, key=lambda c: (-max(widths[c]), -c.length, c.first))
        groups: List[List[Document]] = []
        rows = widest = 0
        for chunk in ordered:
            chunk_widest = max(widths[chunk])
            if (max_sentences is not None and chunk.length > max_sentences) or (
                max_tokens is not None and chunk.length * chunk_widest > max_tokens
            ):
                index = chunk.first + int(np.argmax(widths[chunk]))
                raise DocumentDataError(
                    f"the chunk of {chunk.length} sentences from {self._describe(chunk.first)} does not "
                    f"fit one batch (its widest sentence, {self._describe(index)}, has {chunk_widest} "
                    f"tokens; a training batch holds whole chunks): raise --max-tokens / --batch-size "
                    "or lower --chunk-sentences"
                )
            fits = bool(groups) and (max_sentences is None or rows + chunk.length <= max_sentences) and (
                max_tokens is None or (rows + chunk.length) * max(widest, chunk_widest) <= max_tokens
            )
            if not fits:
                groups.append([])
                rows = widest = 0
            groups[-1].append(chunk)
            rows, widest = rows + chunk.length, max(widest, chunk_widest)
        return groups

    def whole_chunk_step(self, group_index: int, group: List[Document]) -> WholeChunkStep:
        """The one batch of a group of whole chunks: every sentence a row, a chunk's rows in its lane."""
        rows = [(lane, t) for lane, chunk in enumerate(group) for t in range(chunk.length)]
        return WholeChunkStep(
            StepPosition(self.stream, group_index, 0, ends_group=True),
            sentences=tuple(group[lane].first + t for lane, t in rows),
            lanes=tuple(lane for lane, _ in rows),
            chunk_positions=tuple(t for _, t in rows),
        )

    def group_steps(self, group_index: int, group: List[Document], chunked: bool = False) -> List[SentenceStep]:
        """The batches of one group: step t holds sentence t of every document that long. With
        ``chunked``, the documents are chunks (``ChunkStep``): step 0 brings each chunk's sentences."""
        steps = []
        length = max(document.length for document in group)
        for t in range(length):
            lanes = [lane for lane, document in enumerate(group) if t < document.length]
            position = StepPosition(self.stream, group_index, t, ends_group=t == length - 1)
            sentences = tuple(group[lane].first + t for lane in lanes)
            if chunked:
                starts = tuple(
                    tuple(range(group[lane].first, group[lane].first + group[lane].length)) for lane in lanes
                ) if t == 0 else ()
                steps.append(ChunkStep(position, sentences, tuple(lanes), chunk_positions=(t,) * len(lanes),
                                       chunk_starts=starts))
            else:
                steps.append(SentenceStep(position, sentences, tuple(lanes)))
        return steps

    def sentence_rows(self, sentences: Sequence[int]) -> dict:
        """fairseq's batch of ``sentences``, one a row (fairseq orders the rows), with their chosen
        context sentences."""
        batch = self.pairs.collater([self.pairs[index] for index in sentences])
        self.add_chosen_context(batch)
        return batch

    def add_chosen_context(self, batch: dict):
        """Each row's chosen context sentences into ``batch``'s ``net_input``, where the split has
        them (``chosen_context.py``)."""
        if self.chosen is not None:
            batch["net_input"].update(self.chosen.inputs(batch["id"].tolist(), self.pairs))


def side_limits(max_positions) -> Tuple[Optional[int], Optional[int]]:
    """(source, target) limits of fairseq's ``max_positions`` (a number, a pair, or None)."""
    if isinstance(max_positions, tuple):
        return max_positions
    return max_positions, max_positions
