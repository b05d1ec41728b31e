"""The sentence steps of documents in lanes: one type a batching regime, each collating its own batch.

The planners of lanes (``planners.py``, ``refilled_lanes.py``) plan an epoch as sentence steps,
each of the kind its regime batches in, and each kind made in one place:

- ``SentenceStep`` (validation and decoding, ``DocumentDataset.group_steps`` in ``data.py``):
  sentence t of every document of its group that long, one a row. Every other kind is one of
  these with more.
- ``ChunkStep`` (the same, for a system that reads whole chunks, ``chunks.py``): its documents
  are chunks; each row tells its sentence's index in its chunk, and a chunk's first sentence
  brings the chunk's source.
- ``WholeChunkStep`` (training on whole chunks, ``DocumentDataset.whole_chunk_step``): every
  sentence of its group's chunks a row, the only step of its group.
- ``RefilledStep`` (training in lanes that refill, ``refilled_lanes.OneSentenceARow``): each
  lane's next sentence, one a row, in one forward pass or several; each row says whether it goes
  on with its lane's document.
- ``PackedStep`` (the same, ``refilled_lanes.SentencesPacked``): its sentences several to a row
  (``packing.py``).

A step's forward passes and packed rows change only the padding: its rows stay one step for the
carry and the gradient (``criterion.py``).

Every step has its ``position`` (split, group, step), its ``sentences`` (dataset indices) and each
sentence's lane. ``collate(dataset)`` makes its batch (``samples.py``'s ``LaneStep``: fairseq's
batch of each forward pass with each row's lane); ``first_carried(earlier)`` says from which of
its group's earlier steps what its lanes carry into it comes (replayed when training resumes
inside a group). ``digest_text`` writes a training step into its epoch's plan digest
(``planners.plan_digest``).
"""
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import torch
from torch import Tensor

from .chunks import chunk_inputs
from .packing import collate_packed
from .samples import lane_pass, lane_step_sample

Rows = Tuple[Tuple[int, ...], ...]  # positions in a step's ``sentences``, row by row or pass by pass


@dataclass(frozen=True)
class StepPosition:
    """Where a batch stands: which stream (split), group and step; whether the group ends."""

    stream: str
    group: int
    step: int
    ends_group: bool


@dataclass(frozen=True)
class SentenceStep:
    """Validation's and decoding's step: sentence t of every document of its group that long,
    one a row, each in its own lane; the fields and methods every kind of step has."""

    position: StepPosition
    sentences: Tuple[int, ...]  # dataset indices, one per lane still in its document
    lanes: Tuple[int, ...]

    def collate(self, dataset) -> dict:
        """The step's batch: one forward pass of all its sentences."""
        return lane_step_sample(self.position, [self.forward_pass(dataset, self.sentences)])

    def forward_pass(self, dataset, sentences: Sequence[int]) -> dict:
        """One forward pass of ``sentences`` of the step, one a row (fairseq orders the rows)."""
        batch = dataset.sentence_rows(sentences)
        return lane_pass(batch, in_row_order(batch, self.sentences, self.lanes), self.position)

    def first_carried(self, earlier: Sequence["SentenceStep"]) -> int:
        """Where, in ``earlier`` (its group's steps before it), the steps begin from which what its
        lanes carry into it comes: at the first (each lane holds one document from the group's start)."""
        return 0


@dataclass(frozen=True)
class ChunkStep(SentenceStep):
    """Validation's and decoding's step of a system that reads whole chunks: its documents are
    chunks, each row tells its sentence's index in its chunk, and at a chunk's first sentence the
    row brings the chunk's source sentences."""

    chunk_positions: Tuple[int, ...]  # each sentence's index in its chunk
    chunk_starts: Tuple[Tuple[int, ...], ...]  # per row, its chunk's sentences where it starts it

    def forward_pass(self, dataset, sentences: Sequence[int]) -> dict:
        batch = super().forward_pass(dataset, sentences)
        starts = dict(zip(self.sentences, self.chunk_starts))
        ids = batch["id"].tolist()
        batch["net_input"].update(chunk_inputs(
            in_row_order(batch, self.sentences, self.chunk_positions).tolist(),
            [[dataset.pairs[j]["source"] for j in starts[index]] if index in starts else None for index in ids],
            dataset.pairs.src_dict.pad(),
        ))
        return batch


@dataclass(frozen=True)
class WholeChunkStep(SentenceStep):
    """Training's batch of whole chunks: every sentence of its group's chunks a row, a chunk's rows
    in its lane, each row telling its sentence's index in its chunk; the only step of its group."""

    chunk_positions: Tuple[int, ...]

    def forward_pass(self, dataset, sentences: Sequence[int]) -> dict:
        batch = super().forward_pass(dataset, sentences)
        batch["net_input"].update(chunk_inputs(
            in_row_order(batch, self.sentences, self.chunk_positions).tolist(), [None] * len(sentences),
            dataset.pairs.src_dict.pad(),
        ))
        return batch


