"""transformer_context_concat: with no context it is the plain transformer; its context is the
previous sentences of its own document only (the model's own translations when decoding), cut
oldest first to the positions; incremental decoding after the prefix equals teacher forcing;
batching changes nothing; and the stock CLIs, interactive mode and the hub run it."""
import re

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from conftest import (
    CONCAT,
    TINY_DIMS,
    Recorder,
    batches,
    build,
    check_clis_and_hub_translate_alike,
    check_context_reach,
    check_hypotheses_score_as_teacher_forced,
    lane_steps,
    walk,
)
from memory_nmt.pipeline.data import DocumentDataError
from memory_nmt.pipeline.teacher_forcing import teacher_forced_step
from memory_nmt.systems.previous_sentences import PreviousSentences, unpadded


def concat_model(data_bin, source, target, *more):
    task, model, criterion, cfg = build(
        data_bin, *CONCAT, "--source-context", str(source), "--target-context", str(target), *more
    )
    return task, model, criterion


def test_no_context_computes_what_the_plain_transformer_computes(data_bin):
    _, plain, _, _ = build(data_bin, "--arch", "transformer", *TINY_DIMS, "--seed", "3", task="translation")
    task, no_context, _ = concat_model(data_bin, 0, 0)
    _, two_to_two, _ = concat_model(data_bin, 1, 1)
    for model in (no_context, two_to_two):
        model.load_state_dict(plain.state_dict())
        model.eval()
    plain.eval()
    steps = batches(task, "test")
    with torch.no_grad():
        expected = {i: logits for s in steps for i, logits in zip(s["id"].tolist(), plain(**s["net_input"])[0])}
    assert all(torch.equal(logits, expected[i]) for i, logits in walk(no_context, steps).items())
    first_sentences = {i for s in steps if s["position"].step == 0 for i in s["id"].tolist()}
    with_context = walk(two_to_two, steps)
    assert all(torch.equal(with_context[i], expected[i]) for i in first_sentences)
    assert all(not torch.allclose(with_context[i], expected[i]) for i in set(expected) - first_sentences)

    plain_generator = SequenceGenerator([plain], task.target_dictionary, beam_size=3, max_len_b=12)
    best, _ = Recorder(task, no_context).decode(steps)
    for sample in steps:
        for sentence, hypotheses in zip(sample["id"].tolist(), plain_generator.generate([plain], sample)):
            assert best[sentence] == hypotheses[0]["tokens"].tolist()


def test_context_comes_from_the_same_document_and_reaches_k_sentences_back(data_bin):
    task, model, _ = concat_model(data_bin, 3, 3)
    model.eval()
    steps = batches(task, "test", max_tokens=100)
    group = [s for s in steps if s["position"].group == 0]
    assert len(group) >= 5 and group[0]["lanes"].numel() >= 2 and len(steps) > len(group)
    check_context_reach(model, steps, task.source_dictionary, reach=3)


def test_decoding_reads_the_models_own_previous_translations(data_bin):
    task, model, _ = concat_model(data_bin, 1, 2)
    model.eval().double()
    group = [s for s in batches(task, "test", max_tokens=1000) if s["position"].group == 0]
    eos = task.target_dictionary.eos()
    pad = task.target_dictionary.pad()
    runs = {}
    for context_from in ("hypothesis", "reference"):
        _, trace = Recorder(task, model, context_from=context_from).decode(group)
        runs[context_from] = trace
        translations = {}  # lane -> its translations so far
        for sample, inputs, hypotheses in trace:
            lanes = sample["lanes"].tolist()
            if sample["position"].step:
                prefixes = unpadded(inputs["target_prefix"], pad)
                for lane, prefix in zip(lanes, prefixes):
                    expected = [eos] + [token for sentence in translations[lane][-2:] for token in sentence]
                    assert prefix.tolist() == expected
            references = unpadded(sample["target"], pad)
            for row, lane in enumerate(lanes):
                own = hypotheses[row][0]["tokens"] if context_from == "hypothesis" else references[row]
                translations.setdefault(lane, []).append(own.tolist())
    hypothesis_prefixes = [inputs["target_prefix"] for _, inputs, _ in runs["hypothesis"][1:]]
    reference_prefixes = [inputs["target_prefix"] for _, inputs, _ in runs["reference"][1:]]
    assert any(h.shape != r.shape or not torch.equal(h, r) for h, r in zip(hypothesis_prefixes, reference_prefixes))
    later = lambda trace: [[h[0]["tokens"].tolist() for h in hyps] for _, _, hyps in trace[1:]]  # noqa: E731
    assert later(runs["hypothesis"]) != later(runs["reference"]), "the target context changes nothing"


