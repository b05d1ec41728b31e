"""Each system trains in the batches its papers train it in: documents in lanes that refill (a
system that carries state), shuffled sentences with their context (one whose context is earlier
sentences' tokens), whole chunks (one that reads chunks). Every training sentence is in exactly
one batch an epoch, one worker or two; a sentence's context comes from the earlier sentences of
its own document only; a lane that takes its next document starts it from nothing carried, and
no loss of one document sends gradient into another."""
import collections
import logging
import re

import pytest
import torch

from conftest import AMN, CONCAT, LOCAL_GLOBAL, TINY_DIMS, TINY_MODEL, batches, build, lane_steps, make_reads_nonzero, walk
from memory_nmt.pipeline.data import Document, DocumentDataset
from memory_nmt.pipeline.lane_steps import ChunkStep, PackedStep, RefilledStep, SentenceStep, StepPosition, WholeChunkStep
from memory_nmt.pipeline.generator import DocumentSequenceGenerator
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt.pipeline.packing import PackedRows
from memory_nmt.pipeline.planners import EpochItems, EpochRequest
from memory_nmt.pipeline.samples import LaneStep, LaneWindow, SentencesBatch, passes_in, read_sample

SENTENCE = ["--arch", "transformer", *TINY_DIMS]


def sentences_of(item) -> list:
    """The dataset indices an item trains on (a window of steps in passes, or one batch)."""
    return [i for rows in passes_in(read_sample(item)) for i in rows.batch["id"].tolist()]


@pytest.mark.parametrize("arch, unit", [
    (TINY_MODEL, "lanes"), (CONCAT, "sentences"), (AMN, "sentences"), (SENTENCE, "sentences"), (LOCAL_GLOBAL, "chunks"),
], ids=["memory", "concat", "amn", "transformer", "local_global"])
def test_each_system_trains_in_its_own_batches_every_sentence_once(data_bin, arch, unit):
    task, _, _, _ = build(data_bin, *arch, *(["--optimization-window", "2-3"] if unit == "lanes" else []))
    assert task.regime.unit == unit
    for workers in (1, 2):
        per_worker = [batches(task, "train", max_tokens=200, num_shards=workers, shard_id=w) for w in range(workers)]
        assert len({len(items) for items in per_worker}) == 1, "every worker runs as many batches"
        seen = collections.Counter(i for items in per_worker for item in items if item for i in sentences_of(item))
        assert sorted(seen) == list(range(len(task.dataset("train")))) and set(seen.values()) == {1}
    items = batches(task, "train", max_tokens=200)
    if unit == "sentences":
        assert all("previous_sentences" in item for item in items)
    elif unit == "chunks":
        assert all(len(item["steps"]) == 1 for item in items), "one batch of whole chunks an update"
    else:
        assert any(len(item["steps"]) > 1 for item in items) and all("continues" in s for i in items for s in i["steps"])


def test_lanes_for_every_system_on_request(data_bin):
    task, _, _, _ = build(data_bin, *CONCAT, "--training-batches", "lanes")
    assert task.regime.unit == "lanes"
    assert all("steps" in item for item in batches(task, "train", max_tokens=200))


@pytest.mark.parametrize("arch, unit, kind, steps", [
    (TINY_MODEL, "lanes", LaneWindow, {PackedStep}), ([*TINY_MODEL, "--lane-rows", "padded"], "lanes", LaneWindow, {RefilledStep}),
    (CONCAT, "sentences", SentencesBatch, None), (LOCAL_GLOBAL, "chunks", LaneWindow, {WholeChunkStep}),
], ids=["memory", "memory_padded", "concat", "local_global"])
def test_each_regime_has_one_kind_of_batch_and_every_worker_one_digest(data_bin, arch, unit, kind, steps):
    """The regime chosen when the model is built gives the training split batches of one type (in
    lanes, steps of one kind), and every other split sentence steps; the digest of an epoch's plan
    covers every worker's batches, so two workers have the same one, which another --max-tokens changes."""
    task, _, _, _ = build(data_bin, *arch)
    assert task.regime.unit == unit
    task.load_dataset("train")
    dataset = task.dataset("train")
    plans = [task.regime.training.plan(dataset, EpochRequest(200, None, 2, worker)) for worker in (0, 1)]
    assert plans[0].digest == plans[1].digest
    assert plans[0].digest != task.regime.training.plan(dataset, EpochRequest(150, None, 2, 0)).digest
    read = [read_sample(plans[0].items.collater([plans[0].items[i] for i in batch])) for batch in plans[0].batches]
    assert {type(batch) for batch in read if batch is not None} == {kind}
    if steps is not None:
        assert {type(step) for item in plans[0].items.items if item for step in item} == steps
    assert all(isinstance(read_sample(item), LaneStep) for item in batches(task, "valid", max_tokens=200))
    stepping = task.regime.stepping.plan(task.dataset("valid"), EpochRequest(200, None))
    assert {type(step) for (step,) in stepping.items.items} == {ChunkStep if unit == "chunks" else SentenceStep}


