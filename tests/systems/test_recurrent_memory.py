"""transformer_recurrent_memory: equal to a plain transformer given its weights; a sentence's
output depends on earlier sentences of its own document and on nothing else."""

from argparse import Namespace

import pytest
import torch
from fairseq.optim.sgd import SGD
from fairseq.sequence_generator import SequenceGenerator

from conftest import TINY_DIMS, TINY_MODEL, batches, build, lane_steps, make_reads_nonzero, refused_option, walk
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt.pipeline.samples import read_sample
from memory_nmt.pipeline.generator import DocumentSequenceGenerator
from memory_nmt.systems.recurrent_memory.memory import GATE_BIAS
from memory_nmt.systems.recurrent_memory.model import memory_layer_indices

PLAIN_MODEL = ["--arch", "transformer", *TINY_DIMS]
PRE_NORM = ["--encoder-normalize-before", "--decoder-normalize-before"]
LAYOUTS = {  # fairseq's transformer-base, NLLB's pre-norm layers, mBART's (with learned positions and embedding norm)
    "post-norm": [],
    "pre-norm": PRE_NORM,
    "mbart": [*PRE_NORM, "--encoder-learned-pos", "--decoder-learned-pos", "--layernorm-embedding"],
}


@pytest.fixture(scope="module", params=LAYOUTS)
def plain_and_memory(data_bin, request):
    layout = LAYOUTS[request.param]
    _, plain, _, _ = build(data_bin, *PLAIN_MODEL, *layout, "--seed", "3", task="translation")
    task, memory_model, _, cfg = build(data_bin, *TINY_MODEL, *layout, "--seed", "4")
    memory_model.load_state_dict(plain.state_dict(), model_cfg=cfg.model)
    return task, plain.eval(), memory_model.eval()


def test_memory_model_with_transformer_weights_is_that_transformer(plain_and_memory):
    """Post-norm or pre-norm, the memory model started from a transformer's weights computes that
    transformer exactly, whatever memory it reads, and translates as it does."""
    task, plain, memory_model = plain_and_memory
    steps = batches(task, "test")
    sample = steps[1]
    src, lengths, prev = (sample["net_input"][k] for k in ("src_tokens", "src_lengths", "prev_output_tokens"))
    with torch.no_grad():
        plain_encoder = plain.encoder(src, src_lengths=lengths)["encoder_out"][0]
        plain_logits, _ = plain(src, lengths, prev)
        some_carry = memory_model.carry_after(
            sample["lanes"],
            memory_model.read_memory(None, src.size(0)),
            *(lambda out: (out[1]["encoding"], out[1]))(memory_model(src, lengths, prev)),
        )
        memory = memory_model.read_memory(some_carry, src.size(0))
        memory_encoder = memory_model.encoder(src, src_lengths=lengths, memory=memory)[0]["encoder_out"][0]
        memory_logits, _ = memory_model(src, lengths, prev, memory=memory)
    assert torch.equal(plain_encoder, memory_encoder)
    assert torch.equal(plain_logits, memory_logits)

    plain_generator = SequenceGenerator([plain], task.target_dictionary, beam_size=3, max_len_b=12)
    document_generator = DocumentSequenceGenerator([memory_model], task.target_dictionary, beam_size=3, max_len_b=12)
    for sample in steps:
        expected = plain_generator.generate([plain], sample)
        got = document_generator.generate([memory_model], sample)
        assert [h[0]["tokens"].tolist() for h in got] == [h[0]["tokens"].tolist() for h in expected]
        assert [h[0]["score"] for h in got] == [h[0]["score"] for h in expected]


