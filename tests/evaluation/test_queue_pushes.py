"""queue_pushes: the share of a queue memory each sentence pushed, read off the memory it carries on."""
import pytest
import torch

from conftest import TINY_MODEL, build
from memory_nmt.evaluation.memory_attention import AttentionMapError
from memory_nmt.evaluation.queue_pushes import is_queue, pushed_shares


def test_the_share_a_sentence_pushed_is_read_off_the_memory_it_read_and_the_next_one_reads(data_bin):
    """Each layer's gate held at its own share (the encoder's open by sigmoid(0.7), the decoder's by
    sigmoid(-2)): every sentence of a document but its last is read as having pushed its layer's
    share; a model whose memory does not push is refused, naming its layers."""
    task, queue, _, _ = build(data_bin, *TINY_MODEL, "--memory-update", "queue")
    task.load_dataset("test")
    dataset = task.dataset("test")
    queue.eval()
    biases = {"encoder.1": 0.7, "decoder.1": -2.0}
    with torch.no_grad():
        for name, unit in queue.memory_units().items():
            unit.push_gate.weight.zero_()
            unit.push_gate.bias.fill_(biases[name])
    assert is_queue(queue)
    for document in (0, 1):
        shares = pushed_shares(queue, dataset, document)
        assert sorted(shares) == ["decoder.1", "encoder.1"]
        for name, found in shares.items():
            assert len(found) == dataset.documents[document].length - 1 > 0
            assert found == pytest.approx([torch.sigmoid(torch.tensor(biases[name])).item()] * len(found), abs=1e-4)
    _, paper, _, _ = build(data_bin, *TINY_MODEL)
    assert not is_queue(paper)
    with pytest.raises(AttentionMapError, match="decoder.1, encoder.1 do not push"):
        pushed_shares(paper, dataset, 0)
