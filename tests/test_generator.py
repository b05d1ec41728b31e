"""Document decoding: batching across documents changes nothing, and the memory stays fixed
during a sentence's beam search and moves after it."""
import torch

from conftest import TINY_MODEL, batches, build, make_reads_nonzero
from memory_nmt.generator import DocumentSequenceGenerator


def _decoding_model(data_bin):
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    make_reads_nonzero(model)
    return task, model.eval().double()


def _decode(task, model, steps):
    generator = DocumentSequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=12)
    hypotheses = {}
    for sample in steps:
        sample = dict(sample, net_input=dict(sample["net_input"]))
        for sentence, best in zip(sample["id"].tolist(), generator.generate([model], sample)):
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


def test_memory_fixed_during_beam_search_and_updated_after(data_bin):
    task, model = _decoding_model(data_bin)
    unit = model.memory_units()["decoder.1"]
    per_sentence_step = []
    read_memory = model.read_memory

    def spy_read_memory(carry, lanes):
        memory = read_memory(carry, lanes)
        previous = carry.memory["decoder.1"] if carry is not None else None  # what the lanes read before
        per_sentence_step.append({"given": memory["decoder.1"], "previous": previous, "read": []})
        return memory

    def record_read(module, args):
        per_sentence_step[-1]["read"].append(args[1])

    model.read_memory = spy_read_memory
    handle = unit.read_attn.register_forward_pre_hook(record_read)
    try:
        group = [s for s in batches(task, "test", max_tokens=1000) if s["position"].group == 0]
        _decode(task, model, group)
    finally:
        handle.remove()
        del model.read_memory

    for record in per_sentence_step:
        given = record["given"].transpose(0, 1).flatten(1)  # lanes x (slots*dim)
        assert len(record["read"]) > 2, "expected several beam steps"
        for memory in record["read"][:-1]:  # the last read is the pass over the chosen hypotheses
            rows = memory.transpose(0, 1).flatten(1)
            assert torch.cdist(rows, given).min(dim=1).values.max() == 0, "memory moved within a sentence"
    later = [record for record in per_sentence_step if record["previous"] is not None]
    assert len(later) == len(per_sentence_step) - 1
    for record in later:
        change_per_lane = (record["given"] - record["previous"]).abs().amax(dim=(0, 2))
        assert change_per_lane.min() > 1e-3, "a lane's memory did not move after its sentence"
