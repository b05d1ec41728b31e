"""Training through the criterion: memory carried across steps and windows; the gradient across
sentences of each contract (--gradient-reach window: every earlier sentence of the window, one
backward pass; K: exactly K sentences back, 1 being "back-propagated to the current and most
recent sentences"), within a window or across windows; and steps in several forward passes
training as one batch."""
import dataclasses
import logging

import pytest
import torch

from conftest import AMN, CONCAT, TINY_DIMS, TINY_MODEL, batches, build, lane_steps, make_reads_nonzero, only_pass, refused_option
from memory_nmt.pipeline.carry import CarryOrderError, CarryStore
from memory_nmt.pipeline.lane_steps import PackedStep, RefilledStep
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt.pipeline.packing import PackedRows


def _window_of_three(task):
    windows = [item["steps"] for item in batches(task, "train", max_tokens=60)]
    return next(w for w in windows if len(w) >= 3 and w[2]["lanes"].numel() >= 1)[:3]


@pytest.fixture
def trained_looking(data_bin):
    task, model, criterion, _ = build(data_bin, *TINY_MODEL, "--optimization-window", "3", "--gradient-reach", "1")
    make_reads_nonzero(model)
    model.train()
    return task, model, criterion


def test_loss_reaches_previous_sentence_never_the_one_before(trained_looking):
    task, model, criterion = trained_looking
    windows = [item["steps"] for item in batches(task, "train", max_tokens=60)]
    steps = next(  # three steps of the same documents: no lane starts its next one (lanes refill)
        w for w in windows if len(w) >= 3 and all(bool(s["continues"].all()) for s in w[1:3])
    )[:3]
    pad = task.target_dictionary.pad()
    steps = [dict(s, target=torch.full_like(s["target"], pad)) for s in steps[:2]] + [steps[2]]

    embeddings = []  # encoder and decoder embedding outputs, in call order: enc0 dec0 enc1 dec1 ...

    def keep(module, inputs, output):
        output.retain_grad()
        embeddings.append(output)

    handle = model.encoder.embed_tokens.register_forward_hook(keep)
    try:
        criterion.forward_window(model, lane_steps(steps), backward=lambda loss: loss.backward())
    finally:
        handle.remove()
    assert len(embeddings) == 6
    reached = [e.grad is not None and e.grad.abs().sum().item() > 0 for e in embeddings]
    assert reached[4] and reached[5], "sentence t's loss must reach its own tokens"
    assert reached[2] and reached[3], "sentence t's loss must reach sentence t-1 (both sides)"
    assert not reached[0] and not reached[1], "sentence t's loss must not reach sentence t-2"

    decoder_unit = model.memory_units()["decoder.1"]
    assert decoder_unit.update_attn.q_proj.weight.grad.abs().sum() > 0
    assert decoder_unit.initial_memory.grad is None or decoder_unit.initial_memory.grad.abs().sum() == 0