def test_a_pre_norm_memory_reads_the_normalised_stream_after_self_attention(data_bin):
    """In a pre-norm layer the memory's own layer norm gives the states it records and reads with
    (in a post-norm layer the block's layer norm does, and the memory has none); once the read
    is not zero, what it adds reaches the output, and every sentence's memory is its document's."""
    _, post_norm, _, _ = build(data_bin, *TINY_MODEL)
    assert not any("read_layer_norm" in name for name, _ in post_norm.named_parameters())
    task, model, _, _ = build(data_bin, *TINY_MODEL, *PRE_NORM)
    layer = model.encoder.layers[-1]
    assert layer.memory.read_layer_norm is not None
    make_reads_nonzero(model)
    with torch.no_grad():
        layer.memory.read_layer_norm.weight.mul_(2.0)
    model.eval()
    normalised = []
    layer.memory.read_layer_norm.register_forward_hook(lambda module, inputs, output: normalised.append(output))
    sample = batches(task, "test")[0]
    with torch.no_grad():
        _, extra = model(**sample["net_input"])
    assert torch.equal(extra["encoding"].records["encoder.1"], normalised[0])
    first = walk(model, batches(task, "test"))
    with torch.no_grad():
        layer.memory.read_attn.out_proj.weight.zero_()
        layer.memory.read_attn.out_proj.bias.zero_()
    assert any(not torch.equal(logits, walk(model, batches(task, "test"))[sentence]) for sentence, logits in first.items())


def test_the_pipelines_teacher_forced_step_is_the_memory_written_out_by_hand(data_bin):
    """``walk`` (the pipeline's teacher-forced step, which training, scoring and the other tests
    run) against the memory model's own parts: each sentence reads the carried memory with the
    previous sentence's states written into it, and carries on that memory and its own states."""
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    make_reads_nonzero(model)
    model.eval()
    steps = batches(task, "test")
    expected, carry = {}, None
    with torch.no_grad():
        for sample in steps:
            lanes = sample["lanes"]
            carried = carry.select(lanes) if carry is not None and sample["position"].step else None
            memory = model.read_memory(carried, lanes.numel())
            logits, extra = model(**sample["net_input"], memory=memory)
            carry = model.carry_after(lanes, memory, extra["encoding"], extra)
            expected.update(zip(sample["id"].tolist(), logits))
    walked = walk(model, steps)
    assert walked.keys() == expected.keys()
    assert all(torch.equal(walked[sentence], expected[sentence]) for sentence in expected)


def test_sentence_depends_on_its_own_document_only(data_bin):
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    make_reads_nonzero(model)
    model.eval()
    group = [s for s in batches(task, "test") if s["position"].group == 0]
    assert len(group) >= 3 and group[0]["lanes"].numel() >= 2
    reference = walk(model, group)

    changed = [dict(s, net_input=dict(s["net_input"])) for s in group]
    first = changed[0]
    row = 0
    victim_lane = int(first["lanes"][row])
    tokens = first["net_input"]["src_tokens"].clone()
    content = tokens[row].ne(task.source_dictionary.pad()) & tokens[row].ne(task.source_dictionary.eos())
    tokens[row, content] = torch.roll(tokens[row, content], 1) + 1
    first["net_input"]["src_tokens"] = tokens
    perturbed = walk(model, changed)

    for sample in group[1:]:
        for row, (sentence, lane) in enumerate(zip(sample["id"].tolist(), sample["lanes"].tolist())):
            difference = (reference[sentence] - perturbed[sentence]).abs().max().item()
            if lane == victim_lane:
                assert difference > 1e-3, f"sentence {sentence} ignores its document's first sentence"
            else:
                assert difference < 1e-5, f"sentence {sentence} changed with another document"


def test_document_start_reads_initial_memory_whatever_came_before(data_bin):
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    make_reads_nonzero(model)
    model.eval()
    steps = batches(task, "test", max_sentences=2)
    later_group = [s for s in steps if s["position"].group == 1]
    assert later_group and steps[0]["position"].group == 0, "need a group decoded after another"
    after_other_groups = walk(model, steps)
    alone = walk(model, later_group)
    assert alone.keys() == {i for s in later_group for i in s["id"].tolist()}
    for sentence, logits in alone.items():
        assert torch.allclose(after_other_groups[sentence], logits, atol=1e-6)


def test_memory_layer_choice(data_bin):
    _, model, _, _ = build(data_bin, *TINY_MODEL, "--memory-layers", "0,-1", "--memory-sides", "decoder")
    assert sorted(model.memory_units()) == ["decoder.0", "decoder.1"]
    assert memory_layer_indices("-1", 6) == [5]
    with pytest.raises(ValueError, match="--memory-layers"):
        memory_layer_indices("6", 6)


