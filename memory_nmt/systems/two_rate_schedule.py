"""``--lr-scheduler two_rate_inverse_sqrt``: separate learning rates for a system's context parameters and the pretrained ones.

Finetuning a document system from a sentence-level transformer (the memory paper's section 4),
the parameters the system adds (its context parameters, ``context_parameters.py``: the memory
model's memory units, the Associated Memory Network's context network, the local+global model's
global layer) and the pretrained ones train with their own peak learning rate and warm-up:
``--lr`` and ``--warmup-updates`` for the pretrained parameters, ``--context-lr`` and
``--context-warmup-updates`` for the context parameters. Their names before, ``--memory-lr`` and
``--memory-warmup-updates`` (after the flagship model's memory, though they set every system's
added parameters), are still taken, with a warning. The scheduler splits the optimizer's single
parameter group in two (pretrained first, so fairseq's ``lr`` is the pretrained one; context
parameters second) and drives each with fairseq's ``inverse_sqrt`` schedule; any fairseq
optimizer works. The second learning rate is logged as ``lr_context`` beside fairseq's ``lr``.
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

from ..pipeline.context_parameters import is_context_parameter
from ..pipeline.option_ranges import OptionError, Range, add_with_ranges, check_ranges, flag_of

logger = logging.getLogger(__name__)

SCHEDULER = "two_rate_inverse_sqrt"


@dataclass
class TwoRateInverseSqrtConfig(InverseSquareRootLRScheduleConfig):
    context_lr: Optional[float] = field(
        default=None,
        metadata={"help": "peak learning rate of the parameters the document system adds (the "
                          "memory, the context network, the global layer; --lr is the pretrained "
                          "parameters'; the memory paper finetunes with 3e-4 and --lr 6e-5)",
                  "range": Range(0)},
    )
    context_warmup_updates: Optional[int] = field(
        default=None,
        metadata={"help": "warm-up updates of the parameters the document system adds "
                          "(default: --warmup-updates)",
                  "range": Range(1)},
    )
    memory_lr: Optional[float] = field(
        default=None, metadata={"help": "the former name of --context-lr (deprecated)", "range": Range(0)},
    )
    memory_warmup_updates: Optional[int] = field(
        default=None, metadata={"help": "the former name of --context-warmup-updates (deprecated)", "range": Range(1)},
    )


RENAMED = {"context_lr": "memory_lr", "context_warmup_updates": "memory_warmup_updates"}  # option: its former name


def context_option(cfg: TwoRateInverseSqrtConfig, name: str):
    """The value of ``name`` (``context_lr``, ``context_warmup_updates``), or of its former name,
    given alone, with a warning; both given with different values are refused."""
    value, former = getattr(cfg, name), getattr(cfg, RENAMED[name])
    if former is None:
        return value
    if value is not None and value != former:
        raise OptionError(f"{flag_of(RENAMED[name])} {former} and {flag_of(name)} {value}: give {flag_of(name)} only "
                          f"({flag_of(RENAMED[name])} is its former name)")
    logger.warning("%s is deprecated: give %s (the rate of any document system's added parameters)",
                   flag_of(RENAMED[name]), flag_of(name))
    return former


class ParamGroupView(FairseqOptimizer):
    """One parameter group of a fairseq optimizer, whose learning rate a fairseq scheduler sets alone."""

    def __init__(self, optimizer: FairseqOptimizer, index: int):
        super().__init__(cfg=None)  # the view has no options of its own
        self._optimizer = optimizer.optimizer
        self.index = index

    @property
    def param_groups(self) -> List[dict]:
        return [self.optimizer.param_groups[self.index]]


def split_context_parameters(optimizer: FairseqOptimizer) -> Tuple[ParamGroupView, ParamGroupView]:
    """Move the context parameters out of the optimizer's one group into a second group."""
    groups = optimizer.optimizer.param_groups
    if len(groups) != 1:
        raise OptionError(
            f"--lr-scheduler {SCHEDULER} splits the optimizer's parameter group in two, but "
            f"--optimizer {optimizer.__class__.__name__} has {len(groups)} groups already"
        )
    context = [parameter for parameter in groups[0]["params"] if is_context_parameter(parameter)]
    if not context:
        raise OptionError(
            f"--lr-scheduler {SCHEDULER}: the optimizer holds no parameters of a document system's "
            "own (a memory, a context network); use it with a document system's --arch, such as "
            "transformer_recurrent_memory (and --fp16-no-flatten-grads with --fp16)"
        )
    groups[0]["params"] = [parameter for parameter in groups[0]["params"] if not is_context_parameter(parameter)]
    optimizer.optimizer.add_param_group({"params": context})
    return ParamGroupView(optimizer, 0), ParamGroupView(optimizer, 1)


def context_schedule_config(cfg: TwoRateInverseSqrtConfig) -> InverseSquareRootLRScheduleConfig:
    """The schedule of the context parameters, from ``cfg``'s options (checked)."""
    check_ranges(cfg, TwoRateInverseSqrtConfig)
    if cfg.warmup_updates < 1:  # fairseq's inverse_sqrt divides by it
        raise OptionError(f"--warmup-updates {cfg.warmup_updates}: give 1 or more with --lr-scheduler {SCHEDULER}")
    lr, warmup = context_option(cfg, "context_lr"), context_option(cfg, "context_warmup_updates")
    if lr is None:
        raise OptionError(
            f"--lr-scheduler {SCHEDULER} needs --context-lr, the peak learning rate of the parameters "
            "the document system adds"
        )
    return InverseSquareRootLRScheduleConfig(
        warmup_updates=cfg.warmup_updates if warmup is None else warmup, warmup_init_lr=cfg.warmup_init_lr, lr=[lr]
    )


@register_lr_scheduler(SCHEDULER, dataclass=TwoRateInverseSqrtConfig)
class TwoRateInverseSqrtSchedule(InverseSquareRootSchedule):
    """fairseq's ``inverse_sqrt`` for the pretrained parameters, and a second one for the context parameters."""

    @classmethod
    def add_args(cls, parser):
        add_with_ranges(parser, TwoRateInverseSqrtConfig())

    def __init__(self, cfg: TwoRateInverseSqrtConfig, optimizer: FairseqOptimizer):
        context_cfg = context_schedule_config(cfg)  # before super() resolves cfg.warmup_init_lr
        pretrained, context = split_context_parameters(optimizer)
        super().__init__(cfg, pretrained)
        self.context_schedule = InverseSquareRootSchedule(context_cfg, context)
        logger.info(
            "two learning rates: %d pretrained tensors, peak lr %g after %d warm-up updates; "
            "%d context tensors (--context-lr), peak lr %g after %d warm-up updates",
            len(pretrained.param_groups[0]["params"]), cfg.lr[0], cfg.warmup_updates,
            len(context.param_groups[0]["params"]), context_cfg.lr[0], context_cfg.warmup_updates,
        )

    def step_update(self, num_updates):
        """Set both groups' learning rates; return the pretrained one (fairseq logs it as ``lr``)."""
        lr = super().step_update(num_updates)
        context_lr = self.context_schedule.step_update(num_updates)
        metrics.log_scalar("lr_context", context_lr, weight=0, priority=301)  # printed after lr
        return lr