@pytest.mark.parametrize("loss_scale", [1.0, 1024.0])
def test_window_gradient_equals_loss_by_loss_truncated_gradient(trained_looking, loss_scale):
    """Reference: for each sentence t, rebuild the graph of sentences t-1 and t from the carry
    before t-1 (detached), and back-propagate loss t alone. The criterion does it in one pass,
    also when ``backward`` scales the loss as fairseq's fp16 optimizers do."""
    task, model, criterion = trained_looking
    steps = _window_of_three(task)

    criterion.forward_window(
        model, lane_steps(steps), backward=lambda loss: (loss * loss_scale).backward(), loss_scale=loss_scale
    )
    got = {n: p.grad.clone() / loss_scale for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()

    carries = [None]  # carries[t] = detached carry before step t
    with torch.no_grad():
        for sample in steps:
            carry = carries[-1].select(sample["lanes"]) if carries[-1] is not None else None
            carries.append(criterion.forward_step(model, only_pass(sample), carry)[3].detach())
    for t, sample in enumerate(steps):
        if t == 0:
            loss = criterion.forward_step(model, only_pass(sample), None)[0]
        else:
            before = carries[t - 1].select(steps[t - 1]["lanes"]) if carries[t - 1] is not None else None
            previous_carry = criterion.forward_step(model, only_pass(steps[t - 1]), before)[3]
            loss = criterion.forward_step(model, only_pass(sample), previous_carry.select(sample["lanes"]))[0]
        loss.backward()
    expected = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.allclose(got[name], expected[name], atol=1e-5, rtol=1e-4), name


def _group_of_three_windows(task):
    """The first three windows of a group that has three, in training order."""
    windows = [item["steps"] for item in batches(task, "train", max_tokens=60)]
    for first in range(len(windows) - 2):
        if windows[first][0]["position"].step == 0 and len({w[0]["position"].group for w in windows[first:first + 3]}) == 1:
            return windows[first:first + 3]
    raise AssertionError("no group of three windows in the tiny corpus")


def _assert_each_window_gives(criterion, model, windows, expected):
    """Each window trained by the criterion (no optimizer step) gives the gradients ``expected``."""
    for number, window in enumerate(windows):
        model.zero_grad()
        criterion.forward_window(model, lane_steps(window), backward=lambda loss: loss.backward())
        got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        assert got.keys() == expected[number].keys()
        for name in got:
            assert torch.allclose(got[name], expected[number][name], atol=1e-5, rtol=1e-4), (number, name)


def _carries_before_each_step(criterion, model, steps):
    """[None, the detached carry after step 0, after step 1, ...]: element t is what step t reads."""
    carries = [None]
    with torch.no_grad():
        for sample in steps:
            carry = carries[-1].select(sample["lanes"]) if carries[-1] is not None else None
            carries.append(criterion.forward_step(model, only_pass(sample), carry)[3].detach())
    return carries


def _loss_by_loss_gradients(criterion, model, windows, reach, recompute):
    """Reference, per window: the sum over its sentences t of the gradient of loss t alone,
    through a graph rebuilt from the (detached) carry before sentence t−reach, or before the
    window's first sentence if that is later and the gradient is not recomputed across windows."""
    steps = [step for window in windows for step in window]
    carries = _carries_before_each_step(criterion, model, steps)
    gradients, begin = [], 0
    for window in windows:
        model.zero_grad()
        for t in range(begin, begin + len(window)):
            first = max(t - reach, 0 if recompute else begin)
            carry = carries[first]
            for sample in steps[first:t + 1]:
                loss, _, _, carry = criterion.forward_step(
                    model, only_pass(sample), carry.select(sample["lanes"]) if carry is not None else None
                )
            loss.backward()
        gradients.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        begin += len(window)
    return gradients


@pytest.mark.parametrize("across", ["recompute", "drop"])
@pytest.mark.parametrize("reach", [0, 1, 2, 3])
def test_each_window_gets_the_gradient_of_its_losses_reaching_k_sentences_back(data_bin, reach, across):
    """--gradient-reach K: every update holds the gradient of its window's losses, each through
    the K sentences before it (recomputed from the windows before with ``recompute``, cut at
    the window's start with ``drop``), and nothing else; with the same weights in every window
    (no optimizer step), it equals the loss-by-loss reference."""
    task, model, criterion, _ = build(
        data_bin, *TINY_MODEL, "--optimization-window", "2",
        "--gradient-reach", str(reach), "--gradient-across-windows", across,
    )
    make_reads_nonzero(model)
    model.train()
    windows = _group_of_three_windows(task)
    expected = _loss_by_loss_gradients(criterion, model, windows, reach, across == "recompute")
    _assert_each_window_gives(criterion, model, windows, expected)


TOP_LAYER, BOTH_LAYERS = "-1", "0,1"


@pytest.mark.parametrize("across, window, reach, layers, reached", [
    ("recompute", "2", 1, TOP_LAYER, {(1, 0), (2, 1), (3, 2)}),
    ("drop", "2", 1, TOP_LAYER, {(1, 0), (3, 2)}),
    ("recompute", "2", 2, TOP_LAYER, {(1, 0), (2, 1), (2, 0), (3, 2), (3, 1)}),
    ("drop", "2", 2, TOP_LAYER, {(1, 0), (3, 2)}),
    ("recompute", "1", 1, TOP_LAYER, {(1, 0), (2, 1), (3, 2)}),
    ("drop", "1", 0, TOP_LAYER, set()),
    ("recompute", "2", "window", TOP_LAYER, {(1, 0), (2, 1), (3, 2), (3, 1)}),
    ("drop", "2", "window", TOP_LAYER, {(1, 0), (3, 2)}),
    ("recompute", "3", "window", TOP_LAYER, {(1, 0), (2, 1), (2, 0), (3, 2)}),
    ("recompute", "1", "window", TOP_LAYER, {(1, 0), (2, 1), (3, 2)}),
    # The states a layer records are read before its own memory, so with the memory in the top
    # layer a gradient goes two sentences back at most: t-1 through its states, t-2 through the
    # encoder output that t-1's decoder states attended to. More memory layers, longer chains.
    ("recompute", "4", "window", TOP_LAYER, {(1, 0), (2, 1), (2, 0), (3, 2), (3, 1)}),
    ("recompute", "4", "window", BOTH_LAYERS, {(1, 0), (2, 1), (2, 0), (3, 2), (3, 1), (3, 0)}),
    ("recompute", "4", 2, BOTH_LAYERS, {(1, 0), (2, 1), (2, 0), (3, 2), (3, 1)}),
])
def test_which_sentence_pairs_get_the_cross_sentence_gradient(data_bin, across, window, reach, layers, reached):
    """Over a group's first four sentences, walked window by window as training does: which
    earlier sentence s the loss of sentence t reaches (the gradient at s's token embeddings,
    in whichever forward pass of s it flows through, recomputed or not), for each t."""
    assert _reached_pairs(data_bin, "--optimization-window", window, "--memory-layers", layers,
                          "--gradient-reach", str(reach), "--gradient-across-windows", across) == reached


@pytest.mark.parametrize("across, window, reached", [
    ("drop", "4", {(1, 0), (2, 1), (2, 0), (3, 2), (3, 1), (3, 0)}),
    ("drop", "2", {(1, 0), (3, 2)}),
    ("recompute", "2", {(1, 0), (2, 1), (3, 2), (3, 1)}),
])
def test_a_memory_attached_within_the_window_carries_every_loss_to_every_earlier_write_of_it(
        data_bin, across, window, reached):
    """--memory-gradient window: sentence t's loss reaches every earlier sentence of its window
    through the memory (the paper's stopped memory reaches two back in a window of 4: the cases
    above), and nothing before the window but what ``recompute`` runs again (the window before's
    last step, whose own memory input is detached)."""
    assert _reached_pairs(data_bin, "--optimization-window", window, "--memory-gradient", "window",
                          "--gradient-across-windows", across) == reached


def test_a_memory_attached_across_steps_is_refused_with_a_reach_of_k(data_bin):
    with pytest.raises(ValueError, match="--memory-gradient window with --gradient-reach 1: a reach of K sentences"):
        build(data_bin, *TINY_MODEL, "--memory-gradient", "window", "--gradient-reach", "1")


def _reached_pairs(data_bin, *options):
    """The (t, s) of a group's first four sentences such that sentence t's loss reaches s."""
    task, model, criterion, _ = build(data_bin, *TINY_MODEL, *options)
    make_reads_nonzero(model)
    model.train()
    windows = [item["steps"] for item in batches(task, "train", max_tokens=60)]
    group = next(w[0]["position"].group for w in windows if w[-1]["position"].step >= 3)
    walk = [w for w in windows if w[0]["position"].group == group and w[0]["position"].step <= 3]
    pad = task.target_dictionary.pad()
    embeddings = []  # (step, embedding output), encoder and decoder, in call order

    run_model = criterion.run_model  # every forward pass of a step, counted or recomputed

    def tagged(model, rows, carry, **options):
        def keep(module, inputs, output):
            output.retain_grad()
            embeddings.append((rows.batch["position"].step, output))

        handle = model.encoder.embed_tokens.register_forward_hook(keep)
        try:
            return run_model(model, rows, carry, **options)
        finally:
            handle.remove()

    criterion.run_model = tagged
    got = set()
    for t in range(4):
        embeddings.clear()
        criterion.carries = CarryStore()
        for steps in walk:
            steps = [s if s["position"].step == t else dict(s, target=torch.full_like(s["target"], pad)) for s in steps]
            criterion.forward_window(model, lane_steps(steps), backward=lambda loss: loss.backward())
        got |= {
            (t, step) for step, output in embeddings
            if step != t and output.grad is not None and output.grad.abs().sum() > 0
        }
    return got


def _window_reference_gradients(criterion, model, windows, recompute):
    """Reference, per window, unrolled by hand: the window's steps run one after the other from the
    (detached) carry before its first step, or before the step before it with ``recompute`` (run
    again, its loss not counted), each step reading the states of the one before as they are
    (nothing detached but what the model detaches itself: the memory, unless --memory-gradient
    window); the sum of the window's
    losses back-propagated once."""
    steps = [step for window in windows for step in window]
    carries = _carries_before_each_step(criterion, model, steps)
    gradients, begin = [], 0
    for window in windows:
        model.zero_grad()
        first = begin - 1 if recompute and begin > 0 else begin
        carry, total = carries[first], 0.0
        for t in range(first, begin + len(window)):
            loss, _, _, carry = criterion.forward_step(
                model, only_pass(steps[t]), carry.select(steps[t]["lanes"]) if carry is not None else None
            )
            if t >= begin:
                total = total + loss
        total.backward()
        gradients.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        begin += len(window)
    return gradients


@pytest.mark.parametrize("memory", [[], ["--memory-gradient", "window"]], ids=["memory stopped", "memory attached"])
@pytest.mark.parametrize("across", ["recompute", "drop"])
@pytest.mark.parametrize("cap", [None, 1], ids=["all kept", "steps recomputed in backward"])
def test_window_backprop_sums_the_windows_losses_through_its_attached_chain(data_bin, across, cap, memory):
    """--gradient-reach window: each update holds the gradient of the sum of its window's losses,
    back-propagated through the chain of the window's steps (and, with ``recompute``, the step
    before the window run again), and nothing before it; --max-graph-tokens, which has the
    steps beyond it run forward again in the backward pass, changes no gradient."""
    cap_args = [] if cap is None else ["--max-graph-tokens", str(cap)]
    task, model, criterion, _ = build(
        data_bin, *TINY_MODEL, "--optimization-window", "2", "--gradient-reach", "window",
        "--gradient-across-windows", across, *cap_args, *memory,
    )
    make_reads_nonzero(model)
    model.train()
    windows = _group_of_three_windows(task)
    expected = _window_reference_gradients(criterion, model, windows, across == "recompute")
    _assert_each_window_gives(criterion, model, windows, expected)


def test_window_backprop_calls_backward_once_per_window(data_bin):
    """The point of the window contract: one backward pass per window, however many steps, where
    the exact reach of 1 back-propagates every step's graph on its own."""
    counts = {}
    for reach in ("window", "1"):
        task, model, criterion, _ = build(
            data_bin, *TINY_MODEL, "--optimization-window", "3", "--gradient-reach", reach,
        )
        make_reads_nonzero(model)
        model.train()
        calls = []
        window = next(item["steps"] for item in batches(task, "train", max_tokens=60)
                      if len(item["steps"]) == 3 and item["steps"][0]["position"].step == 0)
        criterion.forward_window(model, lane_steps(window), backward=lambda loss: (calls.append(1), loss.backward()))
        counts[reach] = len(calls)
    assert counts == {"window": 1, "1": 3}


@pytest.mark.parametrize("across", [[], ["--gradient-across-windows", "drop"]], ids=["default", "given"])
def test_drop_with_windows_of_one_step_is_refused_by_name(data_bin, across):
    """With windows of one step, ``drop`` (the default) would cut every gradient across sentences,
    as a reach of 0 does: refused, naming both options and what to give; ``recompute`` and a reach
    of 0 say what they do, and are taken."""
    for reach in ("window", "1"):
        with pytest.raises(ValueError, match=r"--gradient-across-windows drop \(the default\) with "
                                             "--optimization-window 1: every window is one sentence step.*"
                                             "Use --gradient-across-windows recompute"):
            build(data_bin, *TINY_MODEL, "--optimization-window", "1", "--gradient-reach", reach, *across)
    build(data_bin, *TINY_MODEL, "--optimization-window", "1", "--gradient-reach", "0", *across)
    build(data_bin, *TINY_MODEL, "--optimization-window", "1", "--gradient-reach", "1",
          "--gradient-across-windows", "recompute")


@pytest.mark.parametrize("options, before, kept", [
    ([], "nothing before its window (--gradient-across-windows drop)",
     "which keeps the activations of all its steps until then"),
    (["--gradient-across-windows", "recompute", "--max-graph-tokens", "100"],
     "the window before's last sentence step, recomputed",
     "which keeps the activations of its steps up to --max-graph-tokens 100 padded tokens (the later steps "
     "run forward again in the backward pass)"),
], ids=["default", "recompute, capped"])
def test_the_log_says_what_a_window_reaches_and_keeps_for_its_backward_pass(data_bin, caplog, options, before, kept):
    task, model, criterion, _ = build(data_bin, *TINY_MODEL, "--optimization-window", "3", *options)
    window = next(item["steps"] for item in batches(task, "train", max_tokens=60))
    caplog.set_level(logging.INFO)
    criterion.forward_window(model, lane_steps(window), backward=lambda loss: loss.backward())
    assert ("gradient across sentences: a loss reaches the earlier sentences of its window (--optimization-window 3) "
            "that the states passed on connect it to (memory in the top layers: the previous sentence, and the one "
            f"before on the source side only) and {before}; one backward pass per window, {kept}") in caplog.text


def test_the_log_says_a_memory_attached_within_the_window_reaches_every_earlier_sentence_of_it(data_bin, caplog):
    task, model, criterion, _ = build(data_bin, *TINY_MODEL, "--optimization-window", "3", "--memory-gradient", "window")
    window = next(item["steps"] for item in batches(task, "train", max_tokens=60))
    caplog.set_level(logging.INFO)
    criterion.forward_window(model, lane_steps(window), backward=lambda loss: loss.backward())
    assert ("gradient across sentences: a loss reaches the earlier sentences of its window (--optimization-window 3) "
            "that its memory connects it to (--memory-gradient window: every one, through the writes between) and "
            "nothing before its window") in caplog.text


def test_a_graph_cap_without_window_backprop_is_refused(data_bin):
    with pytest.raises(ValueError, match="--max-graph-tokens 100 caps what a window keeps"):
        build(data_bin, *TINY_MODEL, "--gradient-reach", "1", "--max-graph-tokens", "100")


def test_an_unreadable_gradient_reach_is_refused(data_bin, capsys):
    assert refused_option(capsys, data_bin, *TINY_MODEL, "--gradient-reach", "windows").endswith(
        "argument --gradient-reach: windows: give 'window' or a number of sentences (0 or more)"
    )


def test_a_negative_gradient_reach_is_refused(data_bin, capsys):
    assert refused_option(capsys, data_bin, *TINY_MODEL, "--gradient-reach", "-1").endswith(
        "argument --gradient-reach: -1: give 'window' or a number of sentences (0 or more)"
    )


def test_memory_is_carried_across_windows_and_checked(data_bin):
    task, model, criterion, _ = build(data_bin, *TINY_MODEL, "--optimization-window", "2")
    windows = [item["steps"] for item in batches(task, "train", max_tokens=60)]
    group_of = lambda w: w[0]["position"].group  # noqa: E731
    first, second = next(
        (a, b) for a, b in zip(windows, windows[1:])
        if group_of(a) == group_of(b) and not b[-1]["position"].ends_group
    )
    model.eval()
    criterion.forward_window(model, lane_steps(first))
    carried = criterion.carries.get(second[0]["position"])
    assert carried is not None and set(carried.lanes.tolist()) >= set(second[0]["lanes"].tolist())
    criterion.forward_window(model, lane_steps(second))
    with pytest.raises(CarryOrderError, match="does not continue"):
        criterion.forward_window(model, lane_steps(second))


@pytest.mark.parametrize("rows, passes", [("padded", "1"), ("padded", "3"), ("packed", "1"), ("packed", "3")])
def test_replay_after_resume_rebuilds_the_uninterrupted_memory(data_bin, rows, passes):
    """With fixed weights, the memory rebuilt by replaying a group's first steps (what a
    resumed run does) equals the memory an uninterrupted walk carried to that point."""
    options = ("--optimization-window", "1", "--gradient-across-windows", "recompute", "--passes-per-step", passes,
               "--lane-rows", rows)
    task, model, criterion, _ = build(data_bin, *TINY_MODEL, *options)
    make_reads_nonzero(model)
    windows = [item["steps"] for item in batches(task, "train", max_tokens=60)]
    target = next(w[0]["position"] for w in windows if w[0]["position"].step >= 2)
    model.eval()
    with torch.no_grad():
        for window in windows:
            if window[0]["position"] == target:
                break
            criterion.forward_window(model, lane_steps(window))
    walked = criterion.carries.get(target)
    assert passes == "1" or any(len(step.passes) > 1 for step in lane_steps(task.planned_samples_before(target)))

    resumed_task, _, resumed_criterion, _ = build(data_bin, *TINY_MODEL, *options)
    batches(resumed_task, "train", max_tokens=60)  # the resumed run plans the same epoch
    assert not resumed_criterion.carries.holds(target.stream)
    resumed_criterion.rebuild_carry_after_resume(model, target, resumed_task.planned_samples_before)
    rebuilt = resumed_criterion.carries.get(target)
    assert torch.equal(walked.lanes, rebuilt.lanes)
    for name in walked.memory:
        assert torch.allclose(walked.memory[name], rebuilt.memory[name], atol=1e-6)
        assert torch.allclose(walked.states[name], rebuilt.states[name], atol=1e-6)


SENTENCE = ["--arch", "transformer", *TINY_DIMS]


def in_passes_or_packed(step) -> bool:
    """Whether a training step goes through the model in several passes, or its sentences several to a row."""
    if isinstance(step, PackedStep):
        return any(len(row) > 1 for rows in step.packed for row in rows)
    return len(step.passes) > 1


@pytest.mark.parametrize("arch, rows, passes, max_tokens", [
    (TINY_MODEL, "padded", "3", 120), (CONCAT, "padded", "3", 100), (AMN, "padded", "3", 100),
    (TINY_MODEL, "packed", "1", 120), (TINY_MODEL, "packed", "3", 60), (SENTENCE, "packed", "1", 120),
], ids=["memory", "concat", "amn", "memory_packed", "memory_packed_passes", "transformer_packed"])
def test_a_step_in_passes_or_packed_rows_trains_as_one_padded_batch(data_bin, arch, rows, passes, max_tokens):
    """--passes-per-step and packed rows change the padding only: a window whose steps go through
    the model in several passes, or with their sentences several to a row, gives the loss, the
    gradients and the carry of the same steps each in one batch of one sentence a row, the
    gradient to the previous sentences included."""
    task, model, criterion, _ = build(
        data_bin, *arch, "--training-batches", "lanes", "--optimization-window", "4", "--passes-per-step", passes,
        "--lane-rows", rows,
    )
    if arch is TINY_MODEL:
        make_reads_nonzero(model)
    model.train()
    batches(task, "train", max_tokens=max_tokens)
    plan = task.training_plan.items
    window = next(  # a group's first window, not its last (so something is carried out)
        item for item in plan.items
        if item and len(item) >= 3 and item[0].position.step == 0 and not item[-1].position.ends_group
        and sum(in_passes_or_packed(step) for step in item) >= 2
    )

    def train(steps):
        model.zero_grad()
        criterion.carries = CarryStore()
        loss, size, _ = criterion.forward_window(
            model, lane_steps([step.collate(plan.dataset) for step in steps]), backward=lambda loss: loss.backward()
        )
        carried = criterion.carries.get(dataclasses.replace(steps[-1].position, step=steps[-1].position.step + 1))
        return loss, size, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, carried

    as_planned = train(window)
    in_one = train([RefilledStep(step.position, step.sentences, step.lanes, step.continues) for step in window])
    assert torch.allclose(as_planned[0], in_one[0]) and as_planned[1] == in_one[1]
    assert as_planned[2].keys() == in_one[2].keys()
    for name in in_one[2]:
        scale = in_one[2][name].abs().max().item()  # losses are sums: gradients reach 100s
        assert (as_planned[2][name] - in_one[2][name]).abs().max().item() <= 1e-5 * max(scale, 1.0), name
    carried, expected = as_planned[3].select(in_one[3].lanes), in_one[3]
    if arch is TINY_MODEL:  # the states the next sentence writes, unpadded, row by row
        for name, states in expected.states.items():
            for row in range(states.size(1)):
                got = carried.states[name][:, row][~carried.padding_mask[name][row]]
                assert torch.allclose(got, states[:, row][~expected.padding_mask[name][row]], atol=1e-5), name
    elif arch is not SENTENCE:  # the previous sentences' tokens
        assert [[t.tolist() for t in row] for row in carried.source] == [[t.tolist() for t in row] for row in expected.source]


def test_the_document_criterion_outside_the_document_task_is_refused(data_bin):
    """Its batches are sentence steps of documents, which only the document task makes."""
    with pytest.raises(ValueError, match="--criterion document_label_smoothed_cross_entropy trains "
                                         "with --task document_translation"):
        build(data_bin, "--arch", "transformer", *TINY_DIMS, "--criterion",
              "document_label_smoothed_cross_entropy", task="translation")


@pytest.mark.parametrize("layout", [[], ["--encoder-normalize-before", "--decoder-normalize-before"]])
@pytest.mark.parametrize("reach", ["window", "1"])
def test_checkpointed_activations_give_the_same_gradients(data_bin, reach, layout):
    """--checkpoint-activations: every layer of the memory model, memory layers included, runs
    forward again in the backward pass (taking the memory and the packed sentences' masks its first
    run took as arguments), and the gradients are those of the model that
    keeps its activations, through the window's single backward pass and through --gradient-reach
    K's hop alike."""
    options = [*TINY_MODEL, *layout, "--optimization-window", "3", "--gradient-reach", reach]
    _, model, criterion, _ = build(data_bin, *options)
    task, checkpointed, checkpointed_criterion, _ = build(data_bin, *options, "--checkpoint-activations")
    assert task.regime.training.packed_width is not None, "packed rows: the recomputation keeps the masks"
    make_reads_nonzero(model)
    checkpointed.load_state_dict(model.state_dict())
    layers = [*checkpointed.encoder.layers, *checkpointed.decoder.layers]
    assert checkpointed.encoder.recomputes_layers and checkpointed.decoder.recomputes_layers
    runs = []
    for layer in layers:
        layer.fc1.register_forward_hook(lambda module, inputs, output: runs.append(module))
    steps = _window_of_three(task)
    assert any(len(set(PackedRows(**step["packed_rows"]).sentence_row.tolist())) < len(step["id"]) for step in steps), \
        "a row of the window holds several sentences"
    gradients = []
    for one_model, one_criterion in ((model, criterion), (checkpointed, checkpointed_criterion)):
        one_model.train()
        torch.manual_seed(5)
        one_criterion.forward_window(one_model, lane_steps(steps), backward=lambda loss: loss.backward())
        gradients.append({n: p.grad for n, p in one_model.named_parameters() if p.grad is not None})
    forward_runs = 3 * len(layers)
    if reach == "window":  # one backward pass through each step
        assert len(runs) == 2 * forward_runs, "each layer of each step runs forward twice"
    else:  # and the gradient hops to each step but the last recompute the layers they go through
        assert len(runs) > 2 * forward_runs
    plain, recomputed = gradients
    assert plain.keys() == recomputed.keys() and any(".memory." in name for name in plain)
    for name, gradient in plain.items():
        assert torch.allclose(recomputed[name], gradient, rtol=1e-5, atol=1e-7), name


def test_offloaded_activations_are_refused_naming_the_option_to_give(data_bin):
    with pytest.raises(OptionError, match=r"does not support --offload-activations .*give --checkpoint-activations alone"):
        build(data_bin, *TINY_MODEL, "--offload-activations")
