"""The decoder pass the concatenation and local+global models run (``systems/decoder_pass.py``) computes
what fairseq's own decoder computes, given fairseq's layers and nothing more to read: over whole
sentences (padded rows and a single column too), step by step in incremental decoding, and with the
alignment options fairseq-generate passes."""
import pytest
import torch

from conftest import TINY_DIMS, batches, build
from memory_nmt.systems.decoder_pass import decoder_features

PLAIN = ["--arch", "transformer", *TINY_DIMS]
LAYOUTS = {"post-norm": [], "mbart": ["--encoder-normalize-before", "--decoder-normalize-before",
                                      "--encoder-learned-pos", "--decoder-learned-pos", "--layernorm-embedding"]}


@pytest.fixture(scope="module", params=LAYOUTS)
def decoding(request, data_bin):
    """(decoder, encoder_out, target tokens of a batch with padded rows), in evaluation."""
    task, model, _, _ = build(data_bin, *PLAIN, *LAYOUTS[request.param], task="translation")
    model.eval()
    sample = next(sample for sample in batches(task, "test")
                  if bool(sample["net_input"]["prev_output_tokens"].eq(model.decoder.padding_idx).any()))
    tokens = sample["net_input"]["prev_output_tokens"]
    with torch.no_grad():
        encoder_out = model.encoder(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"])
    return model.decoder, encoder_out, tokens


def same(ours, theirs):
    (x, extra), (y, expected) = ours, theirs
    assert torch.equal(x, y)
    assert all(a is b is None or torch.equal(a, b) for a, b in zip(extra["attn"], expected["attn"]))
    assert all(torch.equal(a, b) for a, b in zip(extra["inner_states"], expected["inner_states"]))


@pytest.mark.parametrize("options", [{}, {"alignment_layer": 0, "alignment_heads": 2}, {"full_context_alignment": True}],
                         ids=["default", "alignment", "full-context"])
def test_whole_sentences_are_fairseqs(decoding, options):
    decoder, encoder_out, tokens = decoding
    with torch.no_grad():
        for given in (tokens, tokens[:, :1]):
            same(decoder_features(decoder, given, given.size(1), encoder_out, **options),
                 decoder.extract_features(given, encoder_out, **options))


def test_incremental_decoding_is_fairseqs_step_by_step(decoding):
    decoder, encoder_out, tokens = decoding
    unpadded = tokens[:, :3]  # the first columns: beam search's tokens hold no padding
    assert not bool(unpadded.eq(decoder.padding_idx).any())
    ours, theirs = {}, {}
    with torch.no_grad():
        for step in range(1, unpadded.size(1) + 1):
            same(decoder_features(decoder, unpadded[:, :step], 1, encoder_out, ours),
                 decoder.extract_features(unpadded[:, :step], encoder_out, theirs))
