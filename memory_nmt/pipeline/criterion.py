"""``document_label_smoothed_cross_entropy``: label-smoothed cross entropy over documents.

The criterion owns what the lanes carry in training and validation: it walks each group's
batches in order (``data.py``), asks the system (``system.py``) for each sentence step's
context from the carry of the previous batch (``carry.py``) and keeps what the step carries out
for the next batch, per stream (split), checking that every batch continues the one before.
The loss and its size are those of the current sentences only, whatever context they read.

Gradient truncation, for systems whose carry has differentiable states (the recurrent memory
model; paper section 3.4, "back-propagated to the current and most recent sentences"):
sentence t's loss reaches sentence t's computation, the Update Attention that wrote sentence
t−1 into the memory, and sentence t−1's states (the whole computation that produced them), but
nothing of sentence t−2 or earlier. The memory itself is detached between sentences. Sentence
t−1's states enter sentence t as fresh leaves; after sentence t's forward pass, the gradient its
loss sends to those leaves is taken (``torch.autograd.grad``), and sentence t−1's graph is
back-propagated once, with its own loss plus that gradient. So each sentence's graph is
released after one backward, at most two graphs live at a time, and whatever reaches sentence
t−1's own memory leaves stops there. A window's last sentence is back-propagated alone, before
the optimizer step: the first sentence of the next window still trains the Update Attention,
but sends nothing into the previous window's states. A system whose carry has no
differentiable states (previous sentences' tokens) back-propagates each sentence at once.

The parts of a step are named for torch.profiler as fairseq names its own ("forward",
"backward"): "sentence context" (the memory model's Update Attention), "carry out" and
"gradient to the previous sentence" (``scripts/benchmark_training.py --profile`` reads them).
"""
from typing import Callable, List, Optional

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from torch.autograd.profiler import record_function

from .carry import Carry, CarryStore
from .data import passes_of, steps_of
from .system import document_system


@register_criterion(
    "document_label_smoothed_cross_entropy", dataclass=LabelSmoothedCrossEntropyCriterionConfig
)
class DocumentLabelSmoothedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False):
        from .task import DocumentTranslationTask  # the task module imports this one

        if not isinstance(task, DocumentTranslationTask):
            raise ValueError(
                "--criterion document_label_smoothed_cross_entropy trains with --task "
                "document_translation, whose batches are sentence steps of documents; with "
                "another task use --criterion label_smoothed_cross_entropy"
            )
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        self.carries = CarryStore()

    def forward(self, model, sample, reduce=True):
        """Loss of one batch of sentences (one step of a group), with what its lanes carried in.

        A training window given here (fairseq's zero-weight dummy batch in a padded
        validation shard) is run as if its documents started there and leaves no carry behind.
        """
        return self.forward_window(model, steps_of(sample), stateless="steps" in sample)

    def forward_window(
        self,
        model,
        steps: List[dict],
        backward: Optional[Callable] = None,
        stateless: bool = False,
        loss_scale: float = 1.0,
    ):
        """Run consecutive steps of one group; with ``backward``, train on them (see above).

        Returns the summed (detached) loss, sample size and logging output. ``stateless``
        starts with nothing carried and keeps no carry (fairseq's dummy batches).
        ``loss_scale`` is the factor ``backward`` multiplies losses by (fp16, AMP): the
        gradient sent back to the previous sentence is taken at that scale, so it does not
        underflow where fp16 gradients would.
        """
        carry = None if stateless else self.carries.get(steps[0]["position"])
        total_loss, total_size, total_log = 0.0, 0, {}
        waiting = None  # (loss, carry) of the previous step, not yet back-propagated
        for step in steps:
            loss, carries_in, carries_out = 0.0, [], []
            for sample in passes_of(step):
                carry_in = carry.select(sample["lanes"]) if carry is not None else None
                if backward is not None and waiting is not None:
                    carry_in = carry_in.with_state_leaves()
                pass_loss, sample_size, logging_output, carry_out = self.forward_step(model, sample, carry_in)
                loss = loss + pass_loss
                carries_in.append(carry_in)
                carries_out.append(carry_out)
                total_size += sample_size
                for key, value in logging_output.items():
                    total_log[key] = total_log.get(key, 0) + value
            carry = carries_out[0]
            for later in carries_out[1:]:
                carry = carry.stacked(later)
            if backward is not None:
                if waiting is not None:
                    backward(self._with_gradient_from_next(waiting, carries_in, loss, loss_scale))
                    waiting = None
                if carry.differentiable_states():
                    waiting = (loss, carry)
                else:
                    backward(loss)
            total_loss = total_loss + loss.detach()
            carry = carry.detach() if backward is None else carry
        if waiting is not None:
            backward(waiting[0])
        if not stateless:
            self.carries.keep(steps[-1]["position"], carry.detach())
        return total_loss, total_size, total_log

    def forward_step(self, model, sample, carry: Optional[Carry]):
        """Loss of one sentence step whose lanes carried ``carry`` in (selected to its rows, or
        None at a group's first step), and what the step carries out."""
        system = document_system(model)
        net_input = sample["net_input"]
        with record_function("sentence context"):
            context = system.sentence_context(
                carry, sample["lanes"], None, net_input, target_room=sample["target"].size(1) - 1
            )
        with record_function("forward"):
            net_output = model(**net_input, **context.inputs)
            loss, nll_loss = self.compute_loss(model, net_output, sample)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"] = n_correct.item()
            logging_output["total"] = total.item()
        with record_function("carry out"):
            carry = system.carry_out(
                context, sample["lanes"], net_input, sample["target"], net_output[1].get("encoder_out"), net_output[1]
            )
        return loss, sample_size, logging_output, carry

    @staticmethod
    def _with_gradient_from_next(waiting, carries_in: List[Carry], next_loss, loss_scale: float):
        """The previous step's loss, plus a term whose gradient is what ``next_loss`` sends
        into the previous step's states (taken at the leaves ``carries_in``, one per forward
        pass, gave them, from the loss as ``backward`` scales it, and divided back so
        ``backward`` may scale it again)."""
        previous_loss, previous_carry = waiting
        leaves, selected = [], []
        for carry_in in carries_in:
            leaves_of = carry_in.differentiable_states()
            previous_of = previous_carry.select(carry_in.lanes).differentiable_states()
            leaves.extend(leaves_of.values())
            selected.extend(previous_of[name] for name in leaves_of)
        with record_function("gradient to the previous sentence"):
            grads = torch.autograd.grad(next_loss * loss_scale, leaves, retain_graph=True, allow_unused=True)
        surrogate = previous_loss
        for states, grad in zip(selected, grads):
            if grad is not None:
                surrogate = surrogate + (states.float() * grad.float()).sum() / loss_scale
        return surrogate
