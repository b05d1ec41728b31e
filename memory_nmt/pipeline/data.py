"""Documents, lanes and sentence-aligned batches for the ``document_translation`` task.

A split is fairseq-preprocess output (a ``LanguagePairDataset`` of sentences) plus its
document index ``{split}.{src}-{tgt}.docids``: one document id per sentence line, each
document's sentences contiguous and in order.

How documents become batches in validation and decoding (and in training for a system that
reads whole chunks), with 5 documents A(3 sentences) B(3) C(2) D(2) E(1)::

    groups (documents of similar length,        group 0: lanes A B   group 1: lanes C D E
    within --max-tokens / --batch-size):
    batches of group 0:  step 0 = [A1 B1]  step 1 = [A2 B2]  step 2 = [A3 B3]
    batches of group 1:  step 0 = [C1 D1 E1]  step 1 = [C2 D2]       (E has left its lane)

Batch t of a group holds sentence t of every document of the group that is that long, so
consecutive batches of a group continue the same documents, each in its own lane (lane
numbers go with every batch, see ``carry.py``). Documents are sorted by length before groups
are filled, so lanes empty late. ``--max-tokens`` bounds the padded tokens of every batch,
counting the previous sentences a system prepends to each sentence (``step_tokens``). Other
splits' items are single steps, in order.

Training in lanes is planned by ``refilled_lanes.py`` (a lane takes its next document as soon as
one ends, so steps stay full) into the ``SentenceStep``s defined here: a step holds one sentence
of each lane, its sentences one a row in up to ``--passes-per-step`` forward passes of
similar widths (``forward_passes``), or several a row (``packing.py``). The training split's
items are optimisation windows: runs of consecutive steps of one group whose gradients make one
update (``--optimization-window``). A step's rows stay one step for the carry and the gradient
(``criterion.py``); only the padding changes.

A system whose sentences read context sentences the data chooses (the next ones, or random ones
of other documents: ``chosen_context.py``) gets, in every batch, each row's chosen sentences
(``DocumentDataset.choosing``, a view of the split for one seed and epoch), and the steps' widths
count them as they count previous sentences.

Systems that read a whole chunk's source (``chunks.py``) see chunks of their documents as the
documents: lanes hold chunks. Their training batches hold whole chunks (one step a group, every
sentence of its chunks a row, ``whole_chunk_groups``); their other batches are sentence steps as
above, each row telling its sentence's index in its chunk, and a chunk's first sentence bringing
the source of the whole chunk.

For data-parallel work, whole groups are dealt to workers (longest first, each to the worker
with the fewest steps so far), so every document lands in exactly one lane of one worker; a
worker with fewer items gets empty ones at the end, which fairseq turns into zero-weight dummy
batches, so every worker runs the same number of batches. Groups are shuffled each epoch in
training; steps inside a group never are.

No sentence is ever dropped: a sentence that does not fit ``--max-tokens`` or the model's
positions is an error that names its document and sentence.
"""
import codecs
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils

from .chosen_context import ChosenSentences, ContextChoice, choose
from .chunks import chunk_inputs, cut_into_chunks
from .errors import InputError
from .packing import collate_packed


class DocumentDataError(InputError):
    pass


@dataclass(frozen=True)
class Document:
    doc_id: str
    first: int  # index of its first sentence in the split
    length: int  # number of sentences


@dataclass(frozen=True)
class StepPosition:
    """Where a batch stands: which stream (split), group and step; whether the group ends."""

    stream: str
    group: int
    step: int
    ends_group: bool


@dataclass(frozen=True)
class SentenceStep:
    position: StepPosition
    sentences: Tuple[int, ...]  # dataset indices, one per lane still in its document
    lanes: Tuple[int, ...]
    passes: Tuple[Tuple[int, ...], ...] = ()  # positions in ``sentences`` per forward pass; () is one
    chunk_positions: Tuple[int, ...] = ()  # chunked systems: each sentence's index in its chunk
    chunk_starts: Tuple[Tuple[int, ...], ...] = ()  # chunked sentence steps: per row, its chunk's sentences where it starts it
    continues: Tuple[bool, ...] = ()  # refilled lanes (``refilled_lanes.py``): per row, whether it goes on with its lane's document
    packed: Tuple[Tuple[Tuple[int, ...], ...], ...] = ()  # sentences packed (``packing.py``): per pass, its rows' positions in ``sentences``


