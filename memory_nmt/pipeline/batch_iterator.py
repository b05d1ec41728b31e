"""The document task's epoch iterator: fairseq's ``EpochBatchIterator`` with four differences.

``task.py``'s ``get_batch_iterator`` returns a ``DocumentBatchIterator`` over the batches its
planner made (``planners.py``); fairseq-train, fairseq-generate and the plugin's tools iterate it
as any fairseq iterator.

1. An epoch lets its DataLoader, and with it the DataLoader's worker processes, go as soon as its
   last batch is taken. fairseq leaves a finished epoch's workers running until its iterator is
   garbage collected: its own tasks keep one iterator per split for the whole run, where this task
   makes one per split and epoch, and a dropped one is part of a reference cycle (fairseq's batch
   sampler refers back to its iterator). A collection inside a later DataLoader worker, which
   inherits that garbage when forked, then had torch stop workers that were not its children:
   fairseq-validate and fairseq-train printed "Exception ignored ... can only test a child process".
2. A training iterator keeps a digest of its epoch's batches (``PLAN``) in its state, and refuses
   to resume inside an epoch planned otherwise than the checkpoint's: the batches left would
   repeat or skip sentences.
3. It keeps the plugin's options that shape training (``TRAINING_OPTIONS``: flag to value) too, and
   names, in a warning, those a resumed run changes: fairseq-train resumes with its command line's
   options, so an option left out, or a default changed since the run began, would otherwise change
   the training without a word.
4. The batches it makes ahead (``--data-buffer-size``) are made in a thread that ends before the
   interpreter exits, where fairseq's could abort a run stopped inside an epoch (``batches_ahead.py``).
"""
import logging
from typing import Optional

from fairseq.data import iterators

from .batches_ahead import BatchesAhead
from .data import DocumentDataError
from .option_ranges import flag_of

logger = logging.getLogger(__name__)

LANE_TRAINING_OPTIONS = ("optimization_window", "lane_rows", "passes_per_step")  # the task's, for training in lanes
CRITERION_TRAINING_OPTIONS = ("gradient_reach", "gradient_across_windows", "max_graph_tokens")  # ... the criterion's
PLAN = "plan_digest"  # in the training iterator's state: a digest of its epoch's batches
TRAINING_OPTIONS = "training_options"  # in the training iterator's state: the plugin's options it trained with


class DocumentBatchIterator(iterators.EpochBatchIterator):
    """fairseq's EpochBatchIterator, with the differences above."""

    def __init__(self, *args, buffer_size: int = 0, plan: Optional[str] = None,
                 training_options: Optional[dict] = None, **kwargs):
        super().__init__(*args, **kwargs)  # without fairseq's batches made ahead: its own are made below
        self.batches_ahead = min(buffer_size, 20)  # fairseq's bound
        self.plan = plan
        self.training_options = training_options

    def state_dict(self):
        return {**super().state_dict(), PLAN: self.plan, TRAINING_OPTIONS: self.training_options}

    def load_state_dict(self, state_dict):
        began_with = state_dict.get(TRAINING_OPTIONS)
        if began_with and self.training_options:
            changed = [f"{flag} {value} (now {self.training_options[flag]})" for flag, value in began_with.items()
                       if flag in self.training_options and self.training_options[flag] != value]
            if changed:
                logger.warning(
                    "resuming a run begun with other training options than this command line's: %s. "
                    "fairseq-train resumes with its command line's options (and a default may have changed "
                    "since the run began): give those options to train on as the run began", ", ".join(changed)
                )
        saved, done = state_dict.get(PLAN), state_dict.get("iterations_in_epoch", 0)
        if done and saved is not None and self.plan is not None and saved != self.plan:
            raise DocumentDataError(
                f"the checkpoint was saved {done} batches into epoch {state_dict['epoch']}, whose training "
                "batches are planned otherwise now (by an option that shapes them: --max-tokens, "
                "--batch-size, --optimization-window, --lane-rows, --passes-per-step, "
                "--training-batches, --seed, the number of workers; or by other data): the rest of "
                "the epoch would repeat or skip sentences. Give the options the run began with "
                "(fairseq-train resumes with its command line's), or --reset-dataloader to start "
                "again from epoch 1"
            )
        super().load_state_dict(state_dict)

    def _get_iterator_for_epoch(self, epoch, shuffle, fix_batches_to_gpus=False, offset=0):
        batches = super()._get_iterator_for_epoch(epoch, shuffle, fix_batches_to_gpus, offset)
        if batches is None:
            return None
        items = let_go_before_last(batches)
        if self.batches_ahead > 0:
            items = BatchesAhead(self.batches_ahead, items, batches.total - batches.n)
        return iterators.CountingIterator(items, start=batches.n, total=batches.total)


def training_options(task_cfg, criterion_options: dict, in_lanes: bool) -> dict:
    """The plugin's options that shape how the model trains, flag to value as its command line gives
    it, for the training iterator's state: --training-batches, and where the model trains in lanes
    those of training in lanes, the task's and the criterion's (``criterion_options``; elsewhere they
    do nothing)."""
    values = {"training_batches": task_cfg.training_batches}
    if in_lanes:
        values.update({name: getattr(task_cfg, name) for name in LANE_TRAINING_OPTIONS}, **criterion_options)
    return {flag_of(name): "none" if value is None else str(value) for name, value in values.items()}


def let_go_before_last(batches):
    """The items of ``batches`` (fairseq's CountingIterator over a DataLoader); ``batches`` is dropped
    before the last item is handed on, so the DataLoader goes at once."""
    while batches.has_next():
        batch = next(batches)
        if not batches.has_next():
            del batches
            yield batch
            return
        yield batch