@pytest.mark.parametrize("value", ["0", "-1", "4097"])
def test_a_memory_size_out_of_its_range_is_refused_as_the_command_line_is_parsed(data_bin, capsys, value):
    """Not replaced by the default, not an error from deep inside torch."""
    assert refused_option(capsys, data_bin, *TINY_MODEL, "--memory-size", value).endswith(
        f"argument --memory-size: {value}: give 1 to 4096"
    )


def test_memory_layers_the_model_cannot_use_are_refused_by_name(data_bin):
    with pytest.raises(OptionError, match="^--memory-layers '': give"):
        build(data_bin, *TINY_MODEL, "--memory-layers", "")


@pytest.mark.parametrize("option", [["--cross-self-attention"], ["--encoder-layerdrop", "0.1"],
                                    ["--decoder-layerdrop", "0.1"]], ids=lambda option: option[0])
def test_layers_that_would_skip_the_memory_read_or_record_are_refused_by_name(data_bin, option):
    """A dropped layer would neither read the memory nor record the states the update writes, and a
    self-attention over the source too has no place for the read: refused, naming the option."""
    with pytest.raises(OptionError, match=f"does not support {option[0]}: .* leave {option[0]} out"):
        build(data_bin, *TINY_MODEL, *option)


@pytest.mark.parametrize("dropout, activation_dropout", [("0.3", "0"), ("0", "0.5")])
def test_memory_feed_forward_drops_its_inner_activation_at_activation_dropout(data_bin, dropout, activation_dropout):
    """As in fairseq's own feed-forward blocks: --activation-dropout, not --dropout, applies
    between the memory FFN's two projections."""
    _, model, _, _ = build(data_bin, *TINY_MODEL, "--dropout", dropout, "--activation-dropout", activation_dropout)
    unit = model.memory_units()["decoder.1"].train()
    seen = {}
    unit.fc1.register_forward_hook(lambda module, inputs, output: seen.update(activated=torch.relu(output)))
    unit.fc2.register_forward_pre_hook(lambda module, inputs: seen.update(given=inputs[0]))
    unit.write(unit.initial(3), torch.randn(5, 3, unit.initial_memory.size(1)), None)
    dropped = (seen["activated"] != 0) & (seen["given"] == 0)
    if float(activation_dropout):
        assert dropped.any()
    else:
        assert torch.equal(seen["given"], seen["activated"])


