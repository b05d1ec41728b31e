"""``document_label_smoothed_cross_entropy``: label-smoothed cross entropy over documents.

The criterion owns what the lanes carry in training and validation: it walks each group's
batches in order (``data.py``), asks the system (``system.py``) for each sentence step's
context from the carry of the previous batch (``carry.py``) and keeps what the step carries out
for the next batch, per stream (split), checking that every batch continues the one before.
The loss and its size are those of the current sentences only, whatever context they read, with
what a system charges in training for the context it made (``SentenceContext.cost``) added.

In training, a system whose carry has differentiable states (sentence states that the next
sentence reads) is back-propagated across sentences as ``--gradient-reach`` says
(``truncation.py``): by default a window's losses at once, through the carry kept attached
within the window, or exactly K sentences back. By default a window's first sentences reach
nothing before it (``--gradient-across-windows drop``); with ``recompute`` the criterion keeps
the group's last sentence steps with the carry before them (a ``WindowTail``) and recomputes
them at the next window's start, so a window's first sentences reach the sentences before it.
A system whose carry has no differentiable states (previous sentences' tokens) back-propagates
each sentence at once.

Each step is the pipeline's teacher-forced step (``teacher_forcing.py``), whose parts are named
for torch.profiler as fairseq names its own; "gradient to the previous sentence" is
``truncation.py``'s (``scripts/benchmark_training.py --profile`` reads them).
"""
import logging
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable, List, Optional

import torch
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.dataclass import ChoiceEnum
from torch.utils.checkpoint import checkpoint

from .carry import Carry, CarryStore, WindowTail
from .data import parse_window
from .document_task import TranslatesDocuments
from .option_ranges import OptionError, Range, add_with_ranges, check_ranges
from .samples import DocumentBatch, ForwardPass, LaneStep, LaneWindow, SentencesBatch, read_sample, steps_in
from .system import document_system
from .teacher_forcing import TeacherForcedStep, teacher_forced_step
from .truncation import (
    DEFAULT_ACROSS_WINDOWS,
    GRADIENT_ACROSS_WINDOWS,
    WINDOW,
    back_propagation,
    drop_cuts_every_gradient,
    parse_gradient_reach,
    recomputed_steps,
)

logger = logging.getLogger(__name__)


@dataclass
class DocumentLabelSmoothedCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    label_smoothing: float = field(  # fairseq's option, with the range it takes
        default=0.0,
        metadata={"help": "label smoothing's epsilon: the share of each target's probability spread over "
                          "the vocabulary (0: none)", "range": Range(0, 1)},
    )
    ignore_prefix_size: int = field(  # fairseq's option, with the range it takes
        default=0,
        metadata={"help": "target tokens at the start of each sentence left out of the loss", "range": Range(0)},
    )
    gradient_reach: str = field(
        default=WINDOW,
        metadata={
            "help": "in training, which earlier sentences a sentence's loss reaches through the "
            "states they pass on, for a system whose carry has differentiable states: 'window', "
            "the earlier sentences of its --optimization-window that those states connect it to (the "
            "window's losses back-propagated at once, one backward pass per window; with the memory in "
            "the top layers, the default, the previous sentence and, on the source side only, the one "
            "before: docs/training.md), or a number K, at most the "
            "K previous sentences (1 is the recurrent memory paper's 'current and most recent "
            "sentences', at K more gradient passes per sentence; 0 trains each sentence on its "
            "own loss only); whatever else a carry holds is detached between sentences",
            "parse": parse_gradient_reach,
            "used": "states",
        },
    )
    gradient_across_windows: ChoiceEnum(GRADIENT_ACROSS_WINDOWS) = field(
        default=DEFAULT_ACROSS_WINDOWS,
        metadata={
            "help": "in training, whether a window's first sentences reach the sentences of the "
            "window before ('recompute': its last step, or its last K with --gradient-reach K, "
            "runs forward again, with the new parameters, at the next window's start; each "
            "gradient still lands in one update) or not ('drop', the default, chosen by time to "
            "quality: a loss reaches nothing before its window; with --optimization-window 1 "
            "give 'recompute')",
            "used": "states",
        },
    )
    max_graph_tokens: Optional[int] = field(
        default=None,
        metadata={
            "help": "with --gradient-reach window: the most padded tokens (as --max-tokens counts "
            "them) of a window's sentence steps whose activations are kept for its backward "
            "pass; the steps beyond keep only the states they pass on and run forward again "
            "during the backward pass (one more forward pass each, the same gradients). "
            "Default: no limit, a window keeps all its steps' activations",
            "range": Range(1),
            "used": "states",
        },
    )