def test_a_batch_that_is_not_the_pipelines_is_refused_by_the_generator(data_bin):
    """Decoding reads a batch's kind, not its keys: fairseq's own batch of the split's sentences
    (no kind) is refused by name, the same sentences as a step of the document task decode."""
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    task.trains_its_model = False
    step = batches(task, "test", max_tokens=200)[0]
    generator = DocumentSequenceGenerator([model], task.target_dictionary, beam_size=1, max_len_b=12)
    foreign = {key: step[key] for key in ("id", "nsentences", "ntokens", "net_input", "target")}
    foreign["lanes"], foreign["position"] = step["lanes"], step["position"]
    with pytest.raises(OptionError, match="document decoding needs the batches of the document_translation task"):
        generator.generate([model], foreign)
    assert len(generator.generate([model], step)) == step["id"].numel()


def test_a_sentences_context_is_the_earlier_sentences_of_its_own_document(data_bin):
    """K = 3, documents of 2 to 6 sentences: a row's context is the up to 3 sentences right
    before it in its document, oldest first, on both sides, never another document's."""
    task, _, _, _ = build(data_bin, *CONCAT, "--source-context", "3", "--target-context", "3")
    items = batches(task, "train", max_tokens=400)
    pairs = task.dataset("train").pairs
    rows = 0
    for item in items:
        for sentence, (sources, targets) in zip(item["id"].tolist(), item["previous_sentences"]):
            document, index = task.dataset("train").document_of(sentence)
            earlier = range(document.first + max(0, index - 3), sentence)
            assert [s.tolist() for s in sources] == [pairs[j]["source"].tolist() for j in earlier]
            assert [t.tolist() for t in targets] == [pairs[j]["target"].tolist() for j in earlier]
            rows += 1
    assert rows == len(pairs)


def recorded_outputs(criterion):
    """A dict that gets each sentence's output logits (by id) as ``criterion`` runs the model."""
    outputs = {}
    run_model = criterion.run_model

    def recording(model, rows, carry, **options):
        step = run_model(model, rows, carry, **options)
        outputs.update(zip(rows.batch["id"].tolist(), step.net_output[0]))
        return step

    criterion.run_model = recording
    return outputs


def test_a_sentence_reads_in_its_batch_what_it_reads_walked_in_its_document(data_bin):
    """2-to-2: each sentence's teacher-forced output in the shuffled sentence batches equals its
    output in a walk through its document, lane by lane (where the carry is passed on)."""
    task, model, criterion, _ = build(data_bin, *CONCAT, "--source-context", "2", "--target-context", "2")
    model.eval()
    task.load_dataset("train")
    steps = [step for step in task.get_batch_iterator(task.dataset("train"), max_tokens=400, seed=1).next_epoch_itr(shuffle=False)]
    outputs = recorded_outputs(criterion)
    with torch.no_grad():
        for item in steps:
            criterion.forward(model, item)
    task.trains_its_model = False  # a loaded model reads every split, the training one too, document by document
    walked = walk(model, batches(task, "train", max_tokens=400))
    assert walked.keys() == outputs.keys()
    pairs = task.dataset("train").pairs
    for i, logits in walked.items():
        length = pairs[i]["target"].numel()
        assert torch.allclose(logits[:length], outputs[i][:length], atol=1e-5), i


def refilled_boundary(task):
    """A window of two steps in which one lane's document ends at the first and its next
    document starts at the second: (window, lane, the ended document's sentence, the new one's)."""
    for item in batches(task, "train", max_tokens=200):
        window = item["steps"]
        for first, second in zip(window, window[1:]):
            starts = dict(zip(second["lanes"].tolist(), (~second["continues"]).tolist()))
            for lane, sentence in zip(first["lanes"].tolist(), first["id"].tolist()):
                if starts.get(lane) and second["position"].step > 0:
                    new = second["id"][second["lanes"].tolist().index(lane)].item()
                    return [first, second], lane, sentence, new
    raise AssertionError("no lane takes its next document in the tiny corpus")


def test_a_refilled_lane_starts_its_next_document_from_nothing_carried(data_bin):
    """The new document's first sentence computes exactly what it computes as a document's first
    sentence anywhere: changing the lane's previous document changes nothing of it."""
    task, model, criterion, _ = build(data_bin, *TINY_MODEL, "--optimization-window", "2", "--dropout", "0",
                                      "--lane-rows", "padded")
    make_reads_nonzero(model)
    model.eval()
    window, lane, ended, new = refilled_boundary(task)
    outputs = recorded_outputs(criterion)
    with torch.no_grad():
        criterion.forward_window(model, lane_steps(window), stateless=True)
        first = outputs[new].clone()
        changed = dict(window[0], net_input=dict(window[0]["net_input"]))
        tokens = changed["net_input"]["src_tokens"].clone()
        row = changed["id"].tolist().index(ended)
        tokens[row] = tokens[row].flip(0)
        changed["net_input"]["src_tokens"] = tokens
        criterion.forward_window(model, lane_steps([changed, window[1]]), stateless=True)
    assert torch.equal(outputs[new], first)
    alone = walk(model, [dict(window[1], position=window[1]["position"].__class__("alone", 0, 0, True))])
    assert torch.allclose(alone[new], first, atol=1e-6)


