"""What a trained memory model keeps of the sentence that cues a later word: written, then kept.

For ``examples/learn_to_remember/long_range_learning.py --probe-epochs``, whose synthetic documents fix
an ambiguous word's sense by their first sentence (``memory_nmt_tools/synthetic_documents.py``). Documents are walked
teacher forced with the memory carried as in training (``memory_attention.py``); per memory layer:

- ``written``: when the first sentence is written into the memory, the Update Attention's weight
  on its cue tokens (the words that only one topic's first sentences hold), averaged over slots
  and heads, over the cue tokens' share of the sentence's tokens: 1 is no preference, above 1
  the write looks at the cue;
- ``kept``: how well the document's topic can be told from the memory that the sentence d
  sentences after the first reads, by distance bucket: nearest-centroid accuracy, the two
  topics' centroids (of the flattened memory) taken from the even-numbered documents at that
  bucket and tested on the odd-numbered ones (chance 50%). Kept but not used (a wrong sense
  word at that distance) points at the read; not kept points at the write.
"""
from collections import defaultdict
from typing import Callable, Dict, List, Sequence, Set

import torch

from .memory_attention import teacher_forced_carries


def walk_document(model, dataset, document):
    """(sample, carry) after each sentence of ``document``, the memory carried from its start."""
    return teacher_forced_carries(model, dataset, range(document.first, document.first + document.length))


def side_tokens(sample, side: str) -> List[int]:
    """The token ids whose states ``side``'s memory layers write (the decoder writes its inputs)."""
    tokens = sample["net_input"]["src_tokens" if side == "encoder" else "prev_output_tokens"]
    return tokens[0].tolist()


def probe(model, dataset, topics: Sequence[int], cue_ids: Dict[str, Set[int]], bucket: Callable[[int], str]) -> dict:
    """``{layer: {"written": ratio, "kept": {bucket: (right, total)}}}`` over the first
    ``len(topics)`` documents of ``dataset`` (a ``DocumentDataset``), whose topics (0 or 1)
    ``topics`` gives; ``cue_ids``: the cue tokens' ids by side ("encoder", "decoder")."""
    units = model.memory_units()
    written = defaultdict(list)
    memories = defaultdict(list)  # (layer, bucket) -> [(document number, topic, flattened memory)]
    for number, (document, topic) in enumerate(zip(dataset.documents, topics)):
        carries = walk_document(model, dataset, document)
        first_sample, first = carries[0]
        for name, unit in units.items():
            side = name.split(".")[0]
            tokens = side_tokens(first_sample, side)
            cue = torch.tensor([token in cue_ids[side] for token in tokens])
            if cue.any():
                with torch.no_grad():
                    _, weights = unit.write(first.memory[name], first.states[name], first.padding_mask[name],
                                            need_weights=True)
                on_cue = weights[0][:, cue].sum(-1).mean().item()
                written[name].append(on_cue / (cue.sum().item() / len(tokens)))
            for distance, (_, carry) in enumerate(carries[1:], start=1):
                memories[name, bucket(distance)].append((number, topic, carry.memory[name].flatten()))
    result = {name: {"written": sum(written[name]) / len(written[name]) if written[name] else None, "kept": {}}
              for name in units}
    for (name, distance_bucket), rows in memories.items():
        score = nearest_centroid(rows)
        if score is not None:
            result[name]["kept"][distance_bucket] = score
    return result


def nearest_centroid(rows) -> "tuple | None":
    """(right, total) of telling the class (topic, or any label) of the odd-numbered documents'
    vectors by the nearest of the even-numbered ones' class centroids; None unless the even-numbered
    documents hold every class of the odd-numbered ones, and two at least."""
    fit = [(label, vector) for number, label, vector in rows if number % 2 == 0]
    test = [(label, vector) for number, label, vector in rows if number % 2 == 1]
    labels = sorted({label for label, _ in fit})
    if len(labels) < 2 or not test or not {label for label, _ in test} <= set(labels):
        return None
    centroids = torch.stack([torch.stack([v for of, v in fit if of == label]).mean(0) for label in labels])
    right = sum(int(labels[torch.cdist(vector[None], centroids).argmin().item()] == label) for label, vector in test)
    return right, len(test)
