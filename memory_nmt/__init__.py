"""memory_nmt: document translation with a recurrent memory, as a fairseq ``--user-dir`` plugin.

Importing the package registers, with fairseq:
- the model ``transformer_recurrent_memory`` and its named architectures (``model.py``),
- the task ``document_translation`` (``task.py``),
- the criterion ``document_label_smoothed_cross_entropy`` (``criterion.py``),
and makes fairseq's checkpoints loadable under torch >= 2.6 (``checkpoint_loading.py``).
"""
from .checkpoint_loading import allow_fairseq_checkpoints

allow_fairseq_checkpoints()

from . import criterion, model, task  # noqa: E402,F401  (registration side effects)
