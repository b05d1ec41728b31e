"""Sentences packed several to a row (``memory_nmt/pipeline/packing.py``, ``packed_attention.py``):
the layout of a packed batch, and that a packed sentence neither reads nor sends gradient into the
other sentences of its row, for the recurrent memory model (which reads each sentence's own lane's
memory) and fairseq's transformer. That packed steps train as the same sentences one a row do is
in test_criterion.py (loss, gradients and carry)."""
import logging

import pytest
import torch

from conftest import TINY_DIMS, TINY_MODEL, batches, build, make_reads_nonzero
from memory_nmt.pipeline.carry import CarryStore
from memory_nmt.pipeline.packed_attention import why_not_confinable
from memory_nmt.pipeline.packing import PackedRows, collate_packed
from memory_nmt.pipeline.teacher_forcing import teacher_forced_step

SENTENCE = ["--arch", "transformer", *TINY_DIMS, "--training-batches", "lanes"]  # fairseq's, in lanes


def test_a_packed_batch_lays_each_sentence_in_its_row_with_positions_restarting():
    pad, eos = 1, 2
    sources = [torch.tensor([7, 8, eos]), torch.tensor([9, eos]), torch.tensor([5, 6, 4, eos])]
    targets = [torch.tensor([17, eos]), torch.tensor([19, 18, eos]), torch.tensor([15, eos])]
    net_input, target, rows = collate_packed(sources, targets, [[0, 1], [2]], pad, eos)
    assert net_input["src_tokens"].tolist() == [[7, 8, eos, 9, eos], [5, 6, 4, eos, pad]]
    assert net_input["src_lengths"].tolist() == [5, 4]
    assert target.tolist() == [[17, eos, 19, 18, eos], [15, eos, pad, pad, pad]]
    assert net_input["prev_output_tokens"].tolist() == [[eos, 17, eos, 19, 18], [eos, 15, pad, pad, pad]]
    assert rows.source_positions.tolist() == [[2, 3, 4, 2, 3], [2, 3, 4, 5, pad]]
    assert rows.target_positions.tolist() == [[2, 3, 2, 3, 4], [2, 3, pad, pad, pad]]
    assert rows.source_sentence.tolist() == [[0, 0, 0, 1, 1], [2, 2, 2, 2, 2]], "padding: its row's last sentence"
    assert rows.sentence_row.tolist() == [0, 0, 1] and rows.target_start.tolist() == [0, 2, 0]
    states = torch.arange(10.0).view(5, 2, 1)  # columns x rows x C
    unpacked, padding = rows.unpack(states, "source")
    assert unpacked[:, :, 0].t().tolist() == [[0, 2, 4, 0], [6, 8, 0, 0], [1, 3, 5, 7]]
    assert padding.tolist() == [[False] * 3 + [True], [False] * 2 + [True] * 2, [False] * 4]


def packed_pass(task):
    """A collated packed pass of a group's second step, one of its rows holding several sentences,
    and the collated steps of its group before it."""
    batches(task, "train", max_tokens=200)
    plan = task.training_plan.items
    steps = [step for item in plan.items if item for step in item]
    step = next(s for s in steps if s.position.step > 0 and any(len(row) > 1 for rows in s.packed for row in rows))
    return step.collate(plan.dataset), plan.samples_before(step.position)


def run(model, sample, carry):
    rows = PackedRows(**sample["packed_rows"])
    carry_in = carry.select(sample["lanes"]) if carry is not None else None
    step = teacher_forced_step(model, carry_in, sample["lanes"], sample["net_input"], sample["target"],
                               continues=sample["continues"], packed_rows=rows)
    logits = step.net_output[0]
    start, length, _ = rows.side("target")
    return {
        sentence: logits[rows.sentence_row[i], start[i]:start[i] + length[i]]
        for i, sentence in enumerate(sample["id"].tolist())
    }


def carry_before(model, samples):
    carries = CarryStore()
    with torch.no_grad():
        for sample in samples:
            carry = carries.get(sample["position"])
            carry_in = carry.select(sample["lanes"]) if carry is not None else None
            out = teacher_forced_step(model, carry_in, sample["lanes"], sample["net_input"], sample["target"],
                                      continues=sample["continues"], packed_rows=PackedRows(**sample["packed_rows"]))
            carries.keep(sample["position"], out.carry)
    return carries.get(sample["position"].__class__(sample["position"].stream, sample["position"].group,
                                                     sample["position"].step + 1, False))


def sharing(sample):
    """(row, sentence): a row of several sentences, and one of them that goes on with its document."""
    rows = PackedRows(**sample["packed_rows"])
    for row, sentences in enumerate(rows.row_sentences.tolist()):
        present = [i for i in sentences if i >= 0]
        going_on = [i for i in present if sample["continues"][i]]
        if len(present) > 1 and going_on:
            return row, going_on[0]
    raise AssertionError("no row of several sentences in the tiny corpus")


def words_rolled(sample, index):
    """The packed sample with the words of its ``index``-th sentence's source rolled by one."""
    rows = PackedRows(**sample["packed_rows"])
    tokens = sample["net_input"]["src_tokens"].clone()
    row, start, length = int(rows.sentence_row[index]), int(rows.source_start[index]), int(rows.source_length[index])
    tokens[row, start:start + length - 1] = tokens[row, start:start + length - 1].roll(1)  # eos stays
    return dict(sample, net_input=dict(sample["net_input"], src_tokens=tokens))


