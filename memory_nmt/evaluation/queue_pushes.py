"""What a queue memory (``--memory-update queue``) keeps: the share of the memory each sentence pushed,
and how much of a later read falls on the slot a sentence pushed.

For ``examples/learn_to_remember/document_phenomena.py --probe``. The queue writes a sentence as
``M' = p * [new; M[:-1]] + (1 - p) * M`` (``systems/recurrent_memory/memory.py``): every slot but
the first becomes ``p`` of the slot before it and ``1 - p`` of itself. So the share ``p`` a
sentence pushed can be read off the memory that sentence read and the one the next sentence reads,
without opening the model: the least-squares ``p`` over those slots (exact up to rounding). A
sentence pushed near 1 takes a slot of its own; one pushed near 0 leaves the memory as it was.
The slot that holds what a context word's cue sentence pushed, when the word's sentence reads the
memory, is the one most like the front slot after the cue sentence (cosine; meaningful where the cue
sentence pushed near 1, which the shares say, and while the slot has not been pushed out: after that
the most similar slot is another sentence's); the share of the Output Attention at the word's
position (as ``phenomenon_probe.py`` reads) that falls on that slot tells whether the read finds it
(uniform over the slots: one over their number). Documents are walked teacher forced with the memory
carried as in training (``memory_attention.py``).
"""
from typing import Dict, List, Sequence, Tuple

import torch
from torch import Tensor
from torch.nn.functional import cosine_similarity

from .memory_attention import AttentionMapError, teacher_forced_carries
from .phenomenon_probe import ProbePoint, walked_points


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


def checked_queue_units(model) -> dict:
    """``model``'s memory units, each a queue of two slots or more; ``AttentionMapError`` otherwise."""
    units = model.memory_units()
    others = sorted(name for name, unit in units.items() if unit.push_gate is None)
    if others:
        raise AttentionMapError(f"memory layers {', '.join(others)} do not push: only a model trained with "
                                "--memory-update queue has shares pushed to show")
    if any(unit.memory_size < 2 for unit in units.values()):
        raise AttentionMapError("a queue of one slot moves nothing back, so what it pushed cannot be read off "
                                "its memory: probe a model trained with --memory-size 2 or more")
    return units


def pushed_shares(model, dataset, document: int) -> Dict[str, List[float]]:
    """{memory layer: the share each sentence of ``dataset``'s document number ``document`` but its
    last pushed} (the last one's write is read by no sentence)."""
    units = checked_queue_units(model)
    walked = dataset.documents[document]
    sentences = range(walked.first, walked.first + walked.length)
    carries = [carry for _, carry in teacher_forced_carries(model, dataset, sentences)]
    return {name: [pushed_share(before.memory[name][:, 0], after.memory[name][:, 0])
                   for before, after in zip(carries, carries[1:])]
            for name in units}


def cue_slot_reads(model, dataset, points: Sequence[ProbePoint]) -> Dict[str, Dict[Tuple[str, str], List]]:
    """{memory layer: {group: [the shares summed, the points]}}: the share of each point's read that
    falls on the slot holding what its cue sentence pushed, for the points whose cue sentence comes
    before their own, in ``dataset`` (a ``DocumentDataset``) whose documents the points number."""
    units = checked_queue_units(model)
    found = {name: {} for name in units}
    later = [point for point in points if point.cue_sentence < point.sentence]
    for point, carries, at_side in walked_points(model, dataset, later):
        carry = carries[point.sentence][1]
        after_cue = carries[point.cue_sentence + 1][1]  # the memory the cue sentence's write left
        for name, unit in units.items():
            memory = carry.memory[name][:, :1]
            slot = int(cosine_similarity(memory[:, 0], after_cue.memory[name][:1, 0], dim=-1).argmax())
            at = at_side[name.split(".")[0]]
            with torch.no_grad():
                weights = unit.read_weights(carry.states[name][at:at + 1, :1], memory)
            total = found[name].setdefault(point.group, [0.0, 0])
            total[0] += float(weights[0, 0, slot])
            total[1] += 1
    return found
