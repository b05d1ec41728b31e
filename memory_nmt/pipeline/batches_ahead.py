"""The batches the document task's epoch iterator makes ahead in a thread, which ends before Python's finalization.

fairseq's epoch iterators make up to ``--data-buffer-size`` batches ahead (10 by default) in a
``BufferedIterator``, whose thread is a daemon. A run that stops inside an epoch (fairseq-train's
``--max-update`` or ``--stop-time-hours``) leaves it making batches, and Python ends a daemon
thread that wakes during its finalization with ``pthread_exit``: woken inside a C++ call that
released the GIL (a torch operator making or receiving a batch), the thread unwinds through a
``noexcept`` frame and the process aborts, "terminate called without an active exception", exit
status -6 (SIGABRT), after fairseq-train had written its last checkpoint (PyTorch issue 38228).

The document task's iterator (``batch_iterator.py``) makes its batches ahead in a ``BatchesAhead``:
fairseq's ``BufferedIterator``, whose thread reads the batches through ``StoppableBatches``. An
``atexit`` handler, registered anew with each of them and run before the finalization, tells each
thread still making batches to end after the batch in hand and takes what it made until it has
ended (for at most ``STOP_SECONDS`` each: a thread waiting on a worker process that never answers
is left to the finalization). ``stop`` reads two attributes of fairseq's ``BufferedIterator``,
``_consumer`` (its thread) and ``_queue`` (what the thread made): tests/pipeline/test_data.py fails
the day fairseq renames them. fairseq's own tasks keep fairseq's iterator.
"""
import atexit
import contextlib
import queue
import time
import weakref

from fairseq.data import iterators

STOP_SECONDS = 60


class BatchesAhead(iterators.BufferedIterator):
    """fairseq's ``BufferedIterator`` (its thread makes up to ``size`` of the ``length`` batches of
    ``batches`` ahead), which ``stop`` ends."""

    running = weakref.WeakSet()  # those whose thread may be making batches

    def __init__(self, size: int, batches, length: int):
        self.source = StoppableBatches(batches, length)
        super().__init__(size, self.source)
        atexit.unregister(stop_before_exit)  # registered last, it runs first at exit
        atexit.register(stop_before_exit)
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
    """The ``length`` batches of ``batches``, ending after the one in hand once ``stopping`` is set."""

    def __init__(self, batches, length: int):
        self.batches = batches
        self.length = length
        self.stopping = False

    def __len__(self):
        return self.length

    def __iter__(self):
        for batch in self.batches:
            yield batch
            if self.stopping:
                return


def stop_before_exit():
    """Stop every thread still making batches. Registered after torch's and multiprocessing's own exit
    handlers (imported with fairseq, and with a DataLoader's workers), it runs before them: the workers
    still run while a thread ends."""
    for batches in list(BatchesAhead.running):
        batches.stop(STOP_SECONDS)
