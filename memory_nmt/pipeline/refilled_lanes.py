"""Training lanes that refill: a lane goes on with its next document as soon as one ends.

A system that carries state from sentence to sentence (the default of ``system.py``'s
``training_unit``, and any system with ``--training-batches lanes``) trains on documents
walked in lanes (the planner ``RefilledLanes``, ``planners.py``'s interface). Filled as in
decoding (``data.py``), a group's lanes empty as its documents
end, and a group is only as wide as its widest step allows. Here each lane holds a stream of
documents, one after the other, so a group's steps stay full. With 5 documents A(3) B(1) C(2)
D(2) E(1) in 2 lanes, each next document going to the lane with the fewest sentences so far, no
lane longer than the longest document (3 sentences)::

    group 0:  lane 0: A1 A2 A3     step 0 = [A1 B1]   step 1 = [A2 C1*]   step 2 = [A3 C2]
              lane 1: B1 C1 C2
    group 1:  lane 0: D1 D2        step 0 = [D1 E1]   step 1 = [D2]
              lane 1: E1

(* a row that starts its lane's next document.) A step's rows say whether they continue their
lane's document (``continues``): a row that starts one reads nothing its lane carried, as a
document's first sentence never does, and no loss of it reaches the lane's previous document
(``criterion.py``). No lane grows longer than the worker's longest document: the lane with the
fewest sentences takes the next document, in the epoch's order, that still fits it, and when
none does the group ends and the next begins. So a group is at most as many steps as the
longest document (what ``--optimization-window full`` makes one update of).

Every sentence is in exactly one step of one worker an epoch and documents keep their order.
Each data-parallel worker gets its own documents (dealt by their sentences, most first, each to
the worker with the fewest) and its own lanes; one with fewer items gets empty ones at the end
(fairseq's dummy batches). The documents are dealt to lanes in an order drawn anew every epoch,
and the number of lanes is the most with which every step fits ``--max-tokens`` in up to
``--passes-per-step`` forward passes, and ``--batch-size``, found by bisection over the
epoch's dealing. How a step's sentences go into rows is its row layout, one of:

- ``OneSentenceARow``: each sentence a row (with the context a system reads before it), the
  rows padded to the widest of their pass; a step's passes (of similar widths,
  ``forward_passes``) fit --max-tokens together; its steps are ``lane_steps.RefilledStep``;
- ``SentencesPacked``: several sentences a row (``packing.py``), each pass of the step's
  sentences within --max-tokens, for a system whose sentences can be packed (``system.py``'s
  ``packs_rows``). A row is as long as the sentences it holds, not as the step's widest, so
  a long sentence does not set how many lanes the epoch has. Its steps are ``lane_steps.PackedStep``.
"""
import logging
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from fairseq.data import data_utils

from .data import Document, DocumentDataset
from .lane_steps import PackedStep, RefilledStep, Rows, SentenceStep, StepPosition
from .packing import pack, padded_tokens
from .planners import EpochItems, EpochRequest, PlannedEpoch, deal_to_shards, windows_of

logger = logging.getLogger(__name__)

Widths = Dict[Document, list]  # each document's sentences' widths, as its row layout counts them
STARVED_LANES = 0.25  # a step with fewer than this share of the epoch's lanes trains on few sentences
STARVED_STEPS = 0.25  # ... and more than this share of such steps, from a document more than
LONGEST_OVER_SHARE = 2  # ... this many times an even share of the sentences over the lanes, is said in the log


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


