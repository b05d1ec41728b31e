"""One sentence step teacher-forced on its reference: the pipeline's single definition of it.

A step's rows (one sentence of each of its lanes) read their context from what the lanes
carried in, or, where a row starts its document, from what the system starts one with
(``carry_of_rows``), or from the context sentences the batch brings (``chosen_context.py``),
through the system's ``sentence_context`` (``system.py``), go through the model with the
reference as the decoder's input, and hand on what the lanes carry to their next sentences (its
``carry_out``, ``carry.py``). Training and validation (``criterion.py``),
contrastive scoring (``evaluation/contrastive.py``), the attention analyses
(``evaluation/memory_attention.py``) and the tests' shared walk run a sentence this way, so none
of them can drift from what training does; the gradient-reach analysis alone carries the memory
undetached, since that is what it measures. Decoding (``generator.py``) differs only in where
the translation comes from: beam search, not the reference.

A step whose sentences are packed several to a row (``packing.py``) computes each sentence alone:
a system that reads a context (``DocumentSystem``) gets where its sentences lie (``packed_rows``)
with its inputs and confines its attention and what it reads to each sentence itself; fairseq's own
model runs through ``packed_attention.packed_forward``. What a system reads and carries out is per
sentence, as in a step padded one sentence a row.

The parts are named for torch.profiler as fairseq names its own: "sentence context" (what the
system computes from the carry, such as a memory's update), "forward" (the model's pass, and the
loss when asked for) and "carry out".
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from fairseq.data import data_utils
from torch import Tensor
from torch.autograd.profiler import record_function

from .carry import Carry
from .chosen_context import without_chosen
from .packed_attention import packed_forward
from .packing import PackedRows
from .system import SentenceContext, SentenceLevel, carry_of_rows, document_system


@dataclass
class TeacherForcedStep:
    """What one teacher-forced step gives: the context its rows read, the model's output
    (``(logits or features, extra)``, fairseq's), the loss when one was asked for, and what the
    step's lanes carry out."""

    context: SentenceContext
    net_output: Tuple[Tensor, Dict[str, Any]]
    loss: Any
    carry: Carry


def teacher_forced_step(
    model,
    carry: Optional[Carry],
    lanes: Tensor,
    net_input: Dict[str, Tensor],
    target: Tensor,
    continues: Optional[Tensor] = None,
    features_only: bool = False,
    loss_of: Optional[Callable[[Tuple[Tensor, Dict[str, Any]]], Any]] = None,
    packed_rows: Optional[PackedRows] = None,
) -> TeacherForcedStep:
    """Run one sentence of each of ``lanes`` through ``model`` (a system, or fairseq's
    data-parallel wrapper around one), teacher-forced on ``target`` (fairseq's targets:
    right-padded, each row ending with eos; ``net_input`` holds its ``prev_output_tokens``).

    ``carry`` is what the lanes carried in, selected to the rows (None where every row starts its
    document); where ``continues`` (B,) is given (lanes that refill), only the rows it marks go on
    with their lane's document and read it, the others start one. ``features_only`` stops the
    decoder at its features (no output projection); ``loss_of(net_output)``, if given, is
    computed inside the "forward" region."""
    system = document_system(model)
    if continues is not None and carry is not None:
        carry = carry.rows(continues.nonzero().squeeze(1)) if bool(continues.any()) else None
    with record_function("sentence context"):
        carry = carry_of_rows(system, carry, lanes, continues, net_input)
        context = system.sentence_context(carry, net_input, target_room=target.size(1) - 1)
    with record_function("forward"):
        if packed_rows is not None and isinstance(system, SentenceLevel):
            net_output = packed_forward(model, net_input, packed_rows, features_only)
        else:
            layout = {} if packed_rows is None else {"packed_rows": packed_rows}
            net_output = model(**without_chosen(net_input), **context.inputs, **layout, features_only=features_only)
        loss = loss_of(net_output) if loss_of is not None else None
    with record_function("carry out"):
        carried = system.carry_out(
            context, lanes, net_input, target, net_output[1].get("encoding"), net_output[1]
        )
    return TeacherForcedStep(context, net_output, loss, carried)


def teacher_forcing_input(target: Tensor, dictionary) -> Tensor:
    """The decoder input that teacher-forces ``target`` (right-padded, each row ending with the
    token decoding starts from: eos, or mBART's target language token, ``language_tokens.py``):
    each row's last token moved to its front, as fairseq's collater makes ``prev_output_tokens``."""
    pad = dictionary.pad()
    return data_utils.collate_tokens(
        [row[row.ne(pad)] for row in target], pad_idx=pad, eos_idx=None, move_eos_to_beginning=True
    )
