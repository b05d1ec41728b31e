"""Training batches of sentences that each bring their context, for systems whose context is earlier sentences' tokens.

A system whose carry is made of its document's previous sentences (``system.py``: the
'sentences' training unit, ``carry_of_previous_sentences``) needs no walk through its documents
to train: the data holds those sentences for any sentence. It trains (the planner
``ShuffledSentences``, ``planners.py``'s interface), as its papers and
fairseq's own translation task do, on fairseq's usual batches: sentences of similar width,
packed by ``data_utils.batch_by_size`` within ``--max-tokens`` / ``--batch-size``, shuffled
every epoch and dealt to the data-parallel workers by fairseq's own iterator. A sentence's width
counts the previous sentences its system reads with it, up to the model's positions, to which
the system cuts them (``DocumentDataset.step_tokens``). Each row brings, under
``previous_sentences``, its ``context_sentences()`` previous source and target (reference)
sentences of its own document, oldest first (fewer at a document's start), in the batch's row
order; the criterion makes the rows' carry from them. A system whose sentences read context
sentences the data chooses (``chosen_context.py``) gets them in each batch's ``net_input``, drawn
for the epoch (the task passes the split's view for it, ``DocumentDataset.choosing``), and its
sentences' widths count them. One batch is one forward and backward
pass; ``--update-freq`` accumulates batches as usual. Every sentence of the split is in exactly
one batch an epoch; a worker with fewer batches gets empty ones (fairseq's dummy batches).
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils

from .data import DocumentDataset
from .planners import EpochRequest, PlannedEpoch
from .samples import sentences_sample


@dataclass(frozen=True)
class ShuffledSentences:
    """The training batches of a system whose context is its ``context`` = (source, target)
    previous sentences: fairseq's batches of sentences of similar width, each with them (cut to
    ``max_positions``, the model's), dealt to the workers and shuffled by fairseq's iterator."""

    context: Tuple[int, int]
    max_positions: object = None

    def describe(self) -> str:
        return ("shuffled sentences of similar width, each with the context sentences its system reads, "
                "one batch an update (sentence_batches.py)")

    def plan(self, dataset: DocumentDataset, request: EpochRequest) -> PlannedEpoch:
        sentences = SentencesWithContext(dataset, self.context, self.max_positions)
        batches = sentences.batches(request.max_tokens, request.max_sentences, request.seed, request.epoch)
        digested = ([batch.tolist() for batch in batches], request.seed, request.num_shards)
        return PlannedEpoch(sentences, batches, digested, fairseq_shards=True)


class SentencesWithContext(FairseqDataset):
    """The sentences of a split (``dataset``), each with its ``context`` = (source, target)
    previous sentences of its document, and its chosen ones where ``dataset`` has them;
    ``max_positions``: the model's, to which context is cut."""

    def __init__(self, dataset: DocumentDataset, context: Tuple[int, int], max_positions):
        super().__init__()
        self.dataset = dataset
        self.context = context
        self.widths = np.zeros(len(dataset), dtype=np.int64)
        self.document_start = np.zeros(len(dataset), dtype=np.int64)
        for document in dataset.documents:
            span = slice(document.first, document.first + document.length)
            self.widths[span] = dataset.step_tokens(document, context, max_positions)
            self.document_start[span] = document.first

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        source_count, target_count = self.context
        start = int(self.document_start[index])
        pairs = self.dataset.pairs
        previous = (
            tuple(pairs[j]["source"] for j in range(max(start, index - source_count), index)),
            tuple(pairs[j]["target"] for j in range(max(start, index - target_count), index)),
        )
        return {"pair": pairs[index], "previous": previous}

    def num_tokens(self, index):
        return int(self.widths[index])

    def size(self, index):
        return int(self.widths[index])

    def batches(self, max_tokens: Optional[int], max_sentences: Optional[int], seed: int, epoch: int) -> List[np.ndarray]:
        """The epoch's batches: sentences of similar width (ties in an order drawn from the seed
        and the epoch), as fairseq packs them; a sentence wider than ``max_tokens`` is refused
        by name."""
        self.dataset.require_a_batch_size(max_tokens, max_sentences)
        for document in self.dataset.documents:
            span = self.widths[document.first:document.first + document.length]
            self.dataset.refuse_wider_than(max_tokens, document, span, self.context)
        with data_utils.numpy_seed(seed, epoch):
            shuffled = np.random.permutation(len(self))
        indices = shuffled[np.argsort(self.widths[shuffled], kind="mergesort")]
        return data_utils.batch_by_size(
            indices, self.num_tokens, num_tokens_vec=self.widths[indices],
            max_tokens=max_tokens, max_sentences=max_sentences, required_batch_size_multiple=1,
        )

    def collater(self, samples):
        """fairseq's batch of the sentences (``samples.py``'s ``SentencesBatch``), with each row's
        previous sentences and lane (a row each), and its chosen context sentences in
        ``net_input``; an empty list of samples (a padded shard) gives fairseq's empty batch."""
        batch = self.dataset.pairs.collater([sample["pair"] for sample in samples])
        if not batch:
            return batch
        previous_of = {int(sample["pair"]["id"]): sample["previous"] for sample in samples}
        self.dataset.add_chosen_context(batch)
        return sentences_sample(batch, torch.arange(batch["id"].numel()),
                                [previous_of[index] for index in batch["id"].tolist()])
