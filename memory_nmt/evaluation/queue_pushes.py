"""What a queue memory (``--memory-update queue``) keeps: the share of the memory each sentence pushed.

For ``examples/learn_to_remember/document_phenomena.py --probe``. The queue writes a sentence as
``M' = p * [new; M[:-1]] + (1 - p) * M`` (``systems/recurrent_memory/memory.py``): every slot but
the first becomes ``p`` of the slot before it and ``1 - p`` of itself. So the share ``p`` a
sentence pushed can be read off the memory that sentence read and the one the next sentence reads,
without opening the model: the least-squares ``p`` over those slots (exact up to rounding). A
sentence pushed near 1 takes a slot of its own; one pushed near 0 leaves the memory as it was.
Documents are walked teacher forced with the memory carried as in training
(``memory_attention.py``).
"""
from typing import Dict, List

from torch import Tensor

from .memory_attention import AttentionMapError, teacher_forced_carries


def pushed_share(before: Tensor, after: Tensor) -> float:
    """The share a queue write pushed, from the memory before and after it (slots x C, two slots or
    more); NaN where every slot of the memory before it equals the one before it, so that moving
    them back changes nothing."""
    before, after = before.detach(), after.detach()  # the first sentence's memory is the initial parameter
    moved = before[:-1] - before[1:]
    return float((after[1:] - before[1:]).mul(moved).sum() / moved.pow(2).sum())


def is_queue(model) -> bool:
    """Whether every memory layer of ``model`` (a ``transformer_recurrent_memory``) is a queue."""
    return all(unit.push_gate is not None for unit in model.memory_units().values())


def pushed_shares(model, dataset, document: int) -> Dict[str, List[float]]:
    """{memory layer: the share each sentence of ``dataset``'s document number ``document`` but its
    last pushed} (the last one's write is read by no sentence)."""
    units = model.memory_units()
    others = sorted(name for name, unit in units.items() if unit.push_gate is None)
    if others:
        raise AttentionMapError(f"memory layers {', '.join(others)} do not push: only a model trained with "
                                "--memory-update queue has shares pushed to show")
    if any(unit.memory_size < 2 for unit in units.values()):
        raise AttentionMapError("a queue of one slot moves nothing back, so what it pushed cannot be read off "
                                "its memory: probe a model trained with --memory-size 2 or more")
    walked = dataset.documents[document]
    sentences = range(walked.first, walked.first + walked.length)
    carries = [carry for _, carry in teacher_forced_carries(model, dataset, sentences)]
    return {name: [pushed_share(before.memory[name][:, 0], after.memory[name][:, 0])
                   for before, after in zip(carries, carries[1:])]
            for name in units}