def forward_passes(widths: Sequence[int], max_passes: int) -> Tuple[int, List[List[int]]]:
    """Rows of one step (their ``widths`` in tokens) cut into at most ``max_passes`` forward
    passes of similar widths: the padded tokens of all passes together, and each pass's rows.

    Rows are sorted widest first and the cut that saves the most padding is made, again and
    again, while it saves at least a tenth of the step's padded tokens (a pass costs a call of
    every layer, worth it only for real savings)."""
    if max_passes == 1:
        return len(widths) * max(widths), [list(range(len(widths)))]
    order = sorted(range(len(widths)), key=lambda row: (-widths[row], row))
    width = np.asarray([widths[row] for row in order], dtype=np.int64)
    segments = [(0, len(order))]

    def cost(start, end):
        return int(end - start) * int(width[start])

    while len(segments) < max_passes:
        total = sum(cost(*segment) for segment in segments)
        best = None  # (saving, segment index, cut)
        for index, (start, end) in enumerate(segments):
            cuts = np.arange(start + 1, end)
            if not len(cuts):
                continue
            split = (cuts - start) * width[start] + (end - cuts) * width[cuts]
            saving = cost(start, end) - int(split.min())
            if best is None or saving > best[0]:
                best = (saving, index, int(cuts[int(split.argmin())]))
        if best is None or best[0] * 10 < total:
            break
        _, index, cut = best
        start, end = segments[index]
        segments[index:index + 1] = [(start, cut), (cut, end)]
    return sum(cost(*segment) for segment in segments), [order[start:end] for start, end in segments]


class _OpenStep:
    """One step of the group being filled: its rows' widths so far, and what more rows cost."""

    def __init__(self):
        self.widths: List[int] = []
        self.widest = 0

    def cost_with(self, width: int, max_passes: int, rows: int = 1) -> int:
        """The step's padded tokens with ``rows`` more rows of ``width`` tokens."""
        if max_passes == 1:  # one padded batch: as cheap to tell as the widest row (groups fill fast)
            return (len(self.widths) + rows) * max(self.widest, width)
        return forward_passes(self.widths + [width] * rows, max_passes)[0]

    def add(self, width: int, rows: int = 1):
        self.widths.extend([width] * rows)
        self.widest = max(self.widest, width)


