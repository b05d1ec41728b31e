"""The ablations of Zheng et al.'s Table 3 (transformer_local_global): each flag removes exactly its part.

A part with parameters is used by the full model (its output changes when they change), is absent from
the ablated model, and the ablated model computes what the full model computes with the part
neutralised, its other parameters loaded from the full model: segment embeddings at zero, no
per-distance vectors, the gate at 1/2 (LayerNorm((h^L + h^G) / 2) is LayerNorm(h^L + h^G) up to
LayerNorm's epsilon), every sentence encoded as a chunk of its own; the Transformer-XL decoder's
relative position terms at zero and no previous sentence. Word positions have no parameters: the
local layers read each word at its place in the chunk. Every ablated model trains, translates every
sentence once, and scores its hypotheses as teacher forcing does."""
import pytest
import torch
from torch import nn

from conftest import LOCAL_GLOBAL, Recorder, batches, build, check_hypotheses_score_as_teacher_forced, lane_steps, walk
from memory_nmt.pipeline.context_parameters import is_context_parameter
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt.pipeline.planners import EpochRequest, WholeChunks

CHUNK = 3


def model_with(data_bin, *options, chunk=CHUNK):
    """(task, model): random context parameters (fresh ones start at zero), double precision, eval."""
    task, model, criterion, _ = build(data_bin, *LOCAL_GLOBAL, "--chunk-sentences", str(chunk),
                                      "--max-chunk-sentences", str(CHUNK), *options)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if is_context_parameter(parameter):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    return task, model.double().eval(), criterion


def whole_chunks(task, split="valid"):
    task.load_dataset(split)
    planned = WholeChunks(CHUNK).plan(task.dataset(split), EpochRequest(4000, None))
    return [step.collate(planned.items.dataset) for (step,) in planned.items.items]


def encoder_output(logits, extra, row):
    encoder_out = extra["encoding"].encoder_out
    return encoder_out["encoder_out"][0][:, row][~encoder_out["encoder_padding_mask"][0][row]]


def loaded_from(full, ablated):
    """``ablated`` with every parameter it has taken from ``full`` (which has them all, and more)."""
    state = full.state_dict()
    nn.Module.load_state_dict(ablated, {key: state[key] for key in ablated.state_dict()})
    return ablated


def perturbed(model, prefixes):
    """A copy of ``model`` whose parameters under ``prefixes`` are moved at random."""
    import copy

    other = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in other.named_parameters():
            if name.startswith(prefixes):
                parameter.add_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype))
    return other


def neutralised(model, prefixes, value):
    import copy

    other = copy.deepcopy(model)
    with torch.no_grad():
        for name, parameter in other.named_parameters():
            if name.startswith(prefixes):
                parameter.fill_(value)
    return other


def largest_difference(a, b):
    assert sorted(a) == sorted(b)
    return max((a[i] - b[i]).abs().max().item() for i in a)


@pytest.mark.parametrize("flag, prefixes, value, tolerance", [
    ("--no-segment-embedding", ("encoder.segment_embeddings.",), 0.0, 1e-10),
    ("--no-relative-attention", ("encoder.global_context.attention.distance_",), 0.0, 1e-10),
    ("--no-fusion-gate", ("encoder.global_context.gate.",), 0.0, 1e-4),
])
def test_an_encoder_ablation_removes_exactly_its_part(data_bin, flag, prefixes, value, tolerance):
    task, full, _ = model_with(data_bin)
    steps = batches(task, "valid")
    reference = walk(full, steps)
    assert largest_difference(reference, walk(perturbed(full, prefixes), steps)) > 1e-3, "the part is not used"
    _, ablated, _ = model_with(data_bin, flag)
    assert not [name for name, _ in ablated.named_parameters() if name.startswith(prefixes)]
    without = walk(loaded_from(full, ablated), steps)
    assert largest_difference(without, walk(neutralised(full, prefixes, value), steps)) < tolerance
    assert largest_difference(without, reference) > 1e-3


def test_without_document_encoding_each_sentence_is_encoded_alone(data_bin):
    """The encoder output of the ablated model, which reads chunks of 3, is the full model's with
    chunks of one sentence (no global layer) and a zero segment embedding."""
    prefixes = ("encoder.segment_embeddings.", "encoder.global_context.")
    task, full, _ = model_with(data_bin)
    steps = batches(task, "valid")
    reference = walk(full, steps, of_row=encoder_output)
    assert largest_difference(reference, walk(perturbed(full, prefixes), steps, of_row=encoder_output)) > 1e-3
    _, ablated, _ = model_with(data_bin, "--no-document-encoding")
    assert not [name for name, _ in ablated.named_parameters() if name.startswith(prefixes)]
    alone_task, alone, _ = model_with(data_bin, chunk=1)
    alone.load_state_dict(neutralised(full, ("encoder.segment_embeddings.",), 0.0).state_dict())
    without = walk(loaded_from(full, ablated), steps, of_row=encoder_output)
    assert largest_difference(without, walk(alone, batches(alone_task, "valid"), of_row=encoder_output)) < 1e-10
    assert largest_difference(without, reference) > 1e-3