@dataclass(frozen=True)
class OneSentenceARow:
    """Each sentence a row, padded to the widest of its pass; a step in up to ``max_passes``
    passes of similar widths, which fit ``max_tokens`` together. A sentence's width counts the
    ``context`` sentences its system reads before it (``DocumentDataset.step_tokens``)."""

    max_tokens: Optional[int]
    max_passes: int = 1
    context: Tuple[int, int] = (0, 0)
    max_positions: object = None

    def widths(self, dataset: DocumentDataset, document: Document) -> List[int]:
        return dataset.step_tokens(document, self.context, self.max_positions)

    def least_width(self, widths: Sequence[int]) -> int:
        return min(widths)

    def refuse_wider(self, dataset: DocumentDataset, document: Document, widths: Sequence[int]):
        dataset.refuse_wider_than(self.max_tokens, document, widths, self.context)

    def passes(self, widths: Sequence[int]) -> Optional[Rows]:
        """The forward passes of rows of ``widths`` (each its rows' places; () for one), or None
        when they do not fit."""
        tokens, passes = forward_passes(list(widths), self.max_passes)
        if self.max_tokens is not None and tokens > self.max_tokens:
            return None
        return tuple(tuple(rows) for rows in passes) if len(passes) > 1 else ()

    def step(self, position: StepPosition, sentences, lanes, continues, widths) -> RefilledStep:
        """The step of ``sentences`` (of ``widths``) laid out so: one a row, in its passes."""
        return RefilledStep(position, sentences, lanes, continues, passes=self.passes(widths))