@register_criterion("document_label_smoothed_cross_entropy", dataclass=DocumentLabelSmoothedCrossEntropyConfig)
class DocumentLabelSmoothedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    @classmethod
    def add_args(cls, parser):
        add_with_ranges(parser, DocumentLabelSmoothedCrossEntropyConfig())

    def __init__(
        self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
        gradient_reach=WINDOW, gradient_across_windows=DEFAULT_ACROSS_WINDOWS, max_graph_tokens=None,
    ):
        if not isinstance(task, TranslatesDocuments):
            raise OptionError(
                "--criterion document_label_smoothed_cross_entropy trains with --task "
                "document_translation, whose batches are sentence steps of documents; with "
                "another task use --criterion label_smoothed_cross_entropy"
            )
        check_ranges(SimpleNamespace(label_smoothing=label_smoothing, ignore_prefix_size=ignore_prefix_size,
                                     gradient_reach=gradient_reach, max_graph_tokens=max_graph_tokens),
                     DocumentLabelSmoothedCrossEntropyConfig)
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        self.carries = CarryStore()
        self.gradient_reach = parse_gradient_reach(gradient_reach)
        if max_graph_tokens is not None and self.gradient_reach != WINDOW:
            raise OptionError(
                f"--max-graph-tokens {max_graph_tokens} caps what a window keeps for its one backward pass, "
                f"with --gradient-reach window; --gradient-reach {self.gradient_reach} keeps at most "
                f"{self.gradient_reach + 1} steps' graphs: leave --max-graph-tokens out"
            )
        self.recompute_across_windows = gradient_across_windows == "recompute"
        self.max_graph_tokens = max_graph_tokens
        self.gradient_described = False  # logged at the first window whose carry has differentiable states
        self.optimization_window: Optional[str] = None  # the task's, where it trains a carry in lanes

    def train_in_windows(self, window: str):
        """Train a carry in lanes in the task's ``--optimization-window`` (the task calls this), which the
        log of what a loss reaches names. ``drop`` with windows of one sentence step would keep every loss
        from the sentences before it, as ``--gradient-reach 0`` says openly: refused."""
        self.optimization_window = window
        if not self.recompute_across_windows and drop_cuts_every_gradient(parse_window(window), self.gradient_reach):
            raise OptionError(
                f"--gradient-across-windows drop (the default) with --optimization-window {window}: every "
                "window is one sentence step, so no loss would reach an earlier sentence through the states it "
                "passes on (as --gradient-reach 0). Use --gradient-across-windows recompute, a larger "
                "--optimization-window, or --gradient-reach 0 to train each sentence on its own loss"
            )

    def describe_gradient(self, carried: str) -> str:
        """What training back-propagates across sentences and what a window keeps for it, for the log;
        ``carried``: how far the system's carry connects a loss (``SystemHooks.carried_gradient``)."""
        if self.gradient_reach == 0:
            return "none (--gradient-reach 0): each sentence is trained on its own loss"
        window = self.optimization_window
        if self.gradient_reach == WINDOW:
            before = ("the window before's last sentence step, recomputed" if self.recompute_across_windows
                      else "nothing before its window (--gradient-across-windows drop)")
            kept = ("the activations of all its steps" if self.max_graph_tokens is None else
                    f"the activations of its steps up to --max-graph-tokens {self.max_graph_tokens} padded "
                    "tokens (the later steps run forward again in the backward pass)")
            return (f"a loss reaches the earlier sentences of its window (--optimization-window {window}) that "
                    f"{carried} and {before}; one backward pass per window, which keeps {kept} until then")
        before = (f"the window before's last {self.gradient_reach} sentence steps recomputed"
                  if self.recompute_across_windows else "nothing before its window (--gradient-across-windows drop)")
        return (f"a loss reaches at most the {self.gradient_reach} previous sentences (--gradient-reach "
                f"{self.gradient_reach}; within its window of --optimization-window {window}), {before}; "
                f"{self.gradient_reach} gradient passes per sentence step besides its backward pass, at most "
                f"{self.gradient_reach + 1} steps' graphs kept at once")

    def forward(self, model, sample, reduce=True):
        """Loss of one batch (``samples.py``): a step of a group, with what its lanes carried in,
        or sentences that bring their context.

        A training window given here (fairseq's zero-weight dummy batch in a padded
        validation shard) is run as if its documents started there and leaves no carry behind.
        """
        batch = read_sample(sample)
        if isinstance(batch, SentencesBatch):
            return self.forward_sentences(model, batch)
        if isinstance(batch, LaneWindow):
            return self.forward_window(model, batch.steps, stateless=True)
        return self.forward_window(model, [batch])

    def train_on(self, model, batch: DocumentBatch, backward: Callable, stateless: bool = False,
                 loss_scale: float = 1.0, samples_before: Optional[Callable[[Any], List[dict]]] = None):
        """One update's batch trained on (``forward_window``, ``forward_sentences``); a window that
        goes on with a group whose carry is not held (training resumed inside it) first rebuilds
        the carry from ``samples_before`` (``rebuild_carry_after_resume``)."""
        if isinstance(batch, SentencesBatch):
            return self.forward_sentences(model, batch, backward)
        steps = steps_in(batch)
        if not stateless:
            self.rebuild_carry_after_resume(model, steps[0].position, samples_before)
        return self.forward_window(model, steps, backward=backward, stateless=stateless, loss_scale=loss_scale)

    def rebuild_carry_after_resume(self, model, position, samples_before: Optional[Callable[[Any], List[dict]]]):
        """Training resumed from a checkpoint saved inside a group (fairseq restores the data
        order, not what the lanes carry): replay the group's earlier sentence steps (those of the
        documents its lanes hold, where lanes refill: ``samples_before(position)``, the task's plan
        gives them), forward only and with the current weights, so its documents continue with their
        context."""
        if position.step == 0 or self.carries.holds(position.stream):
            return
        if samples_before is None:
            raise ValueError(f"a window at step {position.step} of group {position.group} goes on with a carry "
                             "not held, and no samples_before to rebuild it from")
        device = next(model.parameters()).device
        earlier = [read_sample(utils.apply_to_sample(lambda t: t.to(device), sample))
                   for sample in samples_before(position)]
        first = earlier[0].position.step
        logger.info(
            "resuming inside group %d: replaying %s to rebuild what its lanes carry", position.group,
            f"its first {len(earlier)} sentence steps" if first == 0 else f"its sentence steps {first} to {position.step - 1}",
        )
        model.eval()
        with torch.no_grad():
            self.forward_window(model, earlier, fresh=True)
        model.train()

    def forward_window(
        self,
        model,
        steps: List[LaneStep],
        backward: Optional[Callable] = None,
        stateless: bool = False,
        loss_scale: float = 1.0,
        fresh: bool = False,
    ):
        """Run consecutive steps of one group; with ``backward``, train on them (``truncation.py``).

        Returns the summed (detached) loss, sample size and logging output of ``steps``.
        ``stateless`` starts with nothing carried and keeps no carry (fairseq's dummy
        batches); ``fresh`` starts with nothing carried and keeps the carry (a replay from the
        start of the documents its lanes hold, ``rebuild_carry_after_resume``). ``loss_scale`` is
        the factor ``backward`` multiplies losses by (fp16, AMP).
        """
        position = steps[0].position
        carry = None if stateless or fresh else self.carries.get(position)
        walk = [(step, True) for step in steps]
        tail = None if stateless or fresh else self.carries.tail_before(position)
        if backward is not None and self.recompute_across_windows and tail is not None:
            carry, walk = tail.carry, [(step, False) for step in tail.steps] + walk
        truncation = back_propagation(self.gradient_reach, backward, loss_scale, self.max_graph_tokens) if backward else None
        # (step, detached carry before it) of the last steps, the tail the next window recomputes
        last_steps = deque(maxlen=recomputed_steps(self.gradient_reach) if self.recompute_across_windows else 0)
        total_loss, total_size, total_log = 0.0, 0, {}
        for step, counted in walk:
            if last_steps.maxlen:
                last_steps.append((step, carry.detach() if carry is not None else None))
            linked = truncation is not None and truncation.wants_links()
            loss, carries_out, links = 0.0, [], []
            for rows in step.passes:
                carry_in = carry.select(rows.lanes) if carry is not None else None
                if linked:
                    leaves = carry_in.with_state_leaves()
                    states = carry_in.differentiable_states()
                    links += [(leaf, states[name]) for name, leaf in leaves.differentiable_states().items()]
                    carry_in = leaves
                run = self.forward_step if counted else self.recompute_step
                if truncation is not None and not truncation.keeps_graph(rows.padded_tokens):
                    outputs = checkpoint(run, model, rows, carry_in, use_reentrant=False)
                else:
                    outputs = run(model, rows, carry_in)
                if counted:
                    pass_loss, sample_size, logging_output, carry_out = outputs
                    loss = loss + pass_loss
                    total_size += sample_size
                    for key, value in logging_output.items():
                        total_log[key] = total_log.get(key, 0) + value
                else:
                    carry_out = outputs
                carries_out.append(carry_out)
            carry = carries_out[0]
            for later in carries_out[1:]:
                carry = carry.stacked(later)
            if truncation is not None:
                if carry.differentiable_states():
                    if not self.gradient_described:
                        if not document_system(model).carries_states:  # its training options would be refused
                            raise TypeError(f"{type(model).__name__}'s carry has differentiable states: declare "
                                            "carries_states = True (pipeline/system.py)")
                        logger.info("gradient across sentences: %s",
                                    self.describe_gradient(document_system(model).carried_gradient()))
                        self.gradient_described = True
                    truncation.add(loss if counted else None, links)
                elif counted:
                    backward(loss)
            if counted:
                total_loss = total_loss + loss.detach()
            keeps_graph = truncation is not None and truncation.keeps_carry_graph() and carry.differentiable_states()
            carry = carry if keeps_graph else carry.detach()
        if truncation is not None:
            truncation.finish()
        if not stateless:
            keeps_tail = last_steps and carry.differentiable_states()
            tail = WindowTail(last_steps[0][1], [step for step, _ in last_steps]) if keeps_tail else None
            self.carries.keep(steps[-1].position, carry.detach(), tail)
        return total_loss, total_size, total_log

    def forward_sentences(self, model, batch: SentencesBatch, backward: Optional[Callable] = None):
        """Loss of a batch of sentences that each bring the previous sentences their context is
        made of (``sentence_batches.py``), trained on at once with ``backward``: the sentences'
        carry is made from those sentences, not kept between batches."""
        carry = document_system(model).carry_of_previous_sentences(batch.rows.lanes, batch.previous_sentences)
        loss, sample_size, logging_output, _ = self.forward_step(model, batch.rows, carry)
        if backward is not None:
            backward(loss)
        return loss.detach(), sample_size, logging_output

    def forward_step(self, model, rows: ForwardPass, carry: Optional[Carry]):
        """Loss of one forward pass of a sentence step whose lanes carried ``carry`` in (selected
        to its rows, or None at a group's first step), and what the rows carry out."""
        step = self.run_model(model, rows, carry, with_loss=True)
        sample = rows.batch
        loss, nll_loss = step.loss
        context_cost = step.context.cost
        if context_cost is not None:
            loss = loss + context_cost
        sample_size = sample["nsentences"] if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["nsentences"],
            "sample_size": sample_size,
        }
        if context_cost is not None:
            logging_output["context_cost"] = context_cost.data
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, step.net_output, sample)
            logging_output["n_correct"] = n_correct.item()
            logging_output["total"] = total.item()
        return loss, sample_size, logging_output, step.carry

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        """fairseq's (the loss logged is the one trained on, a context's cost included), and the
        context's cost per sentence where a system charged one (``SentenceContext.cost``)."""
        super().reduce_metrics(logging_outputs)
        if any("context_cost" in log for log in logging_outputs):
            cost = sum(log.get("context_cost", 0) for log in logging_outputs)
            sentences = sum(log.get("nsentences", 0) for log in logging_outputs)
            metrics.log_scalar("context_cost", cost / max(sentences, 1), sentences, round=3)

    def recompute_step(self, model, rows: ForwardPass, carry: Carry):
        """What a step recomputed from the last window carries out, its graph kept: its loss was
        counted in that window, so its decoder stops at the features (no output projection)."""
        return self.run_model(model, rows, carry, with_loss=False).carry

    def run_model(self, model, rows: ForwardPass, carry: Optional[Carry], with_loss: bool) -> TeacherForcedStep:
        """The rows teacher-forced (``teacher_forcing.py``) on the context ``carry`` gives (to the
        rows that go on with their lane's document, ``continues``, where lanes refill) and,
        ``with_loss``, their loss and nll loss (else the decoder stops at the features)."""
        return teacher_forced_step(
            model, carry, rows.lanes, rows.net_input, rows.target, continues=rows.continues,
            features_only=not with_loss,
            loss_of=(lambda net_output: self.compute_loss(model, net_output, rows.batch)) if with_loss else None,
            packed_rows=rows.packed_rows,
        )
