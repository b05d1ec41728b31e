"""``--lr-scheduler two_rate_inverse_sqrt``: separate learning rates for the memory and the pretrained parameters.

Finetuning from a sentence-level transformer (paper section 4), the new memory parameters and
the pretrained ones train with their own peak learning rate and warm-up: ``--lr`` and
``--warmup-updates`` for the pretrained parameters, ``--memory-lr`` and
``--memory-warmup-updates`` for the memory's. The scheduler splits the optimizer's single
parameter group in two (pretrained first, so fairseq's ``lr`` is the pretrained one; memory
second) and drives each with fairseq's ``inverse_sqrt`` schedule; any fairseq optimizer works.
The memory's learning rate is logged as ``lr_memory`` beside fairseq's ``lr``.

Memory parameters are those ``RecurrentMemory`` (``memory.py``) tags with fairseq's
``param_group`` attribute, the tag fairseq's ``--optimizer composite`` also groups by.
"""
import logging
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from fairseq import metrics
from fairseq.optim import FairseqOptimizer
from fairseq.optim.lr_scheduler import register_lr_scheduler
from fairseq.optim.lr_scheduler.inverse_square_root_schedule import (
    InverseSquareRootLRScheduleConfig,
    InverseSquareRootSchedule,
)

from .memory import MEMORY_PARAM_GROUP

logger = logging.getLogger(__name__)

SCHEDULER = "two_rate_inverse_sqrt"


@dataclass
class TwoRateInverseSqrtConfig(InverseSquareRootLRScheduleConfig):
    memory_lr: Optional[float] = field(
        default=None,
        metadata={"help": "peak learning rate of the memory parameters (--lr is the pretrained "
                          "parameters'; the paper finetunes with 3e-4 and --lr 6e-5)"},
    )
    memory_warmup_updates: Optional[int] = field(
        default=None,
        metadata={"help": "warm-up updates of the memory parameters (default: --warmup-updates)"},
    )


class ParamGroupView(FairseqOptimizer):
    """One parameter group of a fairseq optimizer, whose learning rate a fairseq scheduler sets alone."""

    def __init__(self, optimizer: FairseqOptimizer, index: int):
        super().__init__(cfg=None)  # the view has no options of its own
        self._optimizer = optimizer.optimizer
        self.index = index

    @property
    def param_groups(self) -> List[dict]:
        return [self.optimizer.param_groups[self.index]]


def is_memory(parameter) -> bool:
    return getattr(parameter, "param_group", None) == MEMORY_PARAM_GROUP


def split_memory_parameters(optimizer: FairseqOptimizer) -> Tuple[ParamGroupView, ParamGroupView]:
    """Move the memory parameters out of the optimizer's one group into a second group."""
    groups = optimizer.optimizer.param_groups
    if len(groups) != 1:
        raise ValueError(
            f"--lr-scheduler {SCHEDULER} splits the optimizer's parameter group in two, but "
            f"--optimizer {optimizer.__class__.__name__} has {len(groups)} groups already"
        )
    memory = [parameter for parameter in groups[0]["params"] if is_memory(parameter)]
    if not memory:
        raise ValueError(
            f"--lr-scheduler {SCHEDULER}: the optimizer holds no memory parameters; use it with "
            "--arch transformer_recurrent_memory (and --fp16-no-flatten-grads with --fp16)"
        )
    groups[0]["params"] = [parameter for parameter in groups[0]["params"] if not is_memory(parameter)]
    optimizer.optimizer.add_param_group({"params": memory})
    return ParamGroupView(optimizer, 0), ParamGroupView(optimizer, 1)


def memory_schedule_config(cfg: TwoRateInverseSqrtConfig) -> InverseSquareRootLRScheduleConfig:
    if cfg.memory_lr is None:
        raise ValueError(f"--lr-scheduler {SCHEDULER} needs --memory-lr, the memory parameters' peak learning rate")
    warmup = cfg.warmup_updates if cfg.memory_warmup_updates is None else cfg.memory_warmup_updates
    return InverseSquareRootLRScheduleConfig(
        warmup_updates=warmup, warmup_init_lr=cfg.warmup_init_lr, lr=[cfg.memory_lr]
    )


@register_lr_scheduler(SCHEDULER, dataclass=TwoRateInverseSqrtConfig)
class TwoRateInverseSqrtSchedule(InverseSquareRootSchedule):
    """fairseq's ``inverse_sqrt`` for the pretrained parameters, and a second one for the memory's."""

    def __init__(self, cfg: TwoRateInverseSqrtConfig, optimizer: FairseqOptimizer):
        memory_cfg = memory_schedule_config(cfg)  # before super() resolves cfg.warmup_init_lr
        pretrained, memory = split_memory_parameters(optimizer)
        super().__init__(cfg, pretrained)
        self.memory_schedule = InverseSquareRootSchedule(memory_cfg, memory)
        logger.info(
            "two learning rates: %d pretrained tensors, peak lr %g after %d warm-up updates; "
            "%d memory tensors, peak lr %g after %d warm-up updates",
            len(pretrained.param_groups[0]["params"]), cfg.lr[0], cfg.warmup_updates,
            len(memory.param_groups[0]["params"]), memory_cfg.lr[0], memory_cfg.warmup_updates,
        )

    def step_update(self, num_updates):
        """Set both groups' learning rates; return the pretrained one (fairseq logs it as ``lr``)."""
        lr = super().step_update(num_updates)
        memory_lr = self.memory_schedule.step_update(num_updates)
        metrics.log_scalar("lr_memory", memory_lr, weight=0, priority=301)  # printed after lr
        return lr