@dataclass(frozen=True)
class SentencesPacked:
    """Several sentences a row (``packing.py``, its rows chosen for a model of ``embed_dim``); a step
    in up to ``max_passes`` passes, each within ``max_tokens``. Widths are (source, target) tokens."""

    max_tokens: Optional[int]
    max_passes: int
    embed_dim: int

    def widths(self, dataset: DocumentDataset, document: Document) -> List[Tuple[int, int]]:
        first, last = document.first, document.first + document.length
        target = dataset.pairs.tgt_sizes
        return [(int(dataset.pairs.src_sizes[i]), int(target[i]) if target is not None else 0) for i in range(first, last)]

    def least_width(self, widths: Sequence[Tuple[int, int]]) -> int:
        """The fewest tokens a sentence can add to a pass: sentences that share a row share its
        width, and a row is at least as wide as the mean of its two sides' tokens."""
        return max(1, min(sum(width) // 2 for width in widths))

    def refuse_wider(self, dataset: DocumentDataset, document: Document, widths: Sequence[Tuple[int, int]]):
        dataset.refuse_wider_than(self.max_tokens, document, [max(width) for width in widths], (0, 0))

    def passes(self, widths: Sequence[Tuple[int, int]]) -> Optional[Tuple[Rows, ...]]:
        """The step's sentences, dealt to 1, 2, ... ``max_passes`` passes (longest first, in turn,
        back and forth), packed pass by pass: the fewest passes that each fit (each its rows, each
        the places of the row's sentences); None if none do."""
        order = sorted(range(len(widths)), key=lambda i: (-sum(widths[i]), i))
        for count in range(1, min(self.max_passes, len(widths)) + 1):
            dealt = [[] for _ in range(count)]
            for place, sentence in enumerate(order):
                turn, within = divmod(place, count)
                dealt[within if turn % 2 == 0 else count - 1 - within].append(sentence)
            passes = []
            for sentences in dealt:
                rows = pack([widths[i] for i in sentences], self.embed_dim, self.max_tokens)
                passes.append(tuple(tuple(sentences[i] for i in row) for row in rows))
                if self.max_tokens is not None and padded_tokens([widths[i] for i in sentences], rows) > self.max_tokens:
                    break
            else:
                return tuple(passes)
        return None

    def step(self, position: StepPosition, sentences, lanes, continues, widths) -> PackedStep:
        """The step of ``sentences`` (of ``widths``) laid out so: several a row, in its passes."""
        return PackedStep(position, sentences, lanes, continues, packed=self.passes(widths))


@dataclass(frozen=True)
class RefilledLanes:
    """The training batches of a system that trains in lanes: documents in lanes that refill,
    windows of ``window`` steps (``data.parse_window``), each step's sentences in up to
    ``max_passes`` forward passes, packed several to a row for a model of ``packed_width`` (None:
    one a row, each counting the ``context`` sentences its system reads before it, cut to
    ``max_positions``, for the reason ``unpacked_because``, which the log gives)."""

    window: Tuple[Optional[int], Optional[int]]
    max_passes: int = 1
    packed_width: Optional[int] = None
    context: Tuple[int, int] = (0, 0)
    max_positions: object = None
    unpacked_because: str = "no model built"

    def describe(self) -> str:
        rows = ("sentences packed several to a row" if self.packed_width is not None
                else f"one sentence a row ({self.unpacked_because})")
        return ("documents in lanes that refill, sentence step by sentence step, --optimization-window steps "
                f"an update (refilled_lanes.py); {rows}")

    def layout(self, max_tokens: Optional[int]):
        if self.packed_width is not None:
            return SentencesPacked(max_tokens, self.max_passes, self.packed_width)
        return OneSentenceARow(max_tokens, self.max_passes, self.context, self.max_positions)

    def plan(self, dataset: DocumentDataset, request: EpochRequest) -> PlannedEpoch:
        """The training windows of ``request``'s worker, its documents in refilled lanes, each
        step's sentences in rows as the layout (``OneSentenceARow`` or ``SentencesPacked``) lays them out."""
        layout = self.layout(request.max_tokens)
        dataset.require_a_batch_size(layout.max_tokens, request.max_sentences)
        widths = {document: layout.widths(dataset, document) for document in dataset.documents}
        for document, tokens in widths.items():
            layout.refuse_wider(dataset, document, tokens)
        per_shard = []
        shards = deal_to_shards([document.length for document in dataset.documents], request.num_shards, "documents")
        for shard, indices in enumerate(shards):
            with data_utils.numpy_seed(request.seed, request.epoch, shard):
                order = [dataset.documents[i] for i in np.random.permutation(sorted(indices))]
                lanes = most_lanes(order, widths, layout, request.max_sentences)
                steps = [
                    step for group, lanes_documents in enumerate(fill_lanes(order, lanes))
                    for step in group_steps(dataset.stream, group, lanes_documents, widths, layout)
                ]
                if shard == request.shard_id == 0 and request.epoch == 1:
                    warn_of_starved_steps(steps, lanes, order)
                per_shard.append(windows_of_groups(steps, self.window))
        return EpochItems.planned(dataset, per_shard, request.shard_id, windows=True)


def warn_of_starved_steps(steps: Sequence[SentenceStep], lanes: int, documents: Sequence[Document]):
    """Say in the log (at the first epoch) when a document much longer than the others starves the lanes:
    it runs on alone once they have ended (a lane holds one document at a time, and a document is
    never cut), each of its steps an update of a few sentences. Said when it alone is more than
    twice the steps an even share of the sentences over the lanes would take, and more than a
    quarter of the epoch's steps hold fewer than a quarter of its lanes; skewed lengths without
    such a document do not qualify."""
    longest = max(documents, key=lambda document: document.length)
    even_share = sum(document.length for document in documents) / lanes
    starved = sum(len(step.lanes) < STARVED_LANES * lanes for step in steps)
    if lanes < 2 or longest.length <= LONGEST_OVER_SHARE * even_share or starved <= STARVED_STEPS * len(steps):
        return
    typical = sorted(document.length for document in documents)[len(documents) // 2]
    logger.warning(
        "training batches of epoch 1: %d of its %d sentence steps (%.0f%%) hold fewer than a quarter of its %d "
        "lanes: document %r has %d sentences, where half the documents have at most %d, and runs on after the others "
        "have ended (a document is never cut into lanes), so those updates train on few sentences: split such "
        "documents in the document index if their parts may lose each other's context (docs/troubleshooting.md)",
        starved, len(steps), 100 * starved / len(steps), lanes, longest.doc_id, longest.length, typical,
    )


def fill_lanes(documents: Sequence[Document], lanes: int) -> List[List[List[Document]]]:
    """``documents`` dealt to groups of ``lanes`` lanes, each lane's documents one after the other and
    none longer than the longest document: the lane with the fewest sentences takes the first document,
    in the order given, that still fits it; a group ends when none does."""
    room = max(document.length for document in documents)
    waiting: Dict[int, deque] = defaultdict(deque)  # length -> places in ``documents``, in order
    for place, document in enumerate(documents):
        waiting[document.length].append(place)
    lengths = sorted(waiting)
    groups = []
    while any(waiting.values()):
        lanes_documents: List[List[Document]] = [[] for _ in range(lanes)]
        totals = [0] * lanes
        while True:
            lane = min(range(lanes), key=lambda l: (totals[l], l))
            heads = [waiting[length][0] for length in lengths if length <= room - totals[lane] and waiting[length]]
            if not heads:
                break
            document = documents[min(heads)]
            waiting[document.length].popleft()
            lanes_documents[lane].append(document)
            totals[lane] += document.length
        groups.append([queued for queued in lanes_documents if queued])
    return groups


def rows_of(lanes_documents: List[List[Document]], widths: Widths) -> List[List[Tuple[int, bool, int]]]:
    """Each lane's rows, step by step: (sentence index, continues its document, width)."""
    return [
        [(document.first + t, t > 0, widths[document][t]) for document in documents for t in range(document.length)]
        for documents in lanes_documents
    ]


def group_steps(stream: str, group: int, lanes_documents: List[List[Document]], widths: Widths,
                layout) -> List[SentenceStep]:
    """The steps of one group of refilled lanes of split ``stream``: step s holds each lane's s-th sentence."""
    lanes = rows_of(lanes_documents, widths)
    length = max(len(rows) for rows in lanes)
    steps = []
    for s in range(length):
        present = [lane for lane, rows in enumerate(lanes) if s < len(rows)]
        rows = [lanes[lane][s] for lane in present]
        steps.append(layout.step(
            StepPosition(stream, group, s, ends_group=s == length - 1),
            sentences=tuple(sentence for sentence, _, _ in rows),
            lanes=tuple(present),
            continues=tuple(goes_on for _, goes_on, _ in rows),
            widths=[width for _, _, width in rows],
        ))
    return steps


def fits(documents: Sequence[Document], lanes: int, widths: Widths, layout) -> bool:
    """Whether every step of ``documents`` dealt to ``lanes`` lanes fits ``layout``'s --max-tokens."""
    if layout.max_tokens is None:
        return True
    for lanes_documents in fill_lanes(documents, lanes):
        rows = rows_of(lanes_documents, widths)
        for s in range(max(len(lane) for lane in rows)):
            if layout.passes([lane[s][2] for lane in rows if s < len(lane)]) is None:
                return False
    return True


def most_lanes(documents: Sequence[Document], widths: Widths, layout, max_sentences: Optional[int]) -> int:
    """The most lanes with which every step fits (bisection; one lane always fits, since no
    sentence is wider than --max-tokens)."""
    high = min(len(documents), max_sentences or len(documents))
    if layout.max_tokens is not None:
        least = min(layout.least_width(tokens) for tokens in widths.values())
        high = min(high, max(1, layout.max_passes * layout.max_tokens // least))
    low = 1
    while low < high:
        middle = (low + high + 1) // 2
        if fits(documents, middle, widths, layout):
            low = middle
        else:
            high = middle - 1
    return low


def windows_of_groups(steps: List[SentenceStep], window) -> List[List[SentenceStep]]:
    """The groups' steps cut into optimisation windows, group by group (the random sizes drawn
    with numpy's generator, seeded by the caller)."""
    items, group = [], []
    for step in steps:
        group.append(step)
        if step.position.ends_group:
            items.extend(windows_of(group, window, np.random))
            group = []
    return items