@dataclass(frozen=True)
class InRefilledLanes(SentenceStep):
    """What the steps of lanes that refill (``refilled_lanes.py``) have besides a sentence step: each
    row says whether it goes on with its lane's document (``continues``), so what a lane carries into
    a step comes from the start of the documents its rows go on with. Made only as one of its two
    kinds, ``RefilledStep`` and ``PackedStep``."""

    continues: Tuple[bool, ...]

    def first_carried(self, earlier: Sequence["SentenceStep"]) -> int:
        """The first of ``earlier`` at or after which every document its rows go on with started,
        and at least the step before (whose carry the store expects)."""
        waiting = {lane for lane, goes_on in zip(self.lanes, self.continues) if goes_on}
        first = len(earlier)
        while first == len(earlier) or (waiting and first > 0):
            first -= 1
            waiting -= {lane for lane, goes_on in zip(earlier[first].lanes, earlier[first].continues) if not goes_on}
        return first


@dataclass(frozen=True)
class RefilledStep(InRefilledLanes):
    """Training's step in lanes that refill, one sentence a row: the rows go through the model in one
    forward pass, or in ``passes`` (each its rows' positions in ``sentences``)."""

    passes: Rows = ()

    def collate(self, dataset) -> dict:
        passes = self.passes or (tuple(range(len(self.sentences))),)
        return lane_step_sample(self.position, [
            self.forward_pass(dataset, [self.sentences[place] for place in rows]) for rows in passes
        ])

    def forward_pass(self, dataset, sentences: Sequence[int]) -> dict:
        batch = super().forward_pass(dataset, sentences)
        batch["continues"] = in_row_order(batch, self.sentences, self.continues)
        return batch


@dataclass(frozen=True)
class PackedStep(InRefilledLanes):
    """Training's step in lanes that refill with its sentences several to a row (``packing.py``):
    ``packed`` holds its passes, each its rows, each the positions in ``sentences`` of the row's
    sentences."""

    packed: Tuple[Rows, ...]

    def collate(self, dataset) -> dict:
        return lane_step_sample(self.position, [self.packed_pass(dataset, rows) for rows in self.packed])

    def packed_pass(self, dataset, rows: Rows) -> dict:
        """The batch of one pass (``rows``): fairseq's keys, every per-row one per sentence (``id``,
        ``lanes``, ``continues``, in the rows' order), and where the sentences lie."""
        order = [place for row in rows for place in row]
        sentences = [self.sentences[place] for place in order]
        items = [dataset.pairs[index] for index in sentences]
        net_input, target, layout = collate_packed(
            [item["source"] for item in items], [item["target"] for item in items],
            packed_places(rows),
            dataset.pairs.src_dict.pad(), dataset.pairs.eos,  # the token targets end with (language_tokens.py)
        )
        batch = {
            "id": torch.tensor(sentences),
            "nsentences": len(sentences),
            "ntokens": int(sum(item["target"].numel() for item in items)),
            "net_input": net_input,
            "target": target,
        }
        return lane_pass(
            batch, torch.tensor([self.lanes[place] for place in order]), self.position,
            continues=torch.tensor([self.continues[place] for place in order]), packed_rows=layout,
        )


def in_row_order(batch: dict, sentences: Sequence[int], values: Sequence) -> Tensor:
    """``values`` (one per sentence of a step) in the order of ``batch``'s rows, which fairseq orders."""
    value_of = dict(zip(sentences, values))
    return torch.tensor([value_of[index] for index in batch["id"].tolist()])


def packed_places(rows: Rows) -> List[List[int]]:
    """Rows of step positions renumbered as the pass lists its sentences: the rows' one after the other."""
    places, first = [], 0
    for row in rows:
        places.append(list(range(first, first + len(row))))
        first += len(row)
    return places


DIGESTED_FIELDS = ("position", "sentences", "lanes", "passes", "chunk_positions", "chunk_starts", "continues", "packed")


def digest_text(step: SentenceStep) -> str:
    """A step as its epoch's plan digest writes it: every field a step of any kind may have, in
    one fixed order, () for those its kind lacks. The text does not follow the types' names or
    fields, so a checkpoint saved inside an epoch resumes wherever the plan is the same."""
    fields = ", ".join(f"{name}={getattr(step, name, ())!r}" for name in DIGESTED_FIELDS)
    return f"SentenceStep({fields})"
