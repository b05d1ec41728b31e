"""What a trained memory model's memory gives each context word of a long document, by how far back its cue is.

For ``examples/learn_to_remember/document_phenomena.py --probe`` (documents of
``memory_nmt_tools/long_documents.py``). Each held-out document is walked teacher forced with the
memory carried as in training (``memory_attention.teacher_forced_carries``). At a context word's
sentence, per memory layer, the Output Attention's read at the word's own position (on the encoder
side the source token that asks for it: the name, the ambiguous word, the word of two translations,
"it"; on the decoder side the state that predicts the word) is what the memory gives that word. Its
answer (the title, the topic, which of the two translations, the gender) is told from that read by
nearest centroid (``cue_probe.nearest_centroid``: the centroids of the even-numbered documents'
reads, tested on the odd-numbered ones), per phenomenon and distance bucket; chance is one over
the answers. Told well where the model's choice is at chance: the memory gives it and the layers
above do not use it; at chance near the cue too: it is not written or not found; near but not far:
it is overwritten.
"""
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import torch

from .cue_probe import nearest_centroid
from .memory_attention import teacher_forced_carries


@dataclass(frozen=True)
class ProbePoint:
    """A context word to probe: its document (by number), sentence, the source token that asks
    for it, the target word, what is to be told (``answer``) and the group it is counted in."""

    document: int
    sentence: int
    source_token: str
    target_word: str
    answer: str
    group: Tuple[str, str]  # (phenomenon, distance bucket)
    cue_sentence: int  # the sentence that established the answer


def position(tokens: torch.Tensor, token: int, what: str) -> int:
    found = (tokens == token).nonzero()
    if not len(found):
        raise ValueError(f"{what} is not in its sentence's tokens")
    return int(found[0])


def positions(sample, dataset, point: ProbePoint) -> Dict[str, int]:
    """Where each side reads for ``point`` in its sentence's ``sample``: the source token that asks
    for it ("encoder") and the target word ("decoder")."""
    where = f"document {point.document}, sentence {point.sentence}"
    return {
        "encoder": position(sample["net_input"]["src_tokens"][0], dataset.pairs.src_dict.index(point.source_token),
                            f"{where}: {point.source_token!r}"),
        "decoder": position(sample["target"][0], dataset.pairs.tgt_dict.index(point.target_word),
                            f"{where}: {point.target_word!r}"),
    }


def walked_points(model, dataset, points: Sequence[ProbePoint]):
    """Each point with its document's teacher-forced carries (``memory_attention.teacher_forced_carries``)
    and where each side reads for it (``positions``): (point, carries, positions), every document
    walked once, in ``dataset`` (a ``DocumentDataset``) whose documents the points number."""
    by_document: Dict[int, List[ProbePoint]] = defaultdict(list)
    for point in points:
        by_document[point.document].append(point)
    for number, document_points in sorted(by_document.items()):
        document = dataset.documents[number]
        carries = teacher_forced_carries(model, dataset, range(document.first, document.first + document.length))
        for point in document_points:
            yield point, carries, positions(carries[point.sentence][0], dataset, point)


def probe(model, dataset, points: Sequence[ProbePoint]) -> Dict[str, Dict[Tuple[str, str], tuple]]:
    """``{layer: {group: (right, total)}}`` of telling each point's answer from the memory's read
    at its position, in ``dataset`` (a ``DocumentDataset``) whose documents the points number."""
    units = model.memory_units()
    reads = defaultdict(list)  # (layer, group) -> [(document, answer, read)]
    for point, carries, at_side in walked_points(model, dataset, points):
        carry = carries[point.sentence][1]
        for name, unit in units.items():
            at = at_side[name.split(".")[0]]
            with torch.no_grad():
                read = unit.read(carry.states[name][at:at + 1, :1], carry.memory[name][:, :1])
            reads[name, point.group].append((point.document, point.answer, read.flatten()))
    result = {name: {} for name in units}
    for (name, group), rows in reads.items():
        score = nearest_centroid(rows)
        if score is not None:
            result[name][group] = score
    return result
