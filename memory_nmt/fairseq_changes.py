"""Every change the plugin makes to fairseq's behaviour, and to Python's: what each applies to, and why it cannot wait.

Importing the plugin makes these changes (``make_changes``, from ``memory_nmt/__init__.py``), and no
others; ``CHANGED_BY_IMPORT`` and ``CHANGED_FOR_PLUGIN_COMMAND_LINES`` name them, and a test
compares those lists with what importing the plugin changes in fairseq's modules
(tests/pipeline/test_fairseq_changes.py).

For every process that imports the plugin:

- **torch's allow-list of classes for its safe unpickling** gains the few classes fairseq's
  checkpoints hold besides tensors (``pipeline/checkpoint_files.FAIRSEQ_CHECKPOINT_CLASSES``).
  fairseq 0.12 calls ``torch.load`` without ``weights_only``, so torch (>= 2.6) reads with its safe
  unpickling, which refuses those classes: without them no fairseq checkpoint loads. It cannot wait
  for the document task's objects: fairseq-validate and ``checkpoint_utils.load_model_ensemble_and_task``
  read a checkpoint before any task exists, and every data-parallel worker but the first reads the
  checkpoint the first sends it (fairseq's ``broadcast_object``). Every load stays safe.

For a fairseq command line that loads the plugin (``--user-dir``: fairseq-train, -generate,
-interactive, -validate, and the plugin's tools that take fairseq's options), which imports it as it
parses its options, before it makes any of the plugin's objects, whatever task it runs (the plugin
refuses its systems under fairseq's own ``translation`` task, and that refusal is an error in what
the user gave too):

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
fit (``pipeline/checkpoint_fit.check_training_start``). A run of fairseq's own tasks that loads the
plugin gets the changes above and is otherwise fairseq's: the recipes' stage one under ``--task
translation`` (their default, so that the sentence model trains on fairseq's own batches) needs no
more, and gives ``--data-buffer-size 0``, fairseq's option that keeps its thread from making
batches ahead (``examples/recipes/common.sh``).
"""
import sys
from typing import Sequence

import torch
from fairseq.distributed import utils as distributed_utils

from .cpu_distributed import reading_torchrun_on_cpu
from .one_line_errors import plain_input_errors
from .pipeline.checkpoint_files import FAIRSEQ_CHECKPOINT_CLASSES

CHANGED_BY_IMPORT = ("torch.serialization.get_safe_globals()",)
CHANGED_FOR_PLUGIN_COMMAND_LINES = ("sys.excepthook", "fairseq.distributed.utils.infer_init_method")


def loads_the_plugin(argv: Sequence[str]) -> bool:
    """Whether the command line ``argv`` loads a plugin, as fairseq's command lines do (``--user-dir``)."""
    return any(argument == "--user-dir" or argument.startswith("--user-dir=") for argument in argv)


def make_changes(argv: Sequence[str]):
    """Make the changes above, those for the plugin's command lines where ``argv`` is one (each once:
    one already made is not made again)."""
    torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_CLASSES)
    if not loads_the_plugin(argv):
        return
    if not getattr(sys.excepthook, "made_by_the_plugin", False):
        sys.excepthook = plain_input_errors(sys.excepthook)
        sys.excepthook.made_by_the_plugin = True
    if not getattr(distributed_utils.infer_init_method, "made_by_the_plugin", False):
        distributed_utils.infer_init_method = reading_torchrun_on_cpu(distributed_utils.infer_init_method)
        distributed_utils.infer_init_method.made_by_the_plugin = True