@pytest.mark.parametrize("arch", [TINY_MODEL, SENTENCE], ids=["memory", "transformer"])
def test_a_packed_sentence_reads_nothing_of_the_other_sentences_of_its_row(data_bin, arch):
    """Changing one sentence of a packed row (its source words, or for the memory model the memory
    its lane carried in) changes that sentence's output and no other's."""
    task, model, _, _ = build(data_bin, *arch)
    if arch is TINY_MODEL:
        make_reads_nonzero(model)
    model.eval()
    sample, earlier = packed_pass(task)
    carry = carry_before(model, earlier) if arch is TINY_MODEL else None
    _, victim = sharing(sample)
    ids = sample["id"].tolist()
    with torch.no_grad():
        reference = run(model, sample, carry)
        changes = [run(model, words_rolled(sample, victim), carry)]
        if carry is not None:  # another memory for the victim's lane only
            other = carry.select(carry.lanes)
            lane_row = carry.lanes.tolist().index(int(sample["lanes"][victim]))
            for name in other.memory:
                other.memory[name] = other.memory[name].clone()
                other.memory[name][:, lane_row] += 1.0
                other.states[name] = other.states[name].clone()
                other.states[name][:, lane_row] += 1.0
            changes.append(run(model, sample, other))
    for changed in changes:
        assert not torch.allclose(changed[ids[victim]], reference[ids[victim]], atol=1e-4), "the test can tell"
        for i, sentence in enumerate(ids):
            if i != victim:
                assert torch.allclose(changed[sentence], reference[sentence], atol=1e-6), (i, sentence)


@pytest.mark.parametrize("arch", [TINY_MODEL, SENTENCE], ids=["memory", "transformer"])
def test_the_loss_of_one_packed_sentence_sends_no_gradient_into_the_others_of_its_row(data_bin, arch):
    task, model, _, _ = build(data_bin, *arch)
    if arch is TINY_MODEL:
        make_reads_nonzero(model)
    model.train()
    sample, _ = packed_pass(task)
    rows = PackedRows(**sample["packed_rows"])
    shared, victim = sharing(sample)
    embedded = []

    def retain(module, inputs, output):
        output.retain_grad()
        embedded.append(output)

    handle = model.encoder.embed_tokens.register_forward_hook(retain)
    try:
        outputs = run(model, dict(sample, continues=torch.zeros_like(sample["continues"])), None)
    finally:
        handle.remove()
    outputs[sample["id"].tolist()[victim]].sum().backward()
    grad = embedded[0].grad[shared].abs().sum(-1)  # per source column of the victim's row
    owner = rows.source_sentence[shared]
    real = sample["net_input"]["src_tokens"][shared].ne(task.source_dictionary.pad())
    assert grad[(owner == victim) & real].sum() > 0
    assert grad[(owner != victim) & real].sum() == 0


def test_layers_fairseq_recomputes_keep_one_sentence_a_row(data_bin, caplog):
    """fairseq's --checkpoint-activations recomputes a layer through its forward, which a packed pass
    (computing the layer block by block, with the masks) does not call: such a model trains one sentence
    a row, and says so. The memory model's passes recompute each layer's call, masks included, and pack."""
    caplog.set_level(logging.INFO, logger="memory_nmt.pipeline.task")
    task, _, _, _ = build(data_bin, *SENTENCE, "--checkpoint-activations")
    assert ("one sentence a row (its encoder's layers are recomputed in the backward pass by fairseq's "
            "--checkpoint-activations, through the forward a packed pass does not call)") in caplog.text
    assert task.regime.training.packed_width is None
    memory, _, _, _ = build(data_bin, *TINY_MODEL, "--checkpoint-activations")
    assert memory.regime.training.packed_width is not None


def test_a_transformer_whose_passes_are_not_fairseqs_keeps_one_sentence_a_row(data_bin, caplog):
    """A packed pass computes fairseq's encoder, decoder and layers in its own words: a model that reads
    the source in its decoder's self-attention (--cross-self-attention), or whose layers compute their
    own forward, trains one sentence a row, and says why."""
    caplog.set_level(logging.INFO, logger="memory_nmt.pipeline.task")
    task, _, _, _ = build(data_bin, *SENTENCE, "--cross-self-attention")
    assert "one sentence a row (its decoder's self-attention reads the source (--cross-self-attention))" in caplog.text
    assert task.regime.training.packed_width is None
    _, model, _, _ = build(data_bin, *SENTENCE)
    assert why_not_confinable(model) is None

    for module, method, reason in [
        (model.decoder, "extract_features_scriptable", "its decoder computes its own extract_features_scriptable"),
        (model.encoder, "forward_embedding", "its encoder computes its own forward_embedding"),
        (model.encoder.layers[0], "forward", "its encoder's layers compute their own forward"),
        (model, "forward", "Own computes its own forward"),
    ]:
        fairseqs = type(module)  # made, for the check, a subclass that computes its own ``method``
        module.__class__ = type("Own", (fairseqs,), {method: lambda self, *args, **kwargs: None})
        assert why_not_confinable(model) == reason
        module.__class__ = fairseqs