def read_docids(path: str, num_sentences: int) -> List[Document]:
    """Read a docids file and check it against the ``num_sentences`` of the binarized split."""
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
    with open(path, "rb") as f:
        text = f.read()
    if text.startswith(codecs.BOM_UTF8):  # some editors write one; it is not part of the first id
        text = text[len(codecs.BOM_UTF8):]
    lines = text.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    ids = []
    for number, line in enumerate(lines, 1):
        try:
            ids.append(line.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError:
            raise DocumentDataError(
                f"{path}:{number}: not valid UTF-8; write the document index in UTF-8"
            ) from None
    if len(ids) != num_sentences:
        raise DocumentDataError(
            f"{path}: {len(ids)} lines, but the binarized split has {num_sentences} "
            "sentences; the document index must have one line per sentence"
        )
    documents: List[Document] = []
    seen: Dict[str, int] = {}
    for line, doc_id in enumerate(ids):
        if not doc_id.strip():
            raise DocumentDataError(f"{path}:{line + 1}: empty document id")
        if doc_id != doc_id.strip():
            raise DocumentDataError(
                f"{path}:{line + 1}: document id {doc_id!r} has spaces at its ends; ids are compared "
                "exactly, so remove them"
            )
        if documents and documents[-1].doc_id == doc_id:
            last = documents[-1]
            documents[-1] = Document(doc_id, last.first, last.length + 1)
            continue
        if doc_id in seen:
            raise DocumentDataError(
                f"{path}:{line + 1}: document {doc_id!r} continues after other documents "
                f"(it started at line {seen[doc_id] + 1}); a document's sentences must be contiguous"
            )
        seen[doc_id] = line
        documents.append(Document(doc_id, line, 1))
    return documents


def parse_window(spec: str) -> Tuple[Optional[int], Optional[int]]:
    """``full`` -> (None, None); ``N`` -> (N, N); ``A-B`` -> (A, B)."""
    if spec == "full":
        return None, None
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", spec)
    low, high = (int(match[1]), int(match[2] or match[1])) if match else (0, 0)
    if not match or low < 1 or high < low:
        raise DocumentDataError(
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
        max_passes: int = 1,
        chunk_sentences: Optional[int] = None,
    ) -> List[List[Document]]:
        """Fill groups with documents (or their chunks of at most ``chunk_sentences``) of similar
        length, longest first, within the limits (each step's padded tokens in at most
        ``max_passes`` forward passes)."""
        self.require_a_batch_size(max_tokens, max_sentences)
        documents = cut_into_chunks(self.documents, chunk_sentences) if chunk_sentences else self.documents
        ordered = sorted(documents, key=lambda d: (-d.length, d.first))
        groups: List[List[Document]] = []
        steps: List[_OpenStep] = []  # of the open group
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
                    steps[t].cost_with(width, max_passes, rows[t]) <= max_tokens for t, width in enumerate(tokens)
                )
            if not fits:
                groups.append([])
                steps = [_OpenStep() for _ in tokens]
            groups[-1].append(document)
            for step, width, step_rows in zip(steps, tokens, rows):
                step.add(width, step_rows)
        return groups

    @staticmethod
    def require_a_batch_size(max_tokens: Optional[int], max_sentences: Optional[int]):
        if max_tokens is None and max_sentences is None:
            raise DocumentDataError("give --max-tokens or --batch-size to size the batches")

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

    def whole_chunk_step(self, group_index: int, group: List[Document]) -> SentenceStep:
        """The one batch of a group of whole chunks: every sentence a row, a chunk's rows in its lane."""
        rows = [(lane, t) for lane, chunk in enumerate(group) for t in range(chunk.length)]
        return SentenceStep(
            StepPosition(self.stream, group_index, 0, ends_group=True),
            sentences=tuple(group[lane].first + t for lane, t in rows),
            lanes=tuple(lane for lane, _ in rows),
            chunk_positions=tuple(t for _, t in rows),
        )

    def group_steps(
        self,
        group_index: int,
        group: List[Document],
        context: Tuple[int, int] = (0, 0),
        max_positions=None,
        max_passes: int = 1,
        chunked: bool = False,
    ) -> List[SentenceStep]:
        """The batches of one group: step t holds sentence t of every document that long, in
        up to ``max_passes`` forward passes (widths as ``groups`` counted them). With
        ``chunked``, the documents are chunks: step 0 brings each chunk's sentences."""
        steps = []
        length = max(document.length for document in group)
        widths = [self.step_tokens(document, context, max_positions) for document in group]
        for t in range(length):
            lanes = [lane for lane, document in enumerate(group) if t < document.length]
            _, passes = forward_passes([widths[lane][t] for lane in lanes], max_passes)
            steps.append(
                SentenceStep(
                    StepPosition(self.stream, group_index, t, ends_group=t == length - 1),
                    sentences=tuple(group[lane].first + t for lane in lanes),
                    lanes=tuple(lanes),
                    passes=tuple(tuple(rows) for rows in passes) if len(passes) > 1 else (),
                    chunk_positions=(t,) * len(lanes) if chunked else (),
                    chunk_starts=tuple(
                        tuple(range(group[lane].first, group[lane].first + group[lane].length)) for lane in lanes
                    ) if chunked and t == 0 else (),
                )
            )
        return steps

    def collate_step(self, step: SentenceStep) -> dict:
        """fairseq's batch for one step, plus each row's ``lanes`` and the step's ``position``;
        a step in several forward passes is ``{"position", "passes"}``, a batch per pass."""
        if step.packed:
            passes = [self.collate_packed(step, rows) for rows in step.packed]
            return passes[0] if len(passes) == 1 else {"position": step.position, "passes": passes}
        if step.passes:
            return {
                "position": step.position,
                "passes": [
                    self.collate_rows(step, [step.sentences[row] for row in rows], [step.lanes[row] for row in rows])
                    for rows in step.passes
                ],
            }
        return self.collate_rows(step, step.sentences, step.lanes)

    def collate_rows(self, step: SentenceStep, sentences: Sequence[int], lanes: Sequence[int]) -> dict:
        batch = self.pairs.collater([self.pairs[index] for index in sentences])
        ids = batch["id"].tolist()
        lane_of = dict(zip(sentences, lanes))
        batch["lanes"] = torch.tensor([lane_of[index] for index in ids])
        batch["position"] = step.position
        if step.continues:
            continues_of = dict(zip(step.sentences, step.continues))
            batch["continues"] = torch.tensor([continues_of[index] for index in ids])
        self.add_chosen_context(batch)
        if step.chunk_positions:
            position_of = dict(zip(step.sentences, step.chunk_positions))
            start_of = dict(zip(step.sentences, step.chunk_starts))
            batch["net_input"].update(chunk_inputs(
                [position_of[index] for index in ids],
                [[self.pairs[j]["source"] for j in start_of[index]] if index in start_of else None for index in ids],
                self.pairs.src_dict.pad(),
            ))
        return batch

    def collate_packed(self, step: SentenceStep, rows: Tuple[Tuple[int, ...], ...]) -> dict:
        """The batch of one pass of ``step`` whose sentences lie several to a row (``rows``: the
        positions in the step of each row's sentences): fairseq's keys, every per-row one per
        sentence (``id``, ``lanes``, ``continues``, in the rows' order), and ``packed_rows``."""
        order = [place for row in rows for place in row]
        sentences = [step.sentences[place] for place in order]
        items = [self.pairs[index] for index in sentences]
        dictionary = self.pairs.src_dict
        net_input, target, layout = collate_packed(
            [item["source"] for item in items], [item["target"] for item in items],
            packed_places(rows),
            dictionary.pad(), dictionary.eos(),
        )
        batch = {
            "id": torch.tensor(sentences),
            "nsentences": len(sentences),
            "ntokens": int(sum(item["target"].numel() for item in items)),
            "net_input": net_input,
            "target": target,
            "lanes": torch.tensor([step.lanes[place] for place in order]),
            "position": step.position,
            "packed_rows": layout.to_batch(),
        }
        if step.continues:
            batch["continues"] = torch.tensor([step.continues[place] for place in order])
        return batch

    def add_chosen_context(self, batch: dict):
        """Each row's chosen context sentences into ``batch``'s ``net_input``, where the split has
        them (``chosen_context.py``)."""
        if self.chosen is not None:
            batch["net_input"].update(self.chosen.inputs(batch["id"].tolist(), self.pairs))


