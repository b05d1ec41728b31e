"""Back-propagation through a document's sentences: which loss reaches which sentence, and when.

The criterion (``criterion.py``) trains a window of sentence steps (``--optimization-window``
steps make one update) one step at a time and hands each step's graph to a back-propagation
contract, which decides when the graphs are back-propagated and with what. It applies to
systems whose carry has differentiable states (``carry.py``: sentence states that the next
sentence reads); whatever else a carry holds is detached by its system before it is passed on
(the memory paper: "we stop the gradient for M before it is passed to the next step").
``--gradient-reach`` chooses the contract:

- ``window`` (``WindowBackprop``): the losses of a window's steps are summed and back-propagated
  once. The carry stays attached from step to step within the window, so sentence t's loss
  reaches the earlier sentences of its window as far as the states each passes to the next
  connect them: how far is the system's (the recurrent memory model with its memory in the top
  layers, the default: sentence t−1 through its states, t−2 through the source side only, as
  t−1's decoder read the encoder's memory written from t−2; docs/training.md). Each
  step's graph is back-propagated once: a step costs its forward and backward passes, as a
  sentence model's batch does, and the window keeps the graphs of all its steps until its
  backward pass. ``--max-graph-tokens`` caps that: the steps beyond the cap keep only what they
  pass on and run forward again during the backward pass (``torch.utils.checkpoint``), which
  costs one more forward pass each and changes no gradient.
- ``K`` (``TruncatedBackprop``, the exact contract; K = 1 is the recurrent memory paper's section
  3.4, "back-propagated to the current and most recent sentences"): sentence t's loss reaches
  sentence t's computation and the computations of sentences t−1 … t−K, and nothing before, in
  any window. K = 0 trains each sentence on its own loss only. A step's forward pass takes the
  states carried into it as fresh leaves (``links``: each leaf beside the tensor of the previous
  step's graph it copies). Its loss's gradient is taken at those leaves
  (``torch.autograd.grad``) and carried hop by hop through the kept graphs of the steps before
  it, K hops in all, each hop collecting what arrives at that step's states. A step's graph is
  back-propagated once, with its own loss plus what arrived at its states, when the K-th later
  loss has reached it, or when the window ends: at most K + 1 graphs live at once, and each step
  costs K gradient passes (each a backward pass through a step's graph) besides its own
  backward.

Across windows. A window's last steps' graphs cannot outlive the optimizer step (it changes the
parameters in place), so the criterion recomputes them at the next window's start
(``--gradient-across-windows recompute``) from the carry before them: the last
step with ``window``, the last K with a reach of K (``recomputed_steps``). Their forward passes
run again with the new parameters (and new dropout masks) as far as the decoder's features,
their losses not counted again (``loss`` None), so the next window's first losses reach them as
any other. Each gradient lands in exactly one update: that of the window whose loss sent it.
With ``drop`` (the default, chosen by time to quality: ``docs/training.md``), they are not
recomputed, and a sentence's loss reaches nothing before its window.
"""
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch.autograd.profiler import record_function

GRADIENT_ACROSS_WINDOWS = ("drop", "recompute")
DEFAULT_ACROSS_WINDOWS = "drop"  # chosen by time to quality (docs/training.md)
WINDOW = "window"
GradientReach = Union[int, str]  # a number of sentences, or WINDOW


def parse_gradient_reach(text) -> GradientReach:
    """``--gradient-reach``'s value: ``window``, or a number of sentences (0 or more); ValueError
    with the words to show otherwise."""
    text = str(text).strip()
    if text == WINDOW:
        return WINDOW
    if text.isdigit():
        return int(text)
    raise ValueError(f"{text}: give 'window' or a number of sentences (0 or more)")


def drop_cuts_every_gradient(window: Tuple[Optional[int], Optional[int]], reach: GradientReach) -> bool:
    """Whether ``--gradient-across-windows drop`` with windows of ``window`` steps (parsed, as
    ``data.parse_window`` gives them) keeps every loss from the sentences before it: windows of one
    step, a reach above 0."""
    return window == (1, 1) and reach != 0


def recomputed_steps(reach: GradientReach) -> int:
    """How many of a window's last steps the next window recomputes with ``recompute``."""
    return 1 if reach == WINDOW else reach


def back_propagation(reach: GradientReach, backward: Callable[[Tensor], None], loss_scale: float = 1.0,
                     max_graph_tokens: Optional[int] = None):
    """The contract of ``reach`` for one window, back-propagating with ``backward``."""
    if reach == WINDOW:
        return WindowBackprop(backward, max_graph_tokens)
    return TruncatedBackprop(backward, reach, loss_scale)


class WindowBackprop:
    """The losses of one window summed and back-propagated once, its carry attached throughout.

    ``keeps_graph(tokens)`` says, step by step, whether a step of ``tokens`` padded tokens keeps
    its activations for the backward pass (within ``max_graph_tokens``, counting the steps
    before it) or runs forward again during it.
    """

    def __init__(self, backward: Callable[[Tensor], None], max_graph_tokens: Optional[int] = None):
        self.backward = backward
        self.max_graph_tokens = max_graph_tokens
        self.kept_tokens = 0
        self.total: Optional[Tensor] = None

    def wants_links(self) -> bool:
        return False  # nothing is cut between steps: the next step reads the states themselves

    def keeps_carry_graph(self) -> bool:
        return True

    def keeps_graph(self, tokens: int) -> bool:
        if self.max_graph_tokens is None or self.kept_tokens + tokens <= self.max_graph_tokens:
            self.kept_tokens += tokens
            return True
        return False

    def add(self, loss: Optional[Tensor], links: List[Tuple[Tensor, Tensor]]):
        if loss is not None:
            self.total = loss if self.total is None else self.total + loss

    def finish(self):
        if self.total is not None:
            self.backward(self.total)
        self.total = None


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
    """The graphs of one window's steps, back-propagated as the exact reach-K contract says.

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

    def keeps_carry_graph(self) -> bool:
        return self.wants_links()

    def keeps_graph(self, tokens: int) -> bool:
        return True

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
