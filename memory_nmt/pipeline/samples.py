"""What a batch of the document pipeline is, as a type, read from fairseq's dict in one place.

Each batching regime (``regime.py``) has its kind of batch:

- ``LaneStep``: one sentence step of documents in lanes (``data.py``): where it stands in its
  group (``position``) and its forward passes, each a ``ForwardPass``: fairseq's batch of some of
  the step's sentences, each row's lane, where lanes refill whether the row goes on with its
  lane's document (``refilled_lanes.py``), and where sentences packed several to a row lie
  (``packing.py``). Validation and decoding go step by step; a batch of whole chunks
  (``chunks.py``) is a step too, the only one of its group.
- ``LaneWindow``: consecutive steps of one group whose gradients make one update (training, for
  systems that train in lanes or on whole chunks).
- ``SentencesBatch``: shuffled sentences, each bringing the previous sentences its context is
  made of (``sentence_batches.py``): one update.
- ``LinesStep``: fairseq-interactive's (and the hub's) lines, one of each open document
  (``interactive.py``), and the lanes whose documents have ended.

fairseq moves a batch to the device (and to half precision) as a dict, which its trainer also
replays as the dummy batch of a worker that ran out of batches, and fairseq-generate and the
trainer read fairseq's own keys in it. So a batch travels as fairseq's dict plus the key ``KIND``
naming its type (the ``*_sample`` functions write it), and ``read_sample`` reads it back into
its type where the task, the criterion and the generator take it: no other code tells a batch's
kind from its keys.
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from torch import Tensor

from .packing import PackedRows

KIND = "document_batch"
LANE_STEP, LANE_WINDOW, SENTENCES, LINES = "lane_step", "lane_window", "sentences", "lines"


@dataclass
class ForwardPass:
    """Rows that go through the model together: fairseq's ``batch`` (``id``, ``nsentences``,
    ``ntokens``, ``net_input``, ``target``), each row's lane, whether it goes on with its lane's
    document (None: every row does, or, at a group's first step, none), and where its sentences
    lie when several share a row (None: one a row)."""

    batch: dict
    lanes: Tensor
    continues: Optional[Tensor] = None
    packed_rows: Optional[PackedRows] = None

    @property
    def net_input(self) -> dict:
        return self.batch["net_input"]

    @property
    def target(self) -> Tensor:
        return self.batch["target"]

    @property
    def padded_tokens(self) -> int:
        """Its padded tokens as --max-tokens counts them: its rows times the wider side."""
        return max(self.net_input["src_tokens"].numel(), self.target.numel())


@dataclass
class LaneStep:
    position: object  # lane_steps.StepPosition: which stream, group and step
    passes: List[ForwardPass]

    @property
    def only_pass(self) -> ForwardPass:
        """The step's one forward pass (validation's and decoding's steps have one)."""
        (rows,) = self.passes
        return rows


@dataclass
class LaneWindow:
    steps: List[LaneStep]


@dataclass
class SentencesBatch:
    rows: ForwardPass
    previous_sentences: list  # per row: (source sentences, target sentences), oldest first


@dataclass
class LinesStep:
    rows: ForwardPass
    ended_lanes: Sequence[int]  # documents that ended in earlier buffers: their carries go


DocumentBatch = Union[LaneStep, LaneWindow, SentencesBatch, LinesStep]


def steps_in(batch: Union[LaneStep, LaneWindow]) -> List[LaneStep]:
    """The sentence steps of ``batch``: a window's, or the one step it is."""
    return batch.steps if isinstance(batch, LaneWindow) else [batch]


def passes_in(batch: DocumentBatch) -> List[ForwardPass]:
    """Every forward pass of ``batch``, in order."""
    if isinstance(batch, (LaneStep, LaneWindow)):
        return [rows for step in steps_in(batch) for rows in step.passes]
    return [batch.rows]


def lane_pass(batch: dict, lanes: Tensor, position, continues: Optional[Tensor] = None,
              packed_rows: Optional[PackedRows] = None) -> dict:
    """fairseq's ``batch`` of one forward pass of the step at ``position``, with its rows' lanes."""
    batch = {**batch, "lanes": lanes, "position": position}
    if continues is not None:
        batch["continues"] = continues
    if packed_rows is not None:
        batch["packed_rows"] = packed_rows.to_batch()
    return batch


def lane_step_sample(position, passes: List[dict]) -> dict:
    """A step's batch from its passes (``lane_pass``): the one pass itself, or the passes under ``passes``."""
    if len(passes) == 1:
        return {**passes[0], KIND: LANE_STEP}
    return {KIND: LANE_STEP, "position": position, "passes": passes}


def lane_window_sample(steps: List[dict]) -> dict:
    return {KIND: LANE_WINDOW, "steps": steps}


def sentences_sample(batch: dict, lanes: Tensor, previous_sentences: list) -> dict:
    return {**batch, KIND: SENTENCES, "lanes": lanes, "previous_sentences": previous_sentences}


def lines_sample(batch: dict, lanes: Tensor, continues: Tensor, ended_lanes: Sequence[int]) -> dict:
    return {**batch, KIND: LINES, "lanes": lanes, "continues": continues, "ended_lanes": list(ended_lanes)}


def read_sample(sample: dict) -> Optional[DocumentBatch]:
    """The batch ``sample`` is (after fairseq moved it to the device), or None for one that is not
    the pipeline's: fairseq's empty batch, or a batch fairseq made itself (fairseq-interactive's)."""
    kind = sample.get(KIND) if sample else None
    if kind == LANE_WINDOW:
        return LaneWindow([read_lane_step(step) for step in sample["steps"]])
    if kind == LANE_STEP:
        return read_lane_step(sample)
    if kind == SENTENCES:
        return SentencesBatch(ForwardPass(sample, sample["lanes"]), sample["previous_sentences"])
    if kind == LINES:
        return LinesStep(ForwardPass(sample, sample["lanes"], sample["continues"]), sample["ended_lanes"])
    return None


def read_lane_step(sample: dict) -> LaneStep:
    passes = sample["passes"] if "passes" in sample else [sample]
    return LaneStep(sample["position"], [
        ForwardPass(rows, rows["lanes"], rows.get("continues"),
                    PackedRows(**rows["packed_rows"]) if "packed_rows" in rows else None)
        for rows in passes
    ])
