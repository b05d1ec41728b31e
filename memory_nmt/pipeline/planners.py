"""The planner interface: how one worker's batches of a split and epoch are planned, and the planners of lanes.

fairseq asks the task for an epoch's batches (``get_batch_iterator``): the request is an
``EpochRequest`` (the batch-size limits, the data-parallel workers and this one's shard, the
seed and the epoch). A planner answers it with a ``PlannedEpoch``: the items, the batches
fairseq's iterator takes them in, and a digest of every worker's batches. Every planner has the
one method ``plan(dataset, request)``; a training planner also says what its batches are
(``describe``, for the log). Which planner a split gets is the regime's choice (``regime.py``). The planners:

- ``DocumentLanes`` (here): documents of similar length in lanes, one sentence step an item
  (``DocumentDataset.groups``, ``data.py``); validation and decoding, whatever the system;
- ``WholeChunks`` (here): the training batches of a system that reads whole chunks
  (``chunks.py``), every sentence of a group's chunks a row, one batch an update;
- ``RefilledLanes`` (``refilled_lanes.py``): training in lanes that refill, windows of steps;
- ``ShuffledSentences`` (``sentence_batches.py``): training on shuffled sentences with their context.

The planners of lanes deal whole groups (or documents) to the workers, longest first, each to
the worker with the fewest steps so far (``deal_to_shards``), so every document lands in
exactly one lane of one worker; a worker with fewer items gets empty ones at the end, which
fairseq turns into zero-weight dummy batches, so every worker runs the same number of batches.
"""
import functools
import hashlib
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import torch
from fairseq.data import data_utils

from .data import DocumentDataError, DocumentDataset
from .lane_steps import SentenceStep, StepPosition, digest_text
from .samples import lane_window_sample


@dataclass(frozen=True)
class EpochRequest:
    """What fairseq asks for: one worker's (``shard_id`` of ``num_shards``) batches of ``epoch``,
    each within ``max_tokens`` padded tokens and ``max_sentences`` rows (either may be None)."""

    max_tokens: Optional[int]
    max_sentences: Optional[int]
    num_shards: int = 1
    shard_id: int = 0
    seed: int = 1
    epoch: int = 1


class PlannedEpoch:
    """One epoch of one worker: ``items`` (a dataset whose ``collater`` makes each batch),
    ``batches`` (lists of item indices, fairseq's batch sampler) and ``digested``, what the digest
    covers: every worker's batches, so it is the same for all (``task.py`` refuses to resume
    inside an epoch planned otherwise). With ``fairseq_shards``, fairseq's iterator deals
    ``batches`` to the workers and shuffles them; otherwise they are this worker's, in order."""

    def __init__(self, items, batches: list, digested, fairseq_shards: bool = False):
        self.items = items
        self.batches = batches
        self.digested = digested
        self.fairseq_shards = fairseq_shards

    @functools.cached_property
    def digest(self) -> str:
        return plan_digest(self.digested)


def plan_digest(plan) -> str:
    """A digest of an epoch's plan (``plan_text``)."""
    return hashlib.sha256(plan_text(plan).encode("utf-8")).hexdigest()


def plan_text(plan) -> str:
    """An epoch's plan as text: its lists (of workers, windows, steps) as Python writes lists, each
    step as ``lane_steps.digest_text`` writes it, anything else (batches of indices, the seed) by ``repr``."""
    if isinstance(plan, list):
        return "[" + ", ".join(plan_text(part) for part in plan) + "]"
    if isinstance(plan, SentenceStep):
        return digest_text(plan)
    return repr(plan)


class EpochItems(torch.utils.data.Dataset):
    """One worker's items of an epoch in lanes: each a window of steps (training), a step, or
    ``None`` (padding), dealt from ``per_shard``, every worker's items."""

    def __init__(self, dataset: DocumentDataset, per_shard: List[list], shard_id: int, windows: bool):
        longest = max(len(items) for items in per_shard)
        own = per_shard[shard_id]
        self.dataset = dataset
        self.items: List[Optional[List[SentenceStep]]] = own + [None] * (longest - len(own))  # fairseq's dummy batches
        self.windows = windows

    @staticmethod
    def planned(dataset: DocumentDataset, per_shard: List[list], shard_id: int, windows: bool) -> PlannedEpoch:
        items = EpochItems(dataset, per_shard, shard_id, windows)
        return PlannedEpoch(items, [[i] for i in range(len(items))], per_shard)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]

    def steps_before(self, position: StepPosition) -> List[SentenceStep]:
        """The steps of ``position``'s group before it, in order, from which what its lanes carry
        into it comes (the step's ``first_carried``)."""
        group = [step for item in self.items if item for step in item if step.position.group == position.group]
        earlier = [step for step in group if step.position.step < position.step]
        current = next(step for step in group if step.position.step == position.step)
        return earlier[current.first_carried(earlier):]

    def samples_before(self, position: StepPosition) -> List[dict]:
        """The batches of ``steps_before(position)``."""
        return [step.collate(self.dataset) for step in self.steps_before(position)]

    def collater(self, items):
        (item,) = items
        if item is None:
            return {}
        if self.windows:
            return lane_window_sample([step.collate(self.dataset) for step in item])
        (step,) = item
        return step.collate(self.dataset)


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


@dataclass(frozen=True)
class DocumentLanes:
    """Documents (or their chunks of ``chunk_sentences``) of similar length in lanes, one sentence
    step an item, in order; a step's width counts the ``context`` sentences its system reads
    before each sentence, cut to ``max_positions`` (``DocumentDataset.step_tokens``)."""

    context: Tuple[int, int] = (0, 0)
    max_positions: object = None
    chunk_sentences: Optional[int] = None

    def plan(self, dataset: DocumentDataset, request: EpochRequest) -> PlannedEpoch:
        groups = dataset.groups(request.max_tokens, request.max_sentences, self.context, self.max_positions,
                                self.chunk_sentences)
        if len(groups) < request.num_shards:  # a small split: fewer lanes per group, so every worker has one
            lanes = max(1, len(dataset.documents) // request.num_shards)
            groups = dataset.groups(request.max_tokens, min(lanes, request.max_sentences or lanes), self.context,
                                    self.max_positions, self.chunk_sentences)
        lengths = [max(document.length for document in group) for group in groups]
        per_shard = [
            [[step] for g in group_indices
             for step in dataset.group_steps(g, groups[g], chunked=self.chunk_sentences is not None)]
            for group_indices in deal_to_shards(lengths, request.num_shards)
        ]
        return EpochItems.planned(dataset, per_shard, request.shard_id, windows=False)


@dataclass(frozen=True)
class WholeChunks:
    """The training batches of a system that reads whole chunks of ``chunk_sentences``: each
    group's chunks whole in one batch (``DocumentDataset.whole_chunk_groups``), one batch an
    update, the groups in an order drawn anew every epoch."""

    chunk_sentences: int

    def describe(self) -> str:
        return "whole chunks, one batch an update (chunks.py)"

    def plan(self, dataset: DocumentDataset, request: EpochRequest) -> PlannedEpoch:
        groups = dataset.whole_chunk_groups(request.max_tokens, request.max_sentences, self.chunk_sentences)
        per_shard = []
        for shard, group_indices in enumerate(deal_to_shards([1] * len(groups), request.num_shards)):
            with data_utils.numpy_seed(request.seed, request.epoch, shard):
                order = np.random.permutation(group_indices)
            per_shard.append([[dataset.whole_chunk_step(int(g), groups[g])] for g in order])
        return EpochItems.planned(dataset, per_shard, request.shard_id, windows=True)
