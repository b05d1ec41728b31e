"""queue_pushes: the share of a queue memory each sentence pushed, read off the memory it carries on, and
the share of a later read on the slot a sentence pushed."""
import pytest
import torch

from conftest import TINY_DIMS, TINY_MODEL, build
from memory_nmt.evaluation.memory_attention import AttentionMapError, teacher_forced_carries
from memory_nmt.evaluation.phenomenon_probe import ProbePoint
from memory_nmt.evaluation.queue_pushes import cue_slot_reads, is_queue, pushed_share, pushed_shares


def queue_and_test_split(data_bin):
    """A tiny queue model (eval mode) and the test split it reads."""
    task, queue, _, _ = build(data_bin, *TINY_MODEL, "--memory-update", "queue")
    task.load_dataset("test")
    return queue.eval(), task.dataset("test")


def test_the_share_a_sentence_pushed_is_read_off_the_memory_it_read_and_the_next_one_reads(data_bin):
    """With gates whose shares vary with the sentence, share i is what writing sentence i's own states
    into the memory it read pushes; the encoder's gate held at sigmoid(0.7) and the decoder's at
    sigmoid(-2), every sentence of a document but its last is read as having pushed its layer's share.
    A model whose memory does not push, or pushes into one slot, is refused."""
    queue, dataset = queue_and_test_split(data_bin)
    with torch.no_grad():
        for unit in queue.memory_units().values():
            unit.push_gate.weight.normal_(0.0, 0.2)
    longest = max(range(len(dataset.documents)), key=lambda number: dataset.documents[number].length)
    document = dataset.documents[longest]
    carries = [carry for _, carry in teacher_forced_carries(
        queue, dataset, range(document.first, document.first + document.length))]
    built = pushed_shares(queue, dataset, longest)
    for name, unit in queue.memory_units().items():
        with torch.no_grad():
            own = [pushed_share(carry.memory[name][:, 0],
                                unit.write(carry.memory[name], carry.states[name], carry.padding_mask[name])[:, 0])
                   for carry in carries[:-1]]
        assert built[name] == pytest.approx(own, abs=1e-5) and max(own) - min(own) > 0.01, name
    biases = {"encoder.1": 0.7, "decoder.1": -2.0}
    with torch.no_grad():
        for name, unit in queue.memory_units().items():
            unit.push_gate.weight.zero_()
            unit.push_gate.bias.fill_(biases[name])
    assert is_queue(queue)
    for number in (0, 1):
        shares = pushed_shares(queue, dataset, number)
        assert sorted(shares) == ["decoder.1", "encoder.1"]
        for name, found in shares.items():
            assert len(found) == dataset.documents[number].length - 1 > 0
            assert found == pytest.approx([torch.sigmoid(torch.tensor(biases[name])).item()] * len(found), abs=1e-4)
    _, paper, _, _ = build(data_bin, *TINY_MODEL)
    assert not is_queue(paper)
    with pytest.raises(AttentionMapError, match="decoder.1, encoder.1 do not push"):
        pushed_shares(paper, dataset, 0)
    _, one_slot, _, _ = build(data_bin, "--arch", "transformer_recurrent_memory_small", *TINY_DIMS,
                              "--memory-size", "1", "--memory-update", "queue")
    with pytest.raises(AttentionMapError, match="--memory-size 2 or more"):
        pushed_shares(one_slot.eval(), dataset, 0)


def test_the_read_on_a_cue_sentences_slot_follows_the_slot_back_as_later_sentences_push(data_bin):
    """Every gate held open, each sentence takes the front slot and moves the others back one: what
    sentence 0 pushed is in slot s - 1 of the memory sentence s reads, and the share a point's read at
    its first source (encoder) and target (decoder) token gives that slot is what each layer's Output
    Attention gives it there. A point whose cue is its own sentence is left out; a model whose memory
    does not push is refused."""
    queue, dataset = queue_and_test_split(data_bin)
    with torch.no_grad():
        for unit in queue.memory_units().values():
            unit.push_gate.weight.zero_()
            unit.push_gate.bias.fill_(100.0)
    number = max(range(len(dataset.documents)), key=lambda n: dataset.documents[n].length)
    document = dataset.documents[number]
    assert document.length >= 4
    carries = teacher_forced_carries(queue, dataset, range(document.first, document.first + document.length))
    points, expected = [], {name: [0.0, 0] for name in queue.memory_units()}
    for sentence in (1, 2, 3, 2):
        sample, carry = carries[sentence]
        source, target = sample["net_input"]["src_tokens"][0], sample["target"][0]
        points.append(ProbePoint(number, sentence, dataset.pairs.src_dict[source[0]], dataset.pairs.tgt_dict[target[0]],
                                 "answer", ("title", "2-9"), 0))
        for name, unit in queue.memory_units().items():
            memory = carry.memory[name][:, :1]
            with torch.no_grad():
                _, weights = unit.read_attn(carry.states[name][:1, :1], memory, memory, need_weights=True)
            expected[name][0] += float(weights[0, 0, sentence - 1])
            expected[name][1] += 1
    points.append(ProbePoint(number, 2, points[0].source_token, points[0].target_word, "answer", ("title", "1"), 2))
    found = cue_slot_reads(queue, dataset, points)
    for name, (total, count) in expected.items():
        assert list(found[name]) == [("title", "2-9")]
        assert found[name][("title", "2-9")][1] == count == 4
        assert found[name][("title", "2-9")][0] == pytest.approx(total, abs=1e-6)
    _, paper, _, _ = build(data_bin, *TINY_MODEL)
    with pytest.raises(AttentionMapError, match="do not push"):
        cue_slot_reads(paper, dataset, points)
