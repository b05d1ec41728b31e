"""Truncated back-propagation through a document's sentences: which loss reaches which sentence.

The criterion (``criterion.py``) trains a window of sentence steps one step at a time and hands
each step's graph to a ``TruncatedBackprop``, which decides when the graph is back-propagated
and with what. It applies to systems whose carry has differentiable states (``carry.py``:
sentence states that the next sentence reads).

The contract, for a reach of K sentences (``--gradient-reach K``; 1 is the recurrent memory
paper's section 3.4, "back-propagated to the current and most recent sentences"): sentence t's
loss reaches sentence t's computation and the computations of sentences t−1 … t−K, through the
differentiable states each sentence passes to the next. Whatever else a carry holds is detached
by its system before it is passed on (the memory paper: "we stop the gradient for M before it is
passed to the next step"), whatever K; the states that entered sentence t−K are constants.
K = 0 trains each sentence on its own loss only.

How: a step's forward pass takes the states carried into it as fresh leaves (``links``: each
leaf beside the tensor of the previous step's graph it copies). Its loss's gradient is taken at
those leaves (``torch.autograd.grad``) and carried hop by hop through the kept graphs of the
steps before it, K hops in all, each hop collecting what arrives at that step's states. A
step's graph is back-propagated once, with its own loss plus what arrived at its states, when
the K-th later loss has reached it, or when the window ends: at most K + 1 graphs live at once,
and each step costs K gradient passes besides its own backward.

A window's last K steps end the window before every loss within reach has reached them, and
their graphs cannot outlive the optimizer step (it changes the parameters in place). The
criterion therefore recomputes them at the next window's start (``--gradient-across-windows
recompute``, the default) from the carry before them: their forward passes run again with the
new parameters (and new dropout masks) as far as the decoder's features, their losses not
counted again (``loss`` None), so the next window's first losses reach them as any other. Each
gradient lands in exactly one update: that of the window whose loss sent it. With ``drop``,
they are not recomputed, and a sentence's loss reaches nothing before its window.
"""
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.profiler import record_function

GRADIENT_ACROSS_WINDOWS = ("recompute", "drop")


@dataclass
class PendingStep:
    """A step's graph, kept until every later loss within reach has sent its gradient into it.

    ``loss`` is None for a step recomputed from an earlier window (its loss went into that
    window's update). ``links`` pairs each leaf this step read with the tensor of the previous
    step's graph it copies; ``arriving`` pairs tensors of this step's graph (its carried-out
    states) with the gradient later losses sent them, at the loss scale.
    """

    loss: Optional[Tensor]
    links: List[Tuple[Tensor, Tensor]]
    arriving: List[Tuple[Tensor, Tensor]] = field(default_factory=list)


class TruncatedBackprop:
    """The graphs of one window's steps, back-propagated as the contract above says.

    ``backward`` back-propagates a loss as fairseq's optimizer does (scaled by ``loss_scale``
    under fp16 or AMP): gradients sent between steps are taken from the loss at that scale, so
    they do not underflow where fp16 gradients would, and divided back before ``backward``.
    """

    def __init__(self, backward: Callable[[Tensor], None], reach: int, loss_scale: float = 1.0):
        self.backward = backward
        self.reach = reach
        self.loss_scale = loss_scale
        self.pending: List[PendingStep] = []

    def wants_links(self) -> bool:
        """Whether the next step must read its carried states as leaves (a loss will reach
        through them)."""
        return bool(self.pending)  # with a reach of 0 nothing stays pending

    def add(self, loss: Optional[Tensor], links: List[Tuple[Tensor, Tensor]]):
        """A step's graph: its loss (None for a recomputed step) is sent back through the
        steps within reach, and every step that the last loss within its reach has now
        reached is back-propagated."""
        step = PendingStep(loss, links)
        if loss is not None and links:
            self._send_back(loss * self.loss_scale, step)
        self.pending.append(step)
        while len(self.pending) > self.reach:
            self._back_propagate(self.pending.pop(0))

    def finish(self):
        """The window ends: its remaining graphs are back-propagated with what reached them."""
        while self.pending:
            self._back_propagate(self.pending.pop(0))

    def _send_back(self, scaled_loss: Tensor, newest: PendingStep):
        outputs, grad_outputs, sender = [scaled_loss], None, newest
        for receiver in reversed(self.pending):  # at most ``reach`` steps, newest first
            with record_function("gradient to the previous sentence"):
                grads = torch.autograd.grad(
                    outputs, [leaf for leaf, _ in sender.links], grad_outputs=grad_outputs,
                    retain_graph=True, allow_unused=True,
                )
            arrived = [(states, grad) for (_, states), grad in zip(sender.links, grads) if grad is not None]
            receiver.arriving.extend(arrived)
            if not arrived or not receiver.links:
                return
            outputs = [states for states, _ in arrived]
            grad_outputs = [grad for _, grad in arrived]
            sender = receiver

    def _back_propagate(self, step: PendingStep):
        surrogate = step.loss
        for states, grad in step.arriving:
            term = (states.float() * grad.float()).sum() / self.loss_scale
            surrogate = term if surrogate is None else surrogate + term
        if surrogate is not None:
            self.backward(surrogate)
