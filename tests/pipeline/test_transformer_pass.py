"""The passes over fairseq's layers every system of the plugin runs (``pipeline/transformer_pass.py``)
compute what fairseq's own encoder and decoder compute, given fairseq's layers and nothing more to read:
the encoder with and without its hidden states, the decoder over whole sentences (padded rows and a
single column too), step by step in incremental decoding, and with the alignment options
fairseq-generate passes."""
import pytest
import torch

from conftest import TINY_DIMS, batches, build
from memory_nmt.pipeline.layer_blocks import feed_forward_block, self_attention_block, source_attention_block
from memory_nmt.pipeline.transformer_pass import decoder_features, encoder_features

PLAIN = ["--arch", "transformer", *TINY_DIMS]
LAYOUTS = {"post-norm": [], "mbart": ["--encoder-normalize-before", "--decoder-normalize-before",
                                      "--encoder-learned-pos", "--decoder-learned-pos", "--layernorm-embedding"]}


@pytest.fixture(scope="module", params=LAYOUTS)
def model_and_batch(request, data_bin):
    """(fairseq's transformer in evaluation, with dropout for training, and a batch whose source and target
    rows are padded)."""
    task, model, _, _ = build(data_bin, *PLAIN, *LAYOUTS[request.param], "--dropout", "0.2", "--activation-dropout",
                              "0.1", task="translation")
    model.eval()
    sample = next(sample for sample in batches(task, "test")
                  if bool(sample["net_input"]["prev_output_tokens"].eq(model.decoder.padding_idx).any())
                  and bool(sample["net_input"]["src_tokens"].eq(model.encoder.padding_idx).any()))
    return model, sample["net_input"]


@pytest.fixture
def decoding(model_and_batch):
    """(decoder, encoder_out, target tokens of a batch with padded rows)."""
    model, net_input = model_and_batch
    with torch.no_grad():
        encoder_out = model.encoder(net_input["src_tokens"], net_input["src_lengths"])
    return model.decoder, encoder_out, net_input["prev_output_tokens"]


def test_the_layer_blocks_are_fairseqs_layers(model_and_batch):
    """The blocks the plugin's layers and packed passes run compute fairseq's encoder and decoder layers,
    dropout included (in training, from the same random state)."""
    model, net_input = model_and_batch
    model.train()
    try:
        tokens = net_input["src_tokens"]
        padding = tokens.eq(model.encoder.padding_idx)
        x = torch.randn(tokens.size(1), tokens.size(0), model.encoder.embed_tokens.embedding_dim)
        encoder, decoder = model.encoder.layers[0], model.decoder.layers[0]
        torch.manual_seed(3)
        theirs = encoder(x, encoder_padding_mask=padding)
        torch.manual_seed(3)
        assert torch.equal(feed_forward_block(encoder, self_attention_block(encoder, x, padding)), theirs)
        y = torch.randn(5, tokens.size(0), model.decoder.embed_tokens.embedding_dim)
        future = model.decoder.buffered_future_mask(y)
        torch.manual_seed(4)
        theirs, _, _ = decoder(y, x, padding, self_attn_mask=future)
        torch.manual_seed(4)
        ours, _ = source_attention_block(decoder, self_attention_block(decoder, y, None, future), x, padding)
        assert torch.equal(feed_forward_block(decoder, ours), theirs)
    finally:
        model.eval()


@pytest.mark.parametrize("return_all_hiddens", [False, True])
def test_the_encoder_is_fairseqs(model_and_batch, return_all_hiddens):
    model, net_input = model_and_batch
    with torch.no_grad():
        theirs = model.encoder(net_input["src_tokens"], net_input["src_lengths"], return_all_hiddens)
        ours, records = encoder_features(model.encoder, net_input["src_tokens"], return_all_hiddens=return_all_hiddens)
    assert ours.keys() == theirs.keys() and records == [None] * len(model.encoder.layers)
    for key, expected in theirs.items():
        assert len(ours[key]) == len(expected), key
        assert all(a is b is None or torch.equal(a, b) for a, b in zip(ours[key], expected)), key


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
            same(decoder_features(decoder, given, given.size(1), encoder_out, **options)[:2],
                 decoder.extract_features(given, encoder_out, **options))


def test_incremental_decoding_is_fairseqs_step_by_step(decoding):
    decoder, encoder_out, tokens = decoding
    unpadded = tokens[:, :3]  # the first columns: beam search's tokens hold no padding
    assert not bool(unpadded.eq(decoder.padding_idx).any())
    ours, theirs = {}, {}
    with torch.no_grad():
        for step in range(1, unpadded.size(1) + 1):
            same(decoder_features(decoder, unpadded[:, :step], 1, encoder_out, ours)[:2],
                 decoder.extract_features(unpadded[:, :step], encoder_out, theirs))


def test_packed_rows_are_refused_step_by_step(decoding):
    """Packed rows are whole sentences: the decoder's pass refuses them with an incremental state."""
    decoder, encoder_out, tokens = decoding
    with pytest.raises(ValueError, match="packed rows are whole sentences"):
        decoder_features(decoder, tokens[:, :2], 1, encoder_out, {}, confinement=object())