def source_columns(step, sentence):
    """(row, columns) of ``step``'s source tokens of ``sentence`` (a dataset index), one a row or packed."""
    place = step["id"].tolist().index(sentence)
    if "packed_rows" not in step:
        return place, slice(None)
    rows = PackedRows(**step["packed_rows"])
    start = int(rows.source_start[place])
    return int(rows.sentence_row[place]), slice(start, start + int(rows.source_length[place]))


def only_the_loss_of(step, sentence, pad):
    """``step`` with every target token but ``sentence``'s padding (no loss)."""
    place = step["id"].tolist().index(sentence)
    if "packed_rows" in step:
        others = PackedRows(**step["packed_rows"]).target_sentence != place
    else:
        others = (step["id"] != sentence).unsqueeze(1).expand_as(step["target"])
    return dict(step, target=step["target"].masked_fill(others, pad))


@pytest.mark.parametrize("reach, rows", [("2", "padded"), ("window", "packed")])
@pytest.mark.parametrize("across", ["recompute", "drop"])
def test_no_loss_of_one_document_sends_gradient_into_another(data_bin, across, reach, rows):
    """With the gradient reaching 2 sentences back (or every earlier sentence of the window), the
    loss of the new document's first sentence reaches nothing of the lane's previous document;
    made to go on with it (the lane's carry read), the same loss does: the test can tell."""
    task, model, criterion, _ = build(
        data_bin, *TINY_MODEL, "--optimization-window", "2", "--gradient-reach", reach,
        "--gradient-across-windows", across, "--dropout", "0", "--lane-rows", rows,
    )
    make_reads_nonzero(model)
    model.train()
    window, lane, ended, new = refilled_boundary(task)
    pad = task.target_dictionary.pad()
    assert ("packed_rows" in window[0]) == (rows == "packed")

    def gradient_at_the_ended_document(second):
        steps = [dict(window[0], target=torch.full_like(window[0]["target"], pad)), only_the_loss_of(second, new, pad)]
        embedded = []

        def retain(module, inputs, output):
            output.retain_grad()
            embedded.append(output)

        handle = model.encoder.embed_tokens.register_forward_hook(retain)
        model.zero_grad()
        try:
            criterion.forward_window(model, lane_steps(steps), backward=lambda loss: loss.backward(), stateless=True)
        finally:
            handle.remove()
        row, columns = source_columns(window[0], ended)
        return embedded[0].grad[row, columns].abs().sum().item() if embedded[0].grad is not None else 0.0

    assert gradient_at_the_ended_document(window[1]) == 0
    carried = dict(window[1], continues=torch.ones_like(window[1]["continues"]))
    assert gradient_at_the_ended_document(carried) > 0


def test_a_resume_replays_from_the_earliest_start_of_what_its_lanes_go_on_with_and_at_least_one_step():
    """The replay after a resume inside a group: back to where the documents its rows go on with
    started; where every row starts a document, the step before (so the carry it continues is
    held, and nothing is read from it)."""
    def step(number, continues):
        return RefilledStep(StepPosition("train", 0, number, ends_group=number == 3), sentences=(2 * number, 2 * number + 1),
                            lanes=(0, 1), continues=continues)

    def replayed(step):
        return [earlier.position.step for earlier in items.steps_before(step.position)]

    steps = [step(0, (False, False)), step(1, (True, False)), step(2, (True, True)), step(3, (False, False))]
    items = EpochItems(None, [[steps]], shard_id=0, windows=True)
    assert replayed(steps[2]) == [0, 1], "lane 0's document started at step 0"
    assert replayed(steps[1]) == [0]
    assert replayed(steps[3]) == [2], "every row starts a document: the step before"


def test_a_document_far_longer_than_the_rest_is_named_when_its_steps_starve_the_lanes(data_bin, caplog):
    """A document much longer than the others runs on alone once they have ended, each of its
    steps an update of a few sentences: the log names it with the share of such steps; the
    corpus's own documents, of similar lengths, plan without the warning."""
    task, _, _, _ = build(data_bin, *TINY_MODEL)
    task.load_dataset("train")
    dataset = task.dataset("train")
    caplog.set_level(logging.WARNING)
    request = EpochRequest(120, None, 1, 0, 1, 1)
    task.regime.training.plan(dataset, request)
    assert "hold fewer than a quarter" not in caplog.text
    long = len(dataset) // 2  # one document of half the split's sentences, the rest in twos
    documents = [Document("long", 0, long)] + [Document(f"d{i}", start, min(2, len(dataset) - start))
                                               for i, start in enumerate(range(long, len(dataset), 2))]
    task.regime.training.plan(DocumentDataset(dataset.pairs, documents, "train", dataset.docids_path), request)
    assert re.search(r"training batches of epoch 1: \d+ of its \d+ sentence steps \(\d+%\) hold fewer than a "
                     rf"quarter of its \d+ lanes: document 'long' has {long} sentences, where half the documents "
                     "have at most 2", caplog.text)
