"""Lets fairseq's own distributed training run under ``torchrun`` on machines without a GPU.

fairseq 0.12 reads torchrun's environment only when ``--distributed-world-size`` is above 1,
which defaults to the number of GPUs, and then picks ``rank % torch.cuda.device_count()`` as
the device, which divides by zero without a GPU. So on a CPU-only machine
``torchrun --nproc_per_node 2 fairseq-train ... --cpu`` silently runs independent single-worker
trainings that overwrite each other's checkpoints. Importing the plugin wraps fairseq's
``infer_init_method``: when torchrun's variables say there are several processes and no GPU is
visible, every process joins one process group (``env://``) with torchrun's rank and world
size. Machines with GPUs keep fairseq's own behaviour.
"""
import os

import torch
from fairseq.distributed import utils as distributed_utils

TORCHRUN_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")


def allow_cpu_torchrun():
    """Make ``fairseq.distributed.utils.call_main`` honour torchrun on CPU (idempotent)."""
    fairseq_infer = distributed_utils.infer_init_method
    if getattr(fairseq_infer, "reads_torchrun_on_cpu", False):
        return

    def infer_init_method(cfg, force_distributed=False):
        if (
            cfg.distributed_init_method is None
            and torch.cuda.device_count() == 0
            and all(name in os.environ for name in TORCHRUN_VARIABLES)
            and int(os.environ["WORLD_SIZE"]) > 1
        ):
            cfg.distributed_init_method = "env://"
            cfg.distributed_world_size = int(os.environ["WORLD_SIZE"])
            cfg.distributed_rank = int(os.environ["RANK"])
            cfg.device_id = int(os.environ.get("LOCAL_RANK", 0))
            cfg.distributed_no_spawn = True
            return
        fairseq_infer(cfg, force_distributed)

    infer_init_method.reads_torchrun_on_cpu = True
    distributed_utils.infer_init_method = infer_init_method