def test_a_gated_update_keeps_each_feature_its_gate_closes_and_writes_the_papers_where_it_opens(data_bin):
    """--memory-update gated: M' = g * W(M, h) + (1 - g) * M, W the paper's Update Attention and
    feed-forward block, g a sigmoid per slot and feature; the paper's model (the default) has no
    gate, so its parameters, and its checkpoints, are as before."""
    _, paper, _, _ = build(data_bin, *TINY_MODEL)
    _, gated, _, _ = build(data_bin, *TINY_MODEL, "--memory-update", "gated")
    assert not any("update_gate" in name for name in paper.state_dict())
    assert {name for name in gated.state_dict() if "update_gate" not in name} == set(paper.state_dict())
    unit = gated.memory_units()["decoder.1"].eval()
    assert torch.allclose(unit.update_gate.bias, torch.full_like(unit.update_gate.bias, GATE_BIAS))
    channels = unit.initial_memory.size(1)
    memory, states = torch.randn(4, 3, channels), torch.randn(5, 3, channels)
    with torch.no_grad():
        gate, unit.update_gate = unit.update_gate, None
        written = unit.write(memory, states, None)  # the paper's write, with the same weights
        unit.update_gate = gate
        gate.weight.zero_()
        gate.bias[: channels // 2] = -40.0
        gate.bias[channels // 2:] = 40.0
        kept_and_written = unit.write(memory, states, None)
    assert torch.allclose(kept_and_written[..., : channels // 2], memory[..., : channels // 2])
    assert torch.allclose(kept_and_written[..., channels // 2:], written[..., channels // 2:])
    assert not torch.allclose(written[..., : channels // 2], memory[..., : channels // 2], atol=1e-2)


def test_a_queue_pushes_one_new_slot_a_sentence_in_the_share_its_gate_opens_and_keeps_the_rest_in_order(data_bin):
    """--memory-update queue: a learned query's Update Attention over the sentence gives one new slot,
    pushed in front in the share p of its gate, the others moving one place back in that share:
    closed, the memory is kept exactly; open, it is [new; M[:-1]]; half open, the mean of the two."""
    _, paper, _, _ = build(data_bin, *TINY_MODEL)
    _, queue, _, _ = build(data_bin, *TINY_MODEL, "--memory-update", "queue")
    added = {name for name in queue.state_dict() if name not in paper.state_dict()}
    assert {name.split(".")[-1] for name in added} == {"push_query", "weight", "bias"} and len(added) == 6
    unit = queue.memory_units()["encoder.1"].eval()
    memory = torch.randn(4, 3, unit.initial_memory.size(1))
    states = torch.randn(5, 3, unit.initial_memory.size(1))
    padding = torch.zeros(3, 5, dtype=torch.bool)
    padding[2, 2:] = True
    with torch.no_grad():
        gate, unit.push_gate = unit.push_gate, None
        new = unit.write(memory, states, padding)  # the new slot alone
        unit.push_gate = gate
        gate.weight.zero_()
        written = {}
        for bias in (-100.0, 100.0, 0.0):
            gate.bias.fill_(bias)
            written[bias], weights = unit.write(memory, states, padding, need_weights=True)
    assert new.shape == (1, 3, memory.size(2)) and weights.shape == (3, 1, 5)
    assert torch.all(weights[2, 0, 2:] == 0) and torch.allclose(weights.sum(-1), torch.ones(3, 1))
    assert torch.allclose(written[-100.0], memory)
    pushed = torch.cat([new, memory[:-1]])
    assert torch.allclose(written[100.0], pushed)
    assert torch.allclose(written[0.0], (pushed + memory) / 2, atol=1e-6)
    assert not torch.allclose(new[0], memory[0], atol=1e-2)


def test_a_read_with_slot_positions_keys_the_slots_by_place_and_reads_their_contents(data_bin):
    """--memory-read-positions: the Output Attention's keys are the slots plus the sinusoidal slot
    positions and its values the slots alone, with no parameter added, in training and step by step
    in decoding alike (projected once a sentence into fairseq's cache, whose own projection would
    take the keys as the values: the later steps get no memory); in packed rows each sentence's
    block of slots gets the same positions.
    Slots of equal content are read uniformly without it and by place with it."""
    _, paper, _, _ = build(data_bin, *TINY_MODEL, "--memory-update", "queue")
    _, placed, _, _ = build(data_bin, *TINY_MODEL, "--memory-update", "queue", "--memory-read-positions")
    assert placed.state_dict().keys() == paper.state_dict().keys()
    units = {name: model.memory_units()["decoder.1"].eval() for name, model in (("paper", paper), ("placed", placed))}
    channels = units["paper"].initial_memory.size(1)
    torch.manual_seed(0)
    states, memory = torch.randn(3, 2, channels), torch.randn(4, 2, channels)
    same = torch.randn(1, 2, channels).repeat(4, 1, 1)
    positions = units["placed"].slot_positions
    with torch.no_grad():
        for unit in units.values():
            unit.read_attn.out_proj.weight.copy_(torch.eye(channels))
        reads = {name: unit.read(states, memory) for name, unit in units.items()}
        by_hand = units["paper"].read_attn(states, memory + positions, memory)[0]
        assert torch.allclose(reads["placed"], by_hand, atol=1e-6)
        assert torch.allclose(reads["paper"], units["paper"].read_attn(states, memory, memory)[0], atol=1e-6)
        assert not torch.allclose(reads["placed"], reads["paper"], atol=1e-3)
        for name, unit in units.items():
            state = {}
            steps = [unit.read(states[t:t + 1], memory if t == 0 else None, state) for t in range(3)]
            assert torch.allclose(torch.cat(steps), reads[name], atol=1e-6), name
            weights = unit.read_weights(states, same)
            assert torch.allclose(weights, torch.full_like(weights, 0.25), atol=1e-6) == (name == "paper")
        assert torch.equal(units["placed"].read_keys(torch.cat([memory, memory])), torch.cat([memory + positions] * 2))
        assert torch.equal(units["paper"].read_keys(memory), memory)


def test_an_addressed_write_replaces_the_slot_its_address_points_to_and_keeps_the_others(data_bin):
    """--memory-update addressed: the queue's new slot replaces each slot in its share of a softmax
    over the slots and a null option. Slot 1 is the one not worth keeping (its retain score is far
    below the others'): it becomes the new slot and slots 0, 2, 3 are kept exactly; with every slot
    worth keeping the null option wins and nothing is written; with the retain scores equal and
    slot 2's key matching the new slot's query, slot 2 is the one replaced."""
    _, paper, _, _ = build(data_bin, *TINY_MODEL)
    _, addressed, _, _ = build(data_bin, *TINY_MODEL, "--memory-update", "addressed")
    added = {name for name in addressed.state_dict() if name not in paper.state_dict()}
    assert {name.split(".memory.")[-1] for name in added} == {
        "push_query", "address_query.weight", "address_query.bias", "address_key.weight", "address_key.bias",
        "retain.weight", "retain.bias"}
    unit = addressed.memory_units()["decoder.1"].eval()
    channels = unit.initial_memory.size(1)
    memory, states = torch.randn(4, 3, channels), torch.randn(5, 3, channels)
    memory[..., 0] = 1.0
    memory[1, :, 0] = -1.0
    with torch.no_grad():
        address_query, unit.address_query = unit.address_query, None
        new = unit.write(memory, states, None)  # the new slot alone
        unit.address_query = address_query
        address_query.weight.zero_()
        address_query.bias.zero_()
        unit.retain.weight.zero_()
        unit.retain.weight[0, 0] = 100.0
        unit.retain.bias.zero_()
        one_replaced = unit.write(memory, states, None)
        unit.retain.bias.fill_(200.0)
        nothing = unit.write(memory, states, None)
        unit.retain.weight.zero_()
        unit.retain.bias.zero_()
        address_query.bias.fill_(1.0)
        unit.address_key.weight.zero_()
        unit.address_key.bias.zero_()
        unit.address_key.weight[:, 1] = 100.0  # a slot's key follows its feature 1
        keyed = memory.clone()
        keyed[:, :, 1] = -1.0
        keyed[2, :, 1] = 1.0
        matched = unit.write(keyed, states, None)
    assert new.shape == (1, 3, channels)
    assert torch.allclose(one_replaced[1], new[0]) and torch.allclose(one_replaced[[0, 2, 3]], memory[[0, 2, 3]])
    assert torch.allclose(nothing, memory)
    assert torch.allclose(matched[2], new[0]) and torch.allclose(matched[[0, 1, 3]], keyed[[0, 1, 3]])


def _charged_model(data_bin, update, rate, *options):
    """A model whose writes' shares are set (``test_a_write_cost_charges...``): its task, model,
    criterion, the share a sentence writes into each layer and the share's derivative by the
    parameter named last."""
    task, model, criterion, _ = build(data_bin, *TINY_MODEL, "--memory-update", update, "--memory-write-cost",
                                      "0.5", "--memory-write-rate", str(rate), "--optimization-window", "3", *options)
    with torch.no_grad():
        for unit in model.memory_units().values():
            if update == "queue":
                unit.push_gate.weight.zero_()
                unit.push_gate.bias.fill_(0.5)
            else:
                for linear in (unit.address_query, unit.retain):
                    linear.weight.zero_()
                    linear.bias.zero_()
    if update == "queue":
        share = torch.sigmoid(torch.tensor(0.5)).item()
        return task, model, criterion, share, share * (1 - share), "push_gate"
    return task, model, criterion, 4 / 5, -4 / 25, "retain"  # d/db of 4e^-b / (4e^-b + 1) at b = 0


def _continuing_rows(steps):
    """Rows of ``steps`` whose sentence continues a document (whose lane wrote a sentence before)."""
    return sum(0 if step["position"].step == 0 else
               int(step["continues"].sum()) if "continues" in step else step["lanes"].numel() for step in steps)


def _first_window(task):
    """The first training window of 3 sentence steps or more that starts its documents."""
    return next(item for item in batches(task, "train", max_tokens=60)
                if len(item["steps"]) >= 3 and item["steps"][0]["position"].step == 0)


@pytest.mark.parametrize("update, rate", [("queue", 0.0), ("addressed", 0.0), ("queue", 0.5), ("addressed", 0.9)])
def test_a_write_cost_charges_each_continuing_sentence_the_share_of_a_new_slot_it_wrote(data_bin, update, rate):
    """--memory-write-cost c: in training a step's loss gains c times how far the share of a new slot
    that its rows' previous sentences wrote into each memory layer is from --memory-write-rate r a
    row, either way (nothing where a row starts its document, nothing in evaluation). The shares are
    set: the queue's gate a constant sigmoid(0.5) = 0.62; the addressed write's scores all 0 like the
    null option's, so 4 of the 5 shares of a memory of 4 go to the slots: 0.8, below the rate of 0.9,
    which the cost then pushes up. The reads start at zero, so the token losses give the write no
    gradient: what its parameter gets is the cost's, c times the share's derivative a row, its sign
    that of the share's distance from the rate."""
    task, model, criterion, share, derivative, parameter = _charged_model(data_bin, update, rate)
    cost, units = model.args.memory_write_cost, model.memory_units()
    window = _first_window(task)["steps"]
    continuing = _continuing_rows(window)
    assert continuing > 0
    model.train()
    losses = {}
    for charged in (0.0, cost):
        model.args.memory_write_cost = charged
        model.zero_grad()
        criterion.carries = type(criterion.carries)()
        losses[charged], _, log = criterion.forward_window(model, lane_steps(window), backward=lambda loss: loss.backward())
    direction = 1.0 if share > rate else -1.0
    expected = cost * abs(share - rate) * continuing * len(units)
    assert log["context_cost"].item() == pytest.approx(expected, rel=1e-5)
    assert (losses[cost] - losses[0.0]).item() == pytest.approx(expected, rel=1e-4)
    for unit in units.values():
        assert getattr(unit, parameter).bias.grad.item() == pytest.approx(direction * cost * derivative * continuing, rel=1e-4)
    criterion.carries = type(criterion.carries)()
    _, _, first_step = criterion.forward_window(model, lane_steps(window[:1]))
    assert first_step["context_cost"].item() == 0.0, "logged, as 0, where no sentence was written"
    model.eval()
    criterion.carries = type(criterion.carries)()
    with torch.no_grad():
        _, _, evaluated = criterion.forward_window(model, lane_steps(window))
    assert "context_cost" not in evaluated


def test_a_write_cost_is_not_charged_again_for_the_steps_a_window_recomputes(data_bin):
    """With --gradient-across-windows recompute, a window runs the window before's last step again
    first: its writes were charged in that window, and the second window is charged for its own."""
    task, model, criterion, share, _, _ = _charged_model(data_bin, "queue", 0.0, "--gradient-across-windows", "recompute")
    items = batches(task, "train", max_tokens=60)
    first, second = next((a, b) for a, b in zip(items, items[1:])
                         if a["steps"][0]["position"].step == 0 and b["steps"][0]["position"].group
                         == a["steps"][0]["position"].group and _continuing_rows(b["steps"]))
    model.train()
    for window in (first, second):
        _, _, log = criterion.train_on(model, read_sample(window), backward=lambda loss: loss.backward())
        expected = model.args.memory_write_cost * share * _continuing_rows(window["steps"]) * len(model.memory_units())
        assert log["context_cost"].item() == pytest.approx(expected, rel=1e-5)


def test_a_write_cost_from_an_update_on_charges_nothing_before_it(data_bin):
    """--memory-write-cost-from-update n: the updates before n (fairseq's count of updates done, which
    the task's train_step gives the model) train without the cost (logged as 0, the gate given no
    gradient, the reads starting at zero); from update n on, as from the first."""
    task, model, criterion, share, _, _ = _charged_model(data_bin, "queue", 0.0, "--memory-write-cost-from-update", "2")
    item = _first_window(task)
    expected = model.args.memory_write_cost * share * _continuing_rows(item["steps"]) * len(model.memory_units())
    optimizer = SGD(Namespace(lr=[0.0], momentum=0.0, weight_decay=0.0), model.parameters())
    for update, charged in ((0, 0.0), (1, 0.0), (2, expected), (5, expected)):
        model.zero_grad()
        criterion.carries = type(criterion.carries)()
        _, _, log = task.train_step(item, model, criterion, optimizer, update)
        assert log["context_cost"].item() == pytest.approx(charged, rel=1e-5), update
        gate_gradients = [unit.push_gate.bias.grad for unit in model.memory_units().values()]
        assert all((g is not None and g.abs().item() > 0) == bool(charged) for g in gate_gradients), update


def test_a_write_cost_is_refused_for_an_update_without_a_new_slot_and_a_rate_or_start_without_a_cost(data_bin):
    with pytest.raises(OptionError, match="^--memory-write-cost 1.0 with --memory-update gated: the cost is on the share of a new slot"):
        build(data_bin, *TINY_MODEL, "--memory-update", "gated", "--memory-write-cost", "1")
    with pytest.raises(OptionError, match="^--memory-write-rate 0.1 without --memory-write-cost: the rate is"):
        build(data_bin, *TINY_MODEL, "--memory-update", "queue", "--memory-write-rate", "0.1")
    with pytest.raises(OptionError, match="^--memory-write-cost-from-update 300 without --memory-write-cost: it says"):
        build(data_bin, *TINY_MODEL, "--memory-update", "queue", "--memory-write-cost-from-update", "300")


def test_competing_slots_keep_a_slot_no_token_chooses_and_rewrite_the_one_every_token_chooses(data_bin):
    """--memory-update competitive: each token's attention is a softmax over the slots and a null
    query; a slot is rewritten in the share of a token it receives. Slot 0's query matches every
    token's key and the other slots' do not: slot 0 is rewritten with the mean of the tokens'
    values (the paper's write, whose attention over the tokens is uniform here), and slots 1-3
    are kept exactly, padded tokens aside; with the null query matching, nothing is written."""
    _, paper, _, _ = build(data_bin, *TINY_MODEL)
    _, competing, _, _ = build(data_bin, *TINY_MODEL, "--memory-update", "competitive")
    assert {name for name in competing.state_dict() if "null_query" not in name} == set(paper.state_dict())
    unit = competing.memory_units()["decoder.1"].eval()
    channels = unit.initial_memory.size(1)
    memory = torch.randn(4, 3, channels) * 0.1
    memory[0] += 10.0
    memory[1:] -= 10.0
    states = torch.randn(5, 3, channels)
    padding = torch.zeros(3, 5, dtype=torch.bool)
    padding[1, 3:] = True
    attention = unit.update_attn
    with torch.no_grad():
        attention.q_proj.weight.copy_(torch.eye(channels))
        attention.q_proj.bias.zero_()
        attention.k_proj.weight.zero_()
        attention.k_proj.bias.fill_(10.0)
        written, shares = unit.write(memory, states, padding, need_weights=True)
        null_query, unit.null_query = unit.null_query, None  # the paper's write: uniform over the tokens here
        papers = unit.write(memory, states, padding)
        unit.null_query = null_query
        null_query.fill_(100.0)
        nothing = unit.write(memory, states, padding)
    assert torch.allclose(written[1:], memory[1:]) and torch.allclose(written[0], papers[0], atol=1e-5)
    assert torch.allclose(shares[:, 0], (~padding).float()) and torch.all(shares[:, 1:] < 1e-6)
    assert torch.allclose(nothing, memory)
