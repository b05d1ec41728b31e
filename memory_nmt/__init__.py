"""memory_nmt: document-level translation systems on one document pipeline, as a fairseq ``--user-dir`` plugin.

- ``pipeline/``: the document machinery every system shares: document indexes, lanes and
  batches, the ``document_translation`` task, the ``document_label_smoothed_cross_entropy``
  criterion, document decoding, fairseq-interactive's document mode and the hub, and the one
  interface a system implements (``pipeline/system.py``).
- ``systems/``: one package per system, holding only what makes it that system:
  ``recurrent_memory`` (``transformer_recurrent_memory``), ``context_concat``
  (``transformer_context_concat``), ``associated_memory`` (``transformer_associated_memory``) and
  ``local_global`` (``transformer_local_global``); beside them, what systems share (options
  declared once, a sentence-level checkpoint loaded into a system, the ``two_rate_inverse_sqrt``
  scheduler for the parameters a system adds: ``systems/__init__.py``). fairseq's plain
  ``transformer`` runs in the pipeline as the sentence-level system.
- ``evaluation/``: contrastive scoring in context, and the teacher-forced walk of the paper's
  attention analyses.

The command lines, the synthetic test documents and the speed and memory benchmarks are
``memory_nmt_tools``, a package beside this one (importing it imports no fairseq).

Importing the package registers the systems, task, criterion and scheduler with fairseq, and makes
the few changes of fairseq's behaviour that cannot wait for the plugin's own objects, listed with
their reasons in ``fairseq_changes.py``: every process gets fairseq's checkpoints readable under
torch >= 2.6; a fairseq command line that loads the plugin (``--user-dir``) gets its errors in what
the user gave on one line and torchrun on CPU-only machines.
"""
import sys

from .fairseq_changes import make_changes

make_changes(sys.argv)

from .pipeline import criterion, task  # noqa: E402,F401  (registration side effects)
from .systems import two_rate_schedule  # noqa: E402,F401
from .systems.associated_memory import model as associated_memory_model  # noqa: E402,F401
from .systems.context_concat import model as context_concat_model  # noqa: E402,F401
from .systems.local_global import model as local_global_model  # noqa: E402,F401
from .systems.recurrent_memory import model as recurrent_memory_model  # noqa: E402,F401