def test_without_the_transformer_xl_decoder_no_sentence_reads_the_previous_one(data_bin):
    """Whole chunks: the decoder input of every chunk's first sentence rolled. The full model's
    later sentences change and its relative position terms matter; the ablated model has none, its
    later sentences do not change, and its chunks' first sentences are the full model's with the
    relative terms at zero."""
    prefixes = tuple(f"decoder.layers.{i}.self_attn.relative_positions." for i in range(2))
    task, full, _ = model_with(data_bin)
    _, ablated, _ = model_with(data_bin, "--no-transformer-xl-decoder")
    assert not [name for name, _ in ablated.named_parameters() if "relative_positions" in name]
    ablated = loaded_from(full, ablated)
    (sample,) = whole_chunks(task)
    first = sample["net_input"]["chunk_positions"].eq(0)
    previous = sample["net_input"]["prev_output_tokens"].clone()
    for row in first.nonzero().squeeze(1).tolist():
        words = previous[row].ge(task.target_dictionary.nspecial)
        previous[row, words] = torch.roll(previous[row, words], 1)
    rolled = dict(sample, net_input=dict(sample["net_input"], prev_output_tokens=previous))

    def logits(model, batch):
        return walk(model, [batch], of_row=lambda out, extra, row: out[row])

    full_logits, ablated_logits = logits(full, sample), logits(ablated, sample)
    later = [i for i, is_first in zip(sample["id"].tolist(), first.tolist()) if not is_first]
    starts = [i for i, is_first in zip(sample["id"].tolist(), first.tolist()) if is_first]
    assert later and starts
    full_rolled, ablated_rolled = logits(full, rolled), logits(ablated, rolled)
    assert all((full_logits[i] - full_rolled[i]).abs().max() > 1e-3 for i in later)
    assert all(torch.equal(ablated_logits[i], ablated_rolled[i]) for i in later)
    assert largest_difference(full_logits, logits(perturbed(full, prefixes), sample)) > 1e-3
    zeroed = logits(neutralised(full, prefixes, 0.0), sample)
    assert max((zeroed[i] - ablated_logits[i]).abs().max().item() for i in starts) < 1e-6  # fairseq's softmax: float32


@pytest.mark.parametrize("flag", [[], ["--no-word-position-reset"]], ids=["reset", "no-reset"])
def test_word_positions_restart_at_each_sentence_unless_ablated(data_bin, flag):
    """The local layers' input of each sentence of a chunk: the embeddings of its words at their
    places in the sentence, or, without the reset, at their places in the chunk's words (the
    sentences one after the other, each with its </s>), as fairseq embeds one sequence."""
    task, model, _, _ = build(data_bin, *LOCAL_GLOBAL, "--chunk-sentences", str(CHUNK), *flag)
    model.double().eval()
    (sample,) = whole_chunks(task)
    net_input, lanes, pad = sample["net_input"], sample["lanes"], task.source_dictionary.pad()
    seen = []
    handle = model.encoder.layers[0].register_forward_pre_hook(lambda module, given: seen.append(given[0]))
    try:
        with torch.no_grad():
            model.encoder(net_input["src_tokens"], chunk_positions=net_input["chunk_positions"], chunk_ids=lanes)
    finally:
        handle.remove()
    tokens, positions = net_input["src_tokens"], net_input["chunk_positions"].tolist()
    for lane in set(lanes.tolist()):
        rows = sorted((positions[r], r) for r in range(len(positions)) if lanes[r] == lane)
        sentences = [tokens[r][tokens[r].ne(pad)] for _, r in rows]
        if len(sentences) < 2:
            continue
        joined, _ = model.encoder.forward_embedding(torch.cat(sentences).unsqueeze(0))
        start = 0
        for (_, row), sentence in zip(rows, sentences):
            alone, _ = model.encoder.forward_embedding(sentence.unsqueeze(0))
            expected = (joined[0, start:start + sentence.numel()] if flag else alone[0])
            start += sentence.numel()
            got = seen[0][:, row][tokens[row].ne(pad)]
            assert torch.allclose(got, expected, atol=1e-10), (lane, row)


def test_learned_positions_past_their_end_are_refused_by_name(data_bin):
    task, model, _, _ = build(data_bin, *LOCAL_GLOBAL, "--chunk-sentences", str(CHUNK), "--no-word-position-reset",
                              "--encoder-learned-pos", "--decoder-learned-pos", "--max-source-positions", "16")
    (sample,) = whole_chunks(task)
    with pytest.raises(OptionError, match="--no-word-position-reset: a chunk of .* words goes past the 16 learned"):
        model.encoder(sample["net_input"]["src_tokens"], chunk_positions=sample["net_input"]["chunk_positions"],
                      chunk_ids=sample["lanes"])


@pytest.mark.parametrize("flag", ["--no-document-encoding", "--no-word-position-reset", "--no-segment-embedding",
                                  "--no-relative-attention", "--no-fusion-gate", "--no-transformer-xl-decoder"])
def test_each_ablated_model_trains_and_translates_every_sentence_once(data_bin, flag):
    task, model, criterion = model_with(data_bin, flag)
    model.train()
    loss, _, _ = criterion.forward_window(model, lane_steps([whole_chunks(task, "train")[0]]), backward=lambda l: l.backward())
    assert loss > 0 and any(p.grad is not None for p in model.parameters())
    model.eval()
    best, trace = Recorder(task, model).decode(batches(task, "test", max_tokens=1000))
    assert sorted(best) == list(range(len(task.dataset("test"))))
    assert check_hypotheses_score_as_teacher_forced(task, model, trace, atol=1e-6) > 20
