"""Every change the plugin makes to fairseq's behaviour, and to Python's: what each applies to, and why it cannot wait.

Importing the plugin makes these changes (``make_changes``, from ``memory_nmt/__init__.py``), and no
others; ``CHANGED_BY_IMPORT`` and ``CHANGED_FOR_DOCUMENT_COMMAND_LINES`` name them, and a test
compares those lists with what importing the plugin changes in every fairseq module
(tests/pipeline/test_fairseq_changes.py).

For every process that imports the plugin:

- **torch's allow-list of classes for its safe unpickling** gains the few classes fairseq's
  checkpoints hold besides tensors (``pipeline/checkpoint_files.FAIRSEQ_CHECKPOINT_CLASSES``).
  fairseq 0.12 calls ``torch.load`` without ``weights_only``, so torch (>= 2.6) reads with its safe
  unpickling, which refuses those classes: without them no fairseq checkpoint loads. It cannot wait
  for the document task's objects: fairseq-validate and ``checkpoint_utils.load_model_ensemble_and_task``
  read a checkpoint before any task exists, and every data-parallel worker but the first reads the
  checkpoint the first sends it (fairseq's ``broadcast_object``). Every load stays safe.

For a command line that runs the document task (its arguments give ``--task document_translation``:
fairseq-train, -generate, -interactive, -validate, and the plugin's tools that take fairseq's
options), which imports the plugin as it parses its options (``--user-dir``), before it makes any
of the plugin's objects:

- **``sys.excepthook``** prints an error in what the user gave on one line, without a traceback
  (``one_line_errors.py``). It cannot wait: fairseq's command lines check some of their options
  with ``assert`` before they set up a task.
- **``fairseq.distributed.utils.infer_init_method``** honours torchrun on a machine without a GPU
  (``cpu_distributed.py``). It cannot wait: fairseq calls it to start the workers, before any task.

Nothing else. fairseq's iterators, its checkpoint loader and its trainer stay fairseq's own; what
the plugin needs of them its own objects do: the document task's epoch iterator ends the thread
that makes batches ahead before the interpreter exits (``pipeline/batches_ahead.py``), the task
reads the checkpoints a run loads when it is set up, refusing on one line a file that is not a
fairseq checkpoint (``pipeline/checkpoint_languages.py``), and refuses, when it builds the model
fairseq-train trains, a checkpoint the run would start from that is another system's or does not
fit (``pipeline/checkpoint_fit.check_training_start``). A run of fairseq's own tasks reads fairseq's
checkpoints through the allow-list and is otherwise fairseq's: the recipes' stage one under
``--task translation`` (their default, so that the sentence model trains on fairseq's own batches)
needs no more than that, and gives ``--data-buffer-size 0``, fairseq's option that keeps its thread
from making batches ahead (``examples/recipes/common.sh``).
"""
import sys
from typing import Sequence

import torch
from fairseq.distributed import utils as distributed_utils

from .cpu_distributed import reading_torchrun_on_cpu
from .one_line_errors import plain_input_errors
from .pipeline.checkpoint_files import FAIRSEQ_CHECKPOINT_CLASSES

DOCUMENT_TASK = "document_translation"  # the task's registered name (pipeline/task.py)
CHANGED_BY_IMPORT = ("torch.serialization.get_safe_globals()",)
CHANGED_FOR_DOCUMENT_COMMAND_LINES = ("sys.excepthook", "fairseq.distributed.utils.infer_init_method")


def runs_document_task(argv: Sequence[str]) -> bool:
    """Whether the command line ``argv`` gives ``--task document_translation``."""
    return any(argument == f"--task={DOCUMENT_TASK}" or (argument == "--task" and following == DOCUMENT_TASK)
               for argument, following in zip(argv, [*argv[1:], None]))


def make_changes(argv: Sequence[str]):
    """Make the changes above, those for the document task's command lines where ``argv`` is one
    (once: a change already made is not made again)."""
    torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_CLASSES)
    if not runs_document_task(argv) or getattr(sys.excepthook, "made_by_the_plugin", False):
        return
    sys.excepthook = plain_input_errors(sys.excepthook)
    sys.excepthook.made_by_the_plugin = True
    distributed_utils.infer_init_method = reading_torchrun_on_cpu(distributed_utils.infer_init_method)
