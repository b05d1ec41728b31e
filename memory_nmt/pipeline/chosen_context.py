"""Context sentences the data chooses for each sentence: its document's next ones, or random ones of other documents.

Most systems read what their lanes carry: what came before a sentence in its document. A system
may declare instead that each sentence reads source sentences the data picks for it
(``DocumentSystem.context_choice``, ``system.py``), a ``ContextChoice`` of N sentences:

- ``next``: the N sentences that follow it in its document, nearest first (fewer near the
  document's end, none at its last sentence); never the sentence itself or an earlier one;
- ``random``: N different sentences of the split's other documents, never of its own, in the
  split's order. They are drawn from fairseq's ``--seed``, the epoch and the sentence's index
  (numpy's generator seeded with the seed and the epoch, one row of draws per sentence): the same
  split decoded twice, or an epoch resumed, reads the same sentences, and a training epoch reads
  others than the one before. fairseq-generate and validation batch as epoch 1.

The split's batches (``DocumentDataset.choosing``: the decoding and validation steps of
``data.py``, lanes in training, the shuffled sentence batches of ``sentence_batches.py``) hold
them in ``net_input`` (``chosen_inputs``):

- ``chosen_context_counts`` (B,): how many sentences each row reads;
- ``chosen_context_tokens`` (S, L): the rows' sentences one after another, one sentence a row,
  right-padded (absent when no row has any).

The system's ``sentence_context`` reads them (``chosen_sentences``) and makes its model's inputs
of them; the model's forward pass gets ``net_input`` without them (``without_chosen``). The
batches' widths count them with the sentence, up to the model's positions, as they count the
previous sentences a system reads (``DocumentDataset.step_tokens``). fairseq-interactive, the hub
and the contrastive scorer know a sentence only with what came before it: their batches hold no
chosen sentences, and ``chosen_sentences`` refuses them.
"""
from dataclasses import dataclass
from typing import Dict, List, Sequence

import numpy as np
import torch
from fairseq.data import data_utils
from torch import Tensor

from .errors import InputError

CHOSEN_CONTEXTS = ("next", "random")
COUNTS, TOKENS = "chosen_context_counts", "chosen_context_tokens"


class ChosenContextError(InputError):
    pass


@dataclass(frozen=True)
class ContextChoice:
    """Which sentences a sentence reads as its context: ``kind`` (``CHOSEN_CONTEXTS``), ``count`` of them."""

    kind: str
    count: int

    def option(self) -> str:
        return f"--context-choice {self.kind}"


class ChosenSentences:
    """The context sentences of every sentence of a split in one epoch: ``indices`` (sentences x
    count), dataset indices in the order they are read, -1 where a sentence has fewer;
    ``tokens`` (sentences,): their source tokens together."""

    def __init__(self, choice: ContextChoice, indices: np.ndarray, src_sizes):
        self.choice = choice
        self.indices = indices
        sizes = np.asarray(src_sizes, dtype=np.int64)
        self.tokens = np.where(indices >= 0, sizes[np.maximum(indices, 0)], 0).sum(1)

    def of(self, index: int) -> List[int]:
        return [int(j) for j in self.indices[index] if j >= 0]

    def inputs(self, ids: Sequence[int], pairs) -> Dict[str, Tensor]:
        """The ``net_input`` entries of a batch whose rows are the sentences ``ids``."""
        return chosen_inputs([[pairs[j]["source"] for j in self.of(index)] for index in ids], pairs.src_dict.pad())


def choose(choice: ContextChoice, dataset, seed: int, epoch: int) -> ChosenSentences:
    """The sentences each sentence of ``dataset`` (a ``DocumentDataset``) reads in ``epoch``."""
    lengths = [document.length for document in dataset.documents]
    first = np.repeat(np.asarray([document.first for document in dataset.documents], dtype=np.int64), lengths)
    length = np.repeat(np.asarray(lengths, dtype=np.int64), lengths)
    index = np.arange(len(first))
    if choice.kind == "next":
        indices = index[:, None] + 1 + np.arange(choice.count)[None, :]
        indices = np.where(indices < (first + length)[:, None], indices, -1)
    else:
        check_split(choice, dataset)
        indices = draw_from_other_documents(index, first, length, choice.count, np.random.default_rng([seed, epoch]))
    return ChosenSentences(choice, indices, dataset.pairs.src_sizes)


def draw_from_other_documents(index, first, length, count: int, rng) -> np.ndarray:
    """Per sentence, ``count`` different sentences outside its document (fewer if there are
    not as many), in the split's order: each draw is a place among the sentences not drawn
    yet, counted past the document and the earlier draws."""
    pool = len(index) - length
    uniform = rng.random((len(index), count))
    drawn = np.zeros((len(index), 0), dtype=np.int64)
    for k in range(count):
        place = np.floor(uniform[:, k] * np.maximum(pool - k, 0)).astype(np.int64)
        for taken in np.sort(drawn, axis=1).T:
            place += place >= taken
        drawn = np.concatenate([drawn, place[:, None]], axis=1)
    indices = np.where(drawn < first[:, None], drawn, drawn + length[:, None])
    indices = np.where(np.arange(count)[None, :] < pool[:, None], indices, np.iinfo(np.int64).max)
    indices.sort(axis=1)
    return np.where(indices == np.iinfo(np.int64).max, -1, indices)


def check_split(choice: ContextChoice, dataset):
    """Refuse random context on a split that has no other document to draw it from."""
    if choice.kind == "random" and len(dataset.documents) == 1:
        raise ChosenContextError(
            f"{choice.option()} reads sentences of the split's other documents, but the split "
            f"{dataset.stream!r} ({dataset.docids_path}) has one document, {dataset.documents[0].doc_id!r}: "
            "give the split several documents (one document id per sentence line), or use "
            "--context-choice previous or next"
        )


def chosen_inputs(rows: Sequence[Sequence[Tensor]], pad: int) -> Dict[str, Tensor]:
    """The ``net_input`` entries (see the module doc) of rows that read ``rows[r]`` each."""
    inputs = {COUNTS: torch.tensor([len(row) for row in rows], dtype=torch.long)}
    sentences = [sentence for row in rows for sentence in row]
    if sentences:
        inputs[TOKENS] = data_utils.collate_tokens(sentences, pad, left_pad=False)
    return inputs


def chosen_sentences(net_input: Dict[str, Tensor], choice: ContextChoice, pad: int) -> List[List[Tensor]]:
    """Each row's chosen sentences, without padding, from a batch's ``net_input``; a batch
    without them (fairseq-interactive, the hub, the contrastive scorer) is refused."""
    if COUNTS not in net_input:
        raise ChosenContextError(
            f"the model reads {choice.option()} (--context-sentences {choice.count}): each sentence's "
            "context comes from the whole binarized split, which fairseq-interactive, the hub and "
            "the contrastive scorer do not have (they know a sentence and the sentences before it); "
            "translate a binarized split with its .docids with fairseq-generate, or use a model "
            "trained with --context-choice previous"
        )
    counts = net_input[COUNTS].tolist()
    sentences = [row[row.ne(pad)] for row in net_input[TOKENS]] if sum(counts) else []
    starts = np.cumsum([0, *counts])
    return [sentences[start:end] for start, end in zip(starts[:-1], starts[1:])]


def without_chosen(net_input: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """``net_input`` less the chosen sentences, which the system read: what the model's forward pass gets."""
    return {key: value for key, value in net_input.items() if key not in (COUNTS, TOKENS)}
