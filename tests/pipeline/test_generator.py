"""Document decoding: batching across documents changes nothing, the memory stays fixed during
a sentence's beam search and moves after it, a lane carries out the states of its chosen
hypothesis (recorded during beam search), and options that would decode without the document's
context are refused."""
import argparse

import pytest
import torch

from conftest import AMN, CONCAT, LOCAL_GLOBAL, TINY_DIMS, TINY_MODEL, batches, build, make_reads_nonzero
from memory_nmt.pipeline.generator import DocumentSequenceGenerator
from memory_nmt.systems.context_concat.model import TargetPrefix
from memory_nmt.systems.local_global.target_context import PreviousTarget
from memory_nmt.systems.recurrent_memory.layers import MemoryRead

SENTENCE = ["--arch", "transformer", *TINY_DIMS]


def _decoding_model(data_bin):
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    make_reads_nonzero(model)
    return task, model.eval().double()


def _decode(task, model, steps, prefix=False):
    """The best hypothesis of every sentence; with ``prefix``, each reference is forced whole."""
    generator = DocumentSequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=12)
    hypotheses = {}
    for sample in steps:
        sample = dict(sample, net_input=dict(sample["net_input"]))
        translated = generator.generate([model], sample, prefix_tokens=sample["target"] if prefix else None)
        for sentence, best in zip(sample["id"].tolist(), translated):
            assert sentence not in hypotheses
            hypotheses[sentence] = best[0]["tokens"].tolist()
    return hypotheses


def test_documents_decoded_together_or_alone_give_the_same_translations(data_bin):
    task, model = _decoding_model(data_bin)
    together = batches(task, "test", max_tokens=1000)
    alone = batches(task, "test", max_tokens=None, max_sentences=1)
    assert max(s["lanes"].numel() for s in together) > 2 and max(s["lanes"].numel() for s in alone) == 1
    expected = _decode(task, model, together)
    assert len(expected) == len(task.dataset("test"))
    assert _decode(task, model, alone) == expected


@pytest.mark.parametrize("arch, reads", [
    (TINY_MODEL, MemoryRead), ([*CONCAT, "--target-context", "1"], TargetPrefix), (AMN, None),
    (LOCAL_GLOBAL, PreviousTarget), (SENTENCE, None),
], ids=["memory", "concat", "amn", "local_global", "transformer"])
def test_the_decoder_gets_fairseqs_encoder_output_and_its_context_as_an_argument(data_bin, monkeypatch, arch, reads):
    """At every beam step of a document's later sentences, the encoder output the decoder gets has
    fairseq's keys only, and what the system's decoder reads besides is its own argument, one row
    a beam row."""
    task, model, _, _ = build(data_bin, *arch)
    model.eval()
    generator = DocumentSequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=6)
    _, plain, _, _ = build(data_bin, *SENTENCE)
    plain_keys = set(plain.encoder(torch.tensor([[4, 2]]), torch.tensor([2])))
    seen = []
    forward_decoder = generator.model.forward_decoder

    def spy(tokens, encoder_outs, incremental_states, temperature=1.0):
        (encoding,) = encoder_outs
        seen.append((set(encoding.encoder_out), encoding.reads, tokens.size(0)))
        return forward_decoder(tokens, encoder_outs, incremental_states, temperature)

    monkeypatch.setattr(generator.model, "forward_decoder", spy)
    with torch.no_grad():
        for sample in batches(task, "test", max_tokens=1000)[:2]:
            generator.generate([model], sample)
    assert seen and all(keys <= plain_keys for keys, _, _ in seen)
    later = [(given, rows) for _, given, rows in seen if given is not None]
    if reads is None:
        assert not later
        return
    rows_of = {MemoryRead: lambda given: given.rows, TargetPrefix: lambda given: given.tokens,
               PreviousTarget: lambda given: given.memory_padding}[reads]
    assert later and all(isinstance(given, reads) and rows_of(given).size(0) == rows for given, rows in later), \
        "the reads are reordered with the beams"


