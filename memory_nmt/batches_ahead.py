"""Ends fairseq's thread that makes batches ahead before Python's finalization, where it could abort the process.

fairseq's epoch iterators make up to ``--data-buffer-size`` batches ahead (10 by default) in a
``BufferedIterator``, whose thread is a daemon. A run that stops inside an epoch (fairseq-train's
``--max-update`` or ``--stop-time-hours``) leaves it making batches, and Python ends a daemon
thread that wakes during its finalization with ``pthread_exit``: woken inside a C++ call that
released the GIL (a torch operator making or receiving a batch), the thread unwinds through a
``noexcept`` frame and the process aborts, "terminate called without an active exception", exit
status -6 (SIGABRT), after fairseq-train had written its last checkpoint (PyTorch issue 38228; this
project's CI saw it once).

Importing the plugin gives fairseq's iterators ``BatchesAhead`` in the place of
``BufferedIterator``, for every task: the same iterator, whose thread reads the batches through
``StoppableBatches``; and an ``atexit`` handler, run before the finalization, tells each thread
still making batches to end after the batch in hand and takes what it made until it has ended (for
at most ``STOP_SECONDS`` each: a thread waiting on a worker process that never answers is left as
before).
"""
import atexit
import contextlib
import queue
import time
import weakref

from fairseq.data import iterators

STOP_SECONDS = 60


class BatchesAhead(iterators.BufferedIterator):
    """fairseq's ``BufferedIterator`` (its thread makes up to ``size`` batches of ``iterable`` ahead),
    which ``stop`` ends."""

    running = weakref.WeakSet()  # those whose thread may be making batches

    def __init__(self, size: int, iterable):
        self.source = StoppableBatches(iterable)
        super().__init__(size, self.source)
        BatchesAhead.running.add(self)

    def stop(self, seconds: float):
        """End the thread after the batch in hand, taking what it puts in the queue (a batch, an error in
        making one, or the end) until it has ended or ``seconds`` have passed."""
        self.source.stopping = True
        deadline = time.monotonic() + seconds
        while self._consumer is not None and self._consumer.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)


class StoppableBatches:
    """The batches of ``batches``, ending after the one in hand once ``stopping`` is set."""

    def __init__(self, batches):
        self.batches = batches
        self.stopping = False

    def __len__(self):
        return len(self.batches)

    def take(self, n):
        """Truncate to ``n`` batches, as fairseq's ``BufferedIterator.take`` asks of what it reads,
        where ``batches`` can be truncated."""
        if hasattr(self.batches, "take"):
            self.batches.take(n)
        return self

    def __iter__(self):
        for batch in self.batches:
            yield batch
            if self.stopping:
                return


def stop_before_exit():
    for batches in list(BatchesAhead.running):
        batches.stop(STOP_SECONDS)


def stop_batches_ahead_before_exit():
    """Have fairseq's iterators make their batches ahead in a ``BatchesAhead``, stopped at exit
    (idempotent). Registered after torch's and multiprocessing's own exit handlers (imported with
    fairseq), the handler runs before them: a DataLoader's workers still run while a thread ends."""
    if iterators.BufferedIterator is not BatchesAhead:
        iterators.BufferedIterator = BatchesAhead
        atexit.register(stop_before_exit)