@pytest.mark.parametrize("context_from", ["hypothesis", "reference"])
def test_incremental_decoding_after_the_prefix_equals_teacher_forcing(data_bin, context_from):
    """Untrained, every hypothesis runs to the length limit; references give the rows of a batch
    prefixes of different lengths."""
    task, model, _ = concat_model(data_bin, 2, 2)
    model.eval().double()
    group = [s for s in batches(task, "test", max_tokens=1000) if s["position"].group == 0]
    _, trace = Recorder(task, model, context_from=context_from).decode(group)
    prefix_lengths = {int(n) for _, inputs, _ in trace[1:] for n in inputs["target_prefix"].ne(task.target_dictionary.pad()).sum(1)}
    assert context_from == "hypothesis" or len(prefix_lengths) > 2
    compared = check_hypotheses_score_as_teacher_forced(task, model, trace, atol=1e-9)
    assert compared > 20


@pytest.mark.parametrize("context_from", ["hypothesis", "reference"])
def test_batching_changes_no_translation_and_loses_no_sentence(data_bin, context_from):
    task, model, _ = concat_model(data_bin, 1, 1)
    model.eval().double()
    results = []
    for options in ({"max_tokens": 1000}, {"max_tokens": None, "max_sentences": 1}, {"max_tokens": None, "max_sentences": 2}):
        best, _ = Recorder(task, model, context_from=context_from).decode(batches(task, "test", **options))
        sentences = len(task.dataset("test"))
        assert sorted(best) == list(range(sentences)), "every sentence exactly once"
        results.append(best)
    assert results[0] == results[1] == results[2]


def test_context_is_cut_oldest_first_to_fit_the_positions(data_bin, caplog):
    task, model, _ = concat_model(
        data_bin, 3, 3, "--max-source-positions", "15", "--max-target-positions", "20"
    )
    pad, eos = task.source_dictionary.pad(), task.source_dictionary.eos()

    def sentence(first, length):
        return torch.tensor([*range(first, first + length - 1), eos])

    oldest, middle, newest = sentence(10, 4), sentence(20, 3), sentence(30, 6)
    carry = PreviousSentences(torch.tensor([0]), [(oldest, middle, newest)], [(oldest, middle, newest)])
    current = torch.cat([torch.full((1, 2), pad), sentence(40, 5).unsqueeze(0)], dim=1)  # left-padded
    net_input = {"src_tokens": current, "src_lengths": torch.tensor([5])}
    context = model.sentence_context(carry, net_input, target_room=8)
    source = unpadded(context.inputs["source_with_context"], pad)[0]
    assert source.tolist() == torch.cat([middle, newest, sentence(40, 5)]).tolist()  # 14 of 15 positions
    prefix = unpadded(context.inputs["target_prefix"], pad)[0]
    assert prefix.tolist() == [eos, *middle.tolist(), *newest.tolist()]  # 10 tokens + 8 of room + 1 < 20
    assert model.context_cuts.count == 2
    for _ in range(4):
        model.sentence_context(carry, net_input, target_room=8)
    cuts_logged = [re.search(r"context cut (\d+) times", r.getMessage()) for r in caplog.records]
    assert [int(match[1]) for match in cuts_logged if match] == [1, 10]

    roomy = model.sentence_context(carry, net_input, target_room=2)
    assert unpadded(roomy.inputs["target_prefix"], pad)[0].numel() == 1 + 4 + 3 + 6