def test_memory_fixed_during_beam_search_and_updated_after(data_bin):
    """At every beam step, the keys the decoder's Output Attention attends to are those of the
    memory its lane was given for the sentence; the next sentence's memory differs."""
    task, model = _decoding_model(data_bin)
    unit = model.memory_units()["decoder.1"]
    attention = unit.read_attn
    per_sentence_step = []
    memory_and_write_shares = model.memory_and_write_shares

    def spy_memory_and_write_shares(carry, lanes):
        memory, shares = memory_and_write_shares(carry, lanes)
        written = carry is not None and bool(carry.rows_with_sentence().numel())
        previous = carry.memory["decoder.1"] if written else None  # what the lanes read before
        per_sentence_step.append({"given": memory["decoder.1"], "previous": previous, "keys": []})
        return memory, shares

    def record_keys(module, args, kwargs, output):
        if kwargs.get("incremental_state") is not None:
            cached = module._get_input_buffer(kwargs["incremental_state"])["prev_key"]
            per_sentence_step[-1]["keys"].append(cached.flatten(1))

    model.memory_and_write_shares = spy_memory_and_write_shares
    handle = attention.register_forward_hook(record_keys, with_kwargs=True)
    try:
        group = [s for s in batches(task, "test", max_tokens=1000) if s["position"].group == 0]
        _decode(task, model, group)
    finally:
        handle.remove()
        del model.memory_and_write_shares

    for record in per_sentence_step:
        slots, lanes, dim = record["given"].shape
        keys = attention.k_proj(record["given"])  # slots x lanes x dim
        heads = attention.num_heads
        expected = keys.view(slots, lanes * heads, dim // heads).transpose(0, 1)
        expected = expected.reshape(lanes, heads * slots * (dim // heads))
        assert len(record["keys"]) > 2, "expected several beam steps"
        for cached in record["keys"]:
            assert torch.cdist(cached, expected).min(dim=1).values.max() < 1e-9, "memory moved within a sentence"
    later = [record for record in per_sentence_step if record["previous"] is not None]
    assert len(later) == len(per_sentence_step) - 1
    for record in later:
        change_per_lane = (record["given"] - record["previous"]).abs().amax(dim=(0, 2))
        assert change_per_lane.min() > 1e-3, "a lane's memory did not move after its sentence"


@pytest.mark.parametrize("memory_layers,prefix,options", [
    ("-1", False, []), ("0,1", False, []), ("-1", True, []), ("0,1", False, ["--memory-read-positions"]),
], ids=["top", "two-layers", "prefix", "two-layers-read-positions"])
def test_states_recorded_during_beam_search_are_those_of_the_chosen_hypothesis(data_bin, memory_layers, prefix,
                                                                                 options):
    """What a lane carries out of decoding is what a teacher-forced pass over its best
    hypothesis records, in every decoder memory layer, though the sentences of one batch finish
    at different beam steps with hypotheses of different lengths. With a forced prefix that
    ends in eos (fairseq-generate --prefix-size), fairseq copies the first beam onto the others
    behind the decoder's back: the carry then comes from a pass of its own. (A layer's states
    follow the reads of the memory layers below it, step by step as in a whole pass.)"""
    task, model, _, _ = build(data_bin, *TINY_MODEL, "--memory-layers", memory_layers, *options)
    make_reads_nonzero(model)
    with torch.no_grad():  # an untrained model's eos logit, made large in either sign: hypotheses end early or late
        model.decoder.output_projection.weight[task.target_dictionary.eos()] *= 10
    model = model.eval().double()
    carry_out = model.carry_out
    compared = []

    def compare_with_teacher_forcing(context, lanes, net_input, target, encoding, decoder_extra=None):
        assert (decoder_extra is None) == prefix, "records taken where they cannot be trusted, or not taken"
        recorded = carry_out(context, lanes, net_input, target, encoding, decoder_extra)
        forced = carry_out(context, lanes, net_input, target, encoding)
        for name, mask in forced.padding_mask.items():
            if name.startswith("decoder"):
                assert torch.equal(recorded.padding_mask[name], mask)
                kept = ~mask.t().unsqueeze(-1)
                # fairseq's incremental attention takes its softmax in float32, even in a double model
                assert torch.allclose(recorded.states[name] * kept, forced.states[name] * kept, atol=1e-6)
        compared.append(target.ne(task.target_dictionary.pad()).sum(1))
        return recorded

    model.carry_out = compare_with_teacher_forcing
    try:
        _decode(task, model, batches(task, "test", max_tokens=1000), prefix=prefix)
    finally:
        del model.carry_out
    assert len(compared) > 3
    assert any(lengths.min() < lengths.max() for lengths in compared), "expected hypotheses of different lengths"


@pytest.mark.parametrize("unsupported", ["print_alignment", "score_reference"])
def test_generation_options_without_document_context_are_refused_up_front(data_bin, unsupported):
    """fairseq computes alignments (and reference scores) in a pass of its own, which would
    not read the document's context: refused before anything is decoded."""
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    with pytest.raises(NotImplementedError, match=f"--{unsupported.replace('_', '-')} is not supported"):
        task.build_generator([model], argparse.Namespace(**{unsupported: "hard"}))


def test_a_beam_of_0_is_refused_by_name(data_bin):
    """fairseq's beam search fails on it with a torch error from deep inside."""
    from memory_nmt.pipeline.option_ranges import OptionError

    task, model, _, _ = build(data_bin, *TINY_MODEL)
    with pytest.raises(OptionError, match="^--beam 0: give 1 or more"):
        task.build_generator([model], argparse.Namespace(beam=0))
