"""What a lane carries when its system's context is earlier sentences of the document: their tokens.

``PreviousSentences`` holds, for each row, the last few source sentences and the last few target
sentences of its document, oldest first, each a 1-D tensor of token ids ending with eos and
without padding: the source as binarized, the target as the reference in training and as the
chosen hypothesis in decoding (``pipeline/generator.py``). A document's first sentence has none
(``none``, its starting carry), so the sentences never come from another document. Systems that
read earlier sentences (the concatenation model, the Associated Memory Network) derive from
``PreviousSentencesSystem``: they read them with ``of_rows``, carry them on with ``after`` (the
last ``context_sentences()`` of each side), and cut them to the positions the model has room for
with a ``ContextCuts``.
"""
import logging
from typing import List, Sequence, Tuple

import torch
from torch import Tensor

from ..pipeline.carry import Carry
from ..pipeline.system import DocumentSystem

logger = logging.getLogger(__name__)

Sentences = Tuple[Tensor, ...]


def unpadded(tokens: Tensor, pad: int) -> List[Tensor]:
    """The rows of a padded batch (either side), without their padding."""
    return [row[row.ne(pad)] for row in tokens]


def last(sentences: Sequence, count: int) -> Sequence:
    """The last ``count`` of ``sentences`` (all of them if there are fewer)."""
    return sentences[-count:] if count else sentences[:0]


class PreviousSentences(Carry):
    """Per row (``lanes``): ``source[row]`` and ``target[row]``, earlier sentences, oldest first."""

    def __init__(self, lanes: Tensor, source: Sequence[Sentences], target: Sequence[Sentences]):
        super().__init__(lanes)
        self.source = list(source)
        self.target = list(target)

    def rows(self, rows: Tensor) -> "PreviousSentences":
        indices = rows.tolist()
        return PreviousSentences(
            self.lanes.index_select(0, rows), [self.source[i] for i in indices], [self.target[i] for i in indices]
        )

    def stacked(self, other: "PreviousSentences") -> "PreviousSentences":
        return PreviousSentences(
            torch.cat([self.lanes, other.lanes]), self.source + other.source, self.target + other.target
        )

    @staticmethod
    def none(lanes: Tensor) -> "PreviousSentences":
        """Rows ``lanes`` at their documents' first sentences: no earlier sentence."""
        return PreviousSentences(lanes, [()] * lanes.numel(), [()] * lanes.numel())

    def of_rows(self) -> List[Tuple[Sentences, Sentences]]:
        """(source, target) earlier sentences of every row."""
        return list(zip(self.source, self.target))

    @staticmethod
    def after(
        lanes: Tensor,
        previous: Sequence[Tuple[Sentences, Sentences]],
        sources: Sequence[Tensor],
        targets: Sequence[Tensor],
        source_count: int,
        target_count: int,
    ) -> "PreviousSentences":
        """The last ``source_count`` / ``target_count`` sentences of each row once ``sources[row]``
        and ``targets[row]`` (its current sentence and translation) are added."""
        return PreviousSentences(
            lanes,
            [last((*source, new), source_count) for (source, _), new in zip(previous, sources)],
            [last((*target, new), target_count) for (_, target), new in zip(previous, targets)],
        )


class ContextCuts:
    """Context sentences cut to a budget of tokens, the furthest from the current sentence first
    (earlier sentences: the oldest), and the cuts counted in ``count`` and logged with the count
    at the 1st, 10th, 100th, ... cut."""

    def __init__(self):
        self.count = 0

    def fitting(self, sentences: Sentences, budget: int, bound: str, remedy: str,
                nearest_first: bool = False) -> List[Tensor]:
        """The nearest of ``sentences`` (the last ones, or the first with ``nearest_first``)
        whose tokens fit ``budget``; further ones are cut. The log names what bounds the budget
        (``bound``) and what would keep them (``remedy``)."""
        kept, used = [], 0
        for sentence in (sentences if nearest_first else reversed(sentences)):
            if used + sentence.numel() > budget:
                self.count += 1
                if str(self.count).rstrip("0") == "1":
                    logger.warning(
                        "context cut %d times so far: the latest, a context sentence of %d tokens, "
                        "did not fit beside the current sentence within %s (%d of %d tokens left), "
                        "so it and any context further away were left out; to keep them, %s",
                        self.count, sentence.numel(), bound, max(budget - used, 0), max(budget, 0), remedy,
                    )
                break
            kept.append(sentence)
            used += sentence.numel()
        return kept if nearest_first else kept[::-1]


class PreviousSentencesSystem(DocumentSystem):
    """A document system whose context is its document's earlier sentences, carried in
    ``PreviousSentences``: each lane keeps the last ``context_sentences()`` source and target
    sentences, and a row's source ones are cut with ``context_cuts`` to fit the encoder's
    positions beside its current sentence."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.context_cuts = ContextCuts()

    def sources_beside(self, sources: Sequence[Sentences], sentences: Sequence[Tensor], nearest_first: bool = False):
        """Each row's context source sentences (previous ones, oldest first, or with
        ``nearest_first`` the nearest first) that fit the encoder's positions beside its current
        sentence (``sentences``, unpadded), the furthest cut first."""
        limit = self.encoder.max_positions()
        return [
            self.context_cuts.fitting(
                source, limit - sentence.numel(), f"the encoder's {limit} positions (--max-source-positions)",
                "raise --max-source-positions", nearest_first,
            )
            for source, sentence in zip(sources, sentences)
        ]

    def training_unit(self) -> str:
        """Its context is earlier sentences' tokens, which the data gives for any sentence: it
        trains on shuffled sentences, each with its previous ones, as its papers do."""
        return "sentences"

    def starting_carry(self, lanes, rows, net_input) -> PreviousSentences:
        return PreviousSentences.none(lanes)

    def carry_of_previous_sentences(self, lanes, previous) -> PreviousSentences:
        return PreviousSentences(lanes, [source for source, _ in previous], [target for _, target in previous])

    def carry_out(self, context, lanes, net_input, target, encoding, decoder_extra=None) -> PreviousSentences:
        """Each lane's previous sentences, with this sentence and its translation added."""
        pad = self.encoder.padding_idx
        previous = context.kept
        sources, targets = unpadded(net_input["src_tokens"], pad), unpadded(target, pad)
        return PreviousSentences.after(lanes, previous, sources, targets, *self.context_sentences())
