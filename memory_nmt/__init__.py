"""memory_nmt: document translation with a recurrent memory, as a fairseq ``--user-dir`` plugin.

Importing the package registers, with fairseq:
- the model ``transformer_recurrent_memory`` and its named architectures (``model.py``),
- the task ``document_translation`` (``task.py``),
- the criterion ``document_label_smoothed_cross_entropy`` (``criterion.py``),
- the lr scheduler ``two_rate_inverse_sqrt`` (``two_rate_schedule.py``),
makes fairseq's checkpoints loadable under torch >= 2.6 (``checkpoint_loading.py``), and lets
fairseq's distributed training run under torchrun on CPU-only machines (``cpu_distributed.py``).
"""
from .checkpoint_loading import allow_fairseq_checkpoints
from .cpu_distributed import allow_cpu_torchrun

allow_fairseq_checkpoints()
allow_cpu_torchrun()

from . import criterion, model, task, two_rate_schedule  # noqa: E402,F401  (registration side effects)