def packed_places(rows: Sequence[Sequence[int]]) -> List[List[int]]:
    """Rows of step positions renumbered as the pass lists its sentences: the rows' one after the other."""
    places, first = [], 0
    for row in rows:
        places.append(list(range(first, first + len(row))))
        first += len(row)
    return places


def side_limits(max_positions) -> Tuple[Optional[int], Optional[int]]:
    """(source, target) limits of fairseq's ``max_positions`` (a number, a pair, or None)."""
    if isinstance(max_positions, tuple):
        return max_positions
    return max_positions, max_positions


def deal_to_shards(steps: List[int], num_shards: int, what: str = "document groups") -> List[List[int]]:
    """Indices of ``what`` per shard, given each one's number of ``steps``: longest first, each
    to the shard with the fewest steps."""
    if len(steps) < num_shards:
        raise DocumentDataError(
            f"{len(steps)} {what} cannot feed {num_shards} workers: every worker "
            "needs a document of each split; use fewer workers"
        )
    shards: List[List[int]] = [[] for _ in range(num_shards)]
    load = [0] * num_shards
    for index in sorted(range(len(steps)), key=lambda i: (-steps[i], i)):
        shard = min(range(num_shards), key=lambda s: (load[s], s))
        shards[shard].append(index)
        load[shard] += steps[index]
    return shards


def windows_of(steps: List[SentenceStep], window: Tuple[Optional[int], Optional[int]], rng) -> List[List[SentenceStep]]:
    """Cut a group's steps into optimisation windows of random size within ``window``."""
    low, high = window
    if low is None:
        return [steps]
    windows, start = [], 0
    while start < len(steps):
        size = int(rng.randint(low, high + 1))
        windows.append(steps[start : start + size])
        start += size
    return windows


def steps_of(sample: dict) -> List[dict]:
    """The sentence steps of a collated item: a training window's, or the one step it is.

    fairseq replays its "dummy" batch (the first batch of the iterator it made last, which may
    be of another split) on workers that ran out of items, so any step method may get either."""
    return sample["steps"] if "steps" in sample else [sample]


def passes_of(step: dict) -> List[dict]:
    """The forward passes of a collated step: its batches, or the one batch it is."""
    return step["passes"] if "passes" in step else [step]


