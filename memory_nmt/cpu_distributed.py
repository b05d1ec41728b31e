"""Lets fairseq's own distributed training run under ``torchrun`` on machines without a GPU.

fairseq 0.12 reads torchrun's environment only when ``--distributed-world-size`` is above 1,
which defaults to the number of GPUs, and then picks ``rank % torch.cuda.device_count()`` as
the device, which divides by zero without a GPU. So on a CPU-only machine
``torchrun --nproc_per_node 2 fairseq-train ... --cpu`` silently runs independent single-worker
trainings that overwrite each other's checkpoints. ``reading_torchrun_on_cpu`` wraps fairseq's
``infer_init_method``: when torchrun's variables say there are several processes and no GPU is
visible, every process joins one process group (``env://``) with torchrun's rank and world
size. Machines with GPUs keep fairseq's own behaviour. ``fairseq_changes.py`` puts the wrapper in
fairseq's place, for the command lines that load the plugin (``--user-dir``) only.

Without a GPU two launches cannot work, and are refused on one line naming the fix: torchrun's
workers with fairseq's default ``--distributed-backend nccl`` (NCCL needs CUDA: every worker ended
in its own traceback), and ``--distributed-world-size N`` without torchrun (fairseq starts one
worker a GPU itself, and asserted "world size is N but have 0 available devices").
"""
import os

import torch

from .pipeline.option_ranges import OptionError

TORCHRUN_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
SLURM_VARIABLES = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")  # fairseq starts its workers from these


def reading_torchrun_on_cpu(fairseq_infer):
    """fairseq's ``infer_init_method`` (``fairseq_infer``), which ``fairseq.distributed.utils.call_main``
    calls, honouring torchrun on the CPU."""

    def infer_init_method(cfg, force_distributed=False):
        if cfg.distributed_init_method is None and torch.cuda.device_count() == 0 and not cfg.tpu:
            if all(name in os.environ for name in TORCHRUN_VARIABLES) and int(os.environ["WORLD_SIZE"]) > 1:
                check_cpu_backend(cfg.distributed_backend)
                cfg.distributed_init_method = "env://"
                cfg.distributed_world_size = int(os.environ["WORLD_SIZE"])
                cfg.distributed_rank = int(os.environ["RANK"])
                cfg.device_id = int(os.environ.get("LOCAL_RANK", 0))
                cfg.distributed_no_spawn = True
                return
            if cfg.distributed_world_size > 1 and not any(name in os.environ for name in SLURM_VARIABLES):
                raise OptionError(
                    f"--distributed-world-size {cfg.distributed_world_size} without a GPU: fairseq starts one "
                    "worker a GPU itself, and none on the CPU (--cpu, or a machine without GPUs); start the CPU "
                    f"workers with torchrun: torchrun --nproc_per_node {cfg.distributed_world_size} "
                    "$(which fairseq-train) ... --cpu --distributed-backend gloo"
                )
        fairseq_infer(cfg, force_distributed)

    return infer_init_method


def check_cpu_backend(backend: str):
    """Refuse NCCL, fairseq's default backend, for workers without a GPU."""
    if backend == "nccl":
        raise OptionError(
            "--distributed-backend nccl (fairseq's default) needs CUDA GPUs, and these workers have none: give "
            "--distributed-backend gloo to train on the CPU under torchrun"
        )
