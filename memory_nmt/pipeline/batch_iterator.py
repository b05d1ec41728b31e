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
2. The batches made ahead (``--data-buffer-size``, fairseq's ``BufferedIterator``, whose thread
   is a daemon) stop before the interpreter exits. Python ends a daemon thread that wakes during
   its finalization with ``pthread_exit``, and a thread woken inside a C++ call that released the
   GIL (a torch operator making or receiving a batch) then aborts the process: "terminate called
   without an active exception", exit status -6 (SIGABRT), after fairseq-train had written its last
   checkpoint. Any run that stops inside an epoch (``--max-update``, ``--stop-time-hours``) left its
   thread making batches; the test suite saw it once. At exit, each epoch still making batches is
   told to stop after the batch in hand, and its queue is emptied until the thread has ended.
3. A training iterator keeps a digest of its epoch's batches (``PLAN``) in its state, and refuses
   to resume inside an epoch planned otherwise than the checkpoint's: the batches left would
   repeat or skip sentences.
4. It keeps the plugin's options that shape training (``TRAINING_OPTIONS``: flag to value) too, and
   names, in a warning, those a resumed run changes: fairseq-train resumes with its command line's
   options, so an option left out, or a default changed since the run began, would otherwise change
   the training without a word.
"""
import atexit
import logging
import weakref
from typing import Optional

from fairseq.data import iterators

from .data import DocumentDataError

logger = logging.getLogger(__name__)

PLAN = "plan_digest"  # in the training iterator's state: a digest of its epoch's batches
TRAINING_OPTIONS = "training_options"  # in the training iterator's state: the plugin's options it trained with


class DocumentBatchIterator(iterators.EpochBatchIterator):
    """fairseq's EpochBatchIterator, with the differences above."""

    def __init__(self, *args, plan: Optional[str] = None, training_options: Optional[dict] = None,
                 buffer_size: int = 0, **kwargs):
        super().__init__(*args, buffer_size=0, **kwargs)  # the batches made ahead are this class's
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
        start, total = batches.n, batches.total
        if self.batches_ahead > 0:
            batches = iterators.CountingIterator(BatchesAhead(self.batches_ahead, batches), start=start)
        return iterators.CountingIterator(let_go_before_last(batches), start=start, total=total)


def let_go_before_last(batches):
    """The items of ``batches`` (fairseq's CountingIterator over the epoch's DataLoader, or over the
    batches made ahead from it); ``batches`` is dropped before the last item is handed on, so the
    DataLoader goes at once."""
    while batches.has_next():
        batch = next(batches)
        if not batches.has_next():
            del batches
            yield batch
            return
        yield batch


class BatchesAhead(iterators.BufferedIterator):
    """fairseq's ``BufferedIterator`` (its thread makes up to ``size`` batches ahead), stopped before
    the interpreter exits (difference 2 above)."""

    running = weakref.WeakSet()  # those whose thread may be making batches

    def __init__(self, size: int, batches):
        self.source = StoppableBatches(batches)
        super().__init__(size, self.source)
        BatchesAhead.running.add(self)

    def stop(self):
        """Make the thread end after the batch in hand, taking what it made until its end."""
        self.source.stopping = True
        if self.source.making:
            for _ in self:  # until fairseq's end of the batches, put after the last one made
                pass


class StoppableBatches:
    """What a ``BatchesAhead`` thread reads: the batches left in ``batches`` (fairseq's
    CountingIterator over the epoch's DataLoader), ending after the batch in hand once ``stopping``
    is set; ``making`` tells whether the thread is reading them (set and cleared by it)."""

    def __init__(self, batches):
        self.batches = batches
        self.stopping = False
        self.making = False

    def __len__(self):
        return len(self.batches) - self.batches.n

    def __iter__(self):
        self.making = True
        try:
            for batch in self.batches:
                yield batch
                if self.stopping:
                    return
        finally:
            self.making = False


def stop_before_exit():
    for batches in list(BatchesAhead.running):
        batches.stop()


# Registered after torch's and multiprocessing's own handlers (imported before this module), so it
# runs before them: the DataLoader's workers still run while the thread finishes its batch.
atexit.register(stop_before_exit)