def test_batches_count_the_context_within_max_tokens(data_bin):
    task, model, _ = concat_model(data_bin, 2, 2, "--training-batches", "lanes")
    steps = batches(task, "train", max_tokens=150)
    walked, carry = 0, None
    with torch.no_grad():
        for item in steps:
            for sample in item["steps"]:
                lanes, net_input = sample["lanes"], sample["net_input"]
                carry_in = carry.select(lanes) if carry is not None and sample["position"].step else None
                step = teacher_forced_step(model, carry_in, lanes, net_input, sample["target"], sample["continues"])
                context = step.context
                source = context.inputs.get("source_with_context", net_input["src_tokens"])
                assert source.numel() <= 150
                if "target_prefix" in context.inputs:
                    pad = task.target_dictionary.pad()
                    prefix_lengths = context.inputs["target_prefix"].ne(pad).sum(1)
                    target_lengths = sample["target"].ne(pad).sum(1)
                    assert lanes.numel() * int((prefix_lengths + target_lengths - 1).max()) <= 150
                    walked += 1
                carry = step.carry
    assert walked > 10


@pytest.mark.parametrize("regime", ["system", "lanes"])
def test_max_tokens_holds_the_context_with_the_trainers_max_positions(data_bin, regime):
    """fairseq's trainer counts --max-tokens into the positions it passes: the context is still
    counted up to the model's own positions, to which it is cut, so a sentence with its context
    over --max-tokens is refused, never trained on in a wider batch (in the system's own
    sentence batches and in lanes)."""
    from fairseq import utils

    task, model, criterion = concat_model(data_bin, 3, 0, "--training-batches", regime)

    def trainer_batches(max_tokens):
        positions = utils.resolve_max_positions(task.max_positions(), model.max_positions(), max_tokens)
        return batches(task, "train", max_tokens=max_tokens, max_positions=positions)

    with pytest.raises(DocumentDataError, match="with the previous sentences its system reads, more than --max-tokens 12"):
        trainer_batches(12)
    widths = []

    def source_width(module, args, kwargs):
        tokens = kwargs.get("source_with_context")
        widths.append((tokens if tokens is not None else args[0]).numel())

    handle = model.encoder.register_forward_pre_hook(source_width, with_kwargs=True)
    try:
        with torch.no_grad():
            for item in trainer_batches(120):
                criterion.forward(model, item)
    finally:
        handle.remove()
    assert widths and max(widths) <= 120 and sum(width > 30 for width in widths) > 3


def test_a_target_context_cut_by_the_generators_length_limit_says_so(data_bin, caplog):
    task, model, _ = concat_model(data_bin, 1, 1)
    eos = task.target_dictionary.eos()
    previous = torch.tensor([10, 11, 12, eos])
    carry = PreviousSentences(torch.tensor([0]), [(previous,)], [(previous,)])
    net_input = {"src_tokens": torch.tensor([[13, 14, eos]]), "src_lengths": torch.tensor([3])}
    room = model.decoder.max_positions() - 2  # what --max-len-b beyond the positions leaves
    context = model.sentence_context(carry, net_input, target_room=room)
    assert unpadded(context.inputs["target_prefix"], task.target_dictionary.pad())[0].tolist() == [eos]
    assert "less the 1022 the translation may take" in caplog.text
    assert "lower --max-len-a / --max-len-b when decoding, or raise --max-target-positions" in caplog.text


def test_a_sentences_loss_trains_its_own_pass_only(data_bin):
    """The previous sentences are read again from their tokens: sentence t's loss reaches the
    embeddings of its own forward pass (context tokens included), never the earlier passes."""
    task, model, criterion = concat_model(data_bin, 2, 2, "--training-batches", "lanes", "--optimization-window", "3")
    model.train()
    windows = [item["steps"] for item in batches(task, "train", max_tokens=150)]
    steps = next(w for w in windows if len(w) >= 3 and w[2]["lanes"].numel() >= 1)[:3]
    pad = task.target_dictionary.pad()
    steps = [dict(s, target=torch.full_like(s["target"], pad)) for s in steps[:2]] + [steps[2]]
    embeddings = []

    def keep(module, inputs, output):
        output.retain_grad()
        embeddings.append(output)

    handle = model.encoder.embed_tokens.register_forward_hook(keep)
    try:
        criterion.forward_window(model, lane_steps(steps), backward=lambda loss: loss.backward())
    finally:
        handle.remove()
    reached = [e.grad is not None and e.grad.abs().sum().item() > 0 for e in embeddings]
    assert reached == [False, False, False, False, True, True]


def test_stock_clis_and_hub_translate_documents_alike(data_bin, concat_checkpoint):
    from memory_nmt.systems.context_concat.model import ContextConcatTransformerModel

    check_clis_and_hub_translate_alike(data_bin, concat_checkpoint, ContextConcatTransformerModel)