def plan_digest(plan) -> str:
    """A digest of an epoch's plan (what ``repr`` shows of it: steps, windows, batches of indices)."""
    return hashlib.sha256(repr(plan).encode("utf-8")).hexdigest()


class EpochItems(torch.utils.data.Dataset):
    """One epoch of one worker: each item is a window (training), a step, or ``None`` (padding),
    dealt from ``per_shard``, every worker's items."""

    def __init__(self, dataset: DocumentDataset, per_shard: List[list], shard_id: int, windows: bool):
        longest = max(len(items) for items in per_shard)
        own = per_shard[shard_id]
        self.dataset = dataset
        self.items: List[Optional[List[SentenceStep]]] = own + [None] * (longest - len(own))  # fairseq's dummy batches
        self.windows = windows
        self.per_shard = per_shard

    @functools.cached_property
    def plan(self) -> str:
        """A digest of every worker's items, the same for all (``plan_digest``)."""
        return plan_digest(self.per_shard)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]

    def steps_before(self, position: StepPosition) -> List[SentenceStep]:
        """The steps of ``position``'s group before it, in order, from which what its lanes carry
        into it comes: all of them, or with lanes that refill (``refilled_lanes.py``) those since
        the earliest start of the documents its rows go on with."""
        group = [step for item in self.items if item for step in item if step.position.group == position.group]
        earlier = [step for step in group if step.position.step < position.step]
        current = next(step for step in group if step.position.step == position.step)
        if not current.continues:
            return earlier
        waiting = {lane for lane, goes_on in zip(current.lanes, current.continues) if goes_on}
        first = len(earlier)
        while waiting and first > 0:
            first -= 1
            waiting -= {lane for lane, goes_on in zip(earlier[first].lanes, earlier[first].continues) if not goes_on}
        return earlier[first:]

    def collater(self, items):
        (item,) = items
        if item is None:
            return {}
        if self.windows:
            return {"steps": [self.dataset.collate_step(step) for step in item]}
        (step,) = item
        return self.dataset.collate_step(step)


def plan_epoch(
    dataset: DocumentDataset,
    max_tokens: Optional[int],
    max_sentences: Optional[int],
    num_shards: int,
    shard_id: int,
    seed: int,
    epoch: int,
    window: Optional[Tuple[Optional[int], Optional[int]]],
    context: Tuple[int, int] = (0, 0),
    max_positions=None,
    max_passes: int = 1,
    chunk_sentences: Optional[int] = None,
    whole_chunks: bool = False,
) -> EpochItems:
    """The items worker ``shard_id`` sees in ``epoch``; ``window`` None means one step an item.
    ``context`` and ``max_positions`` size the steps (``DocumentDataset.step_tokens``), which go
    through the model in up to ``max_passes`` forward passes each. ``chunk_sentences``: the
    documents are cut into chunks (``chunks.py``), which go whole into one batch each group
    with ``whole_chunks``, else sentence step by sentence step."""
    if whole_chunks:
        groups = dataset.whole_chunk_groups(max_tokens, max_sentences, chunk_sentences)
    else:
        groups = dataset.groups(max_tokens, max_sentences, context, max_positions, max_passes, chunk_sentences)
        if len(groups) < num_shards:  # a small split: fewer lanes per group, so every worker has one
            lanes = max(1, len(dataset.documents) // num_shards)
            groups = dataset.groups(
                max_tokens, min(lanes, max_sentences or lanes), context, max_positions, max_passes, chunk_sentences
            )
    per_shard = []
    steps = [1 if whole_chunks else max(d.length for d in group) for group in groups]
    for shard, group_indices in enumerate(deal_to_shards(steps, num_shards)):
        items: List[List[SentenceStep]] = []
        with data_utils.numpy_seed(seed, epoch, shard):
            if window is not None:
                group_indices = list(np.random.permutation(group_indices))
            for g in group_indices:
                if whole_chunks:
                    group_steps = [dataset.whole_chunk_step(int(g), groups[g])]
                else:
                    group_steps = dataset.group_steps(
                        int(g), groups[g], context, max_positions, max_passes, chunked=chunk_sentences is not None
                    )
                if window is None:
                    items.extend([step] for step in group_steps)
                else:
                    items.extend(windows_of(group_steps, window, np.random))
        per_shard.append(items)
    return EpochItems(dataset, per_shard, shard_id, windows=window is not None)
