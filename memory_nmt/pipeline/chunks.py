"""Chunks: documents cut into pieces of at most N sentences, for systems that read a chunk's whole source.

Most systems read what came before a sentence. A system that also reads the sentences after it,
every source sentence of its chunk, says how long its chunks are
(``DocumentSystem.chunk_sentences``). The pipeline then cuts each document, from its first
sentence, into chunks of at most N consecutive sentences (``cut_into_chunks``) and treats each
chunk as a document of its own: it takes a lane, its first sentence starts with nothing
carried, and nothing of one chunk reaches another.

Every batch of such a system tells, in ``net_input`` (``chunk_inputs``):

- ``chunk_positions`` (B,): each row's sentence index in its chunk;
- ``chunk_lengths`` (B,) and ``chunk_src_tokens``, in a batch that translates sentence by sentence
  (decoding, validation): where a row starts its chunk, the number of sentences of the chunk (else
  0) and their source tokens, one sentence a row, the rows' chunks one after another, left-padded
  as fairseq pads a source. So the whole chunk is known before its first sentence is translated.

Training batches hold whole chunks instead (``DocumentDataset.whole_chunk_groups``): every
sentence of the group's chunks is a row, the rows of a chunk share its lane, and ``chunk_lengths``
is absent: the chunk's sentences are the batch's own rows.
"""
from typing import Dict, List, Optional, Sequence

import torch
from fairseq.data import data_utils
from torch import Tensor


def cut_into_chunks(documents: Sequence, chunk_sentences: int) -> List:
    """``documents`` (``data.Document``) as chunks of at most ``chunk_sentences`` sentences, in order."""
    chunks = []
    for document in documents:
        for start in range(0, document.length, chunk_sentences):
            chunks.append(
                type(document)(document.doc_id, document.first + start, min(chunk_sentences, document.length - start))
            )
    return chunks


def chunk_inputs(positions: Sequence[int], chunks: Sequence[Optional[Sequence[Tensor]]], pad: int) -> Dict[str, Tensor]:
    """The ``net_input`` entries of a batch (see the module doc): ``positions[row]`` is the row's
    sentence index in its chunk; ``chunks[row]`` the source sentences of the chunk where the row
    starts it, else None (give None for every row of a whole-chunk batch)."""
    inputs = {"chunk_positions": torch.tensor(list(positions), dtype=torch.long)}
    if any(chunk is not None for chunk in chunks):
        sentences = [sentence for chunk in chunks if chunk is not None for sentence in chunk]
        inputs["chunk_lengths"] = torch.tensor([len(chunk) if chunk is not None else 0 for chunk in chunks])
        inputs["chunk_src_tokens"] = data_utils.collate_tokens(sentences, pad, left_pad=True)
    return inputs
