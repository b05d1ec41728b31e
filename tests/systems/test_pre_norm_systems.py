"""Pre-norm layers (NLLB's; mBART's, with learned positions and an embedding LayerNorm) in the
concatenation, associated memory and local+global systems: started from a plain pre-norm
transformer's weights, each computes that transformer where it has no context (the concatenation
model and the AMN at a document's first sentence, the local+global model on chunks of one
sentence) and translates there as fairseq's generator does; with context its output depends on
the context; the AMN and the global layer read the normalised residual stream where the papers
read a post-norm output, through LayerNorms that are context parameters (none added to post-norm
models); the options still refused stay refused."""
import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from conftest import AMN, CONCAT, LOCAL_GLOBAL, TINY_DIMS, Recorder, batches, build, check_context_reach, walk
from memory_nmt.pipeline.context_parameters import is_context_parameter
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt.pipeline.sentence_encoding import SentenceEncoding
from memory_nmt.systems.local_global.global_context import ChunkWords, GlobalContextLayer
from memory_nmt.systems.previous_sentences import unpadded

PLAIN = ["--arch", "transformer", *TINY_DIMS]
PRE_NORM = ["--encoder-normalize-before", "--decoder-normalize-before"]
LAYOUTS = {  # NLLB's pre-norm layers; mBART's, with learned positions and the embedding LayerNorm
    "pre-norm": PRE_NORM,
    "mbart": [*PRE_NORM, "--encoder-learned-pos", "--decoder-learned-pos", "--layernorm-embedding"],
}
CHUNK_OF_ONE = [*LOCAL_GLOBAL, "--global-layer", "extra", "--chunk-sentences", "1"]
CHUNKS_OF_THREE = [*LOCAL_GLOBAL, "--global-layer", "extra", "--chunk-sentences", "3"]
SYSTEMS = {  # the system, and whether it computes the plain transformer's sums in the same order
    "concat": ([*CONCAT, "--source-context", "1", "--target-context", "1"], True),
    "amn": (AMN, True),
    # Transformer-XL's self-attention adds its (zero) relative position terms: the scores are the
    # same sums in another order
    "local-global": (CHUNK_OF_ONE, False),
}


def encoder_output(logits, extra, row):
    """A row's encoder output at its real (unpadded) source positions."""
    encoder_out = extra["encoding"].encoder_out
    return encoder_out["encoder_out"][0][:, row][~encoder_out["encoder_padding_mask"][0][row]]


def fairseqs_net_input(sample):
    """``sample`` as fairseq's translation batches have it: without where each sentence stands in its chunk."""
    return dict(sample, net_input={k: v for k, v in sample["net_input"].items() if not k.startswith("chunk_")})


def plain_and_system(data_bin, layout, *system):
    """A plain pre-norm transformer and the system (same layout) started from its weights, for evaluation."""
    _, plain, _, _ = build(data_bin, *PLAIN, *LAYOUTS[layout], "--seed", "3", task="translation")
    task, model, _, cfg = build(data_bin, *system, *LAYOUTS[layout], "--seed", "4")
    model.load_state_dict(plain.state_dict(), model_cfg=cfg.model)
    return task, plain.eval(), model.eval()


def with_random_context_parameters(model, seed=0):
    """Every context parameter random (several start at zero, or as the identity), so that what
    the context adds is not vacuous."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if is_context_parameter(parameter):
                parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.3)
    return model


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("system", SYSTEMS)
def test_without_context_the_system_is_the_pre_norm_transformer(data_bin, system, layout):
    """Where the system has no context (a document's first sentence; every sentence in chunks of
    one), its encoder output and logits are the transformer's and the document generator's
    translations and scores fairseq's generator's."""
    options, same_sums = SYSTEMS[system]
    task, plain, model = plain_and_system(data_bin, layout, *options)
    steps = batches(task, "test")
    without_context = [s["position"].step == 0 or system == "local-global" for s in steps]
    with torch.no_grad():
        expected = {}
        for sample in map(fairseqs_net_input, steps):
            logits, _ = plain(**sample["net_input"])
            encoded = {"encoding": SentenceEncoding(plain.encoder(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]))}
            for row, sentence in enumerate(sample["id"].tolist()):
                expected[sentence] = (logits[row], encoder_output(None, encoded, row))
    logits, encoded = walk(model, steps), walk(model, steps, of_row=encoder_output)
    sentences = {i for s, exact in zip(steps, without_context) if exact for i in s["id"].tolist()}
    assert sentences and all(torch.equal(encoded[i], expected[i][1]) for i in sentences)
    if same_sums:
        assert all(torch.equal(logits[i], expected[i][0]) for i in sentences)
    else:
        assert max((logits[i] - expected[i][0]).abs().max().item() for i in sentences) < 1e-4
    assert all(not torch.allclose(logits[i], expected[i][0]) for i in set(expected) - sentences)

    plain_generator = SequenceGenerator([plain], task.target_dictionary, beam_size=3, max_len_b=12)
    _, trace = Recorder(task, model).decode(steps)
    for (sample, _, hypotheses), exact in zip(trace, without_context):
        if exact:
            for got, wanted in zip(hypotheses, plain_generator.generate([plain], fairseqs_net_input(sample))):
                assert got[0]["tokens"].tolist() == wanted[0]["tokens"].tolist()
                if same_sums:
                    assert got[0]["score"] == wanted[0]["score"]
                else:
                    assert abs(got[0]["score"] - wanted[0]["score"]) < 1e-5


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("system, of_row", [("concat", None), ("amn", encoder_output)])
def test_with_context_a_sentence_reads_the_previous_one_and_nothing_else(data_bin, system, layout, of_row):
    task, _, model = plain_and_system(data_bin, layout, *SYSTEMS[system][0])
    steps = batches(task, "test", max_tokens=100)
    assert len([s for s in steps if s["position"].group == 0]) >= 3 and steps[0]["lanes"].numel() >= 2
    check_context_reach(with_random_context_parameters(model), steps, task.source_dictionary, reach=1,
                        **({"of_row": of_row, "threshold": 1e-4} if of_row else {}))


def with_first_sentence_rolled(steps, dictionary):
    """``steps`` with the words of the first step's first sentence rolled, in the chunk source the
    local+global model encodes (its first row) as in ``src_tokens``."""
    changed = [dict(s, net_input=dict(s["net_input"])) for s in steps]
    net_input = changed[0]["net_input"]
    assert torch.equal(unpadded(net_input["src_tokens"], dictionary.pad())[0],
                       unpadded(net_input["chunk_src_tokens"], dictionary.pad())[0])
    for key in ("src_tokens", "chunk_src_tokens"):
        tokens = net_input[key].clone()
        words = tokens[0].ge(dictionary.nspecial)
        tokens[0, words] = torch.roll(tokens[0, words], 1)
        net_input[key] = tokens
    return changed


@pytest.mark.parametrize("layout", LAYOUTS)
def test_with_context_a_chunks_sentences_read_each_other_and_nothing_else(data_bin, layout):
    """Chunks of 3: a chunk's first sentence changes the next two sentences of its document (the
    global layer, and the previous sentence the decoder reads), and nothing else."""
    task, _, model = plain_and_system(data_bin, layout, *CHUNKS_OF_THREE)
    with_random_context_parameters(model)
    steps = batches(task, "test", max_tokens=100)
    reference = walk(model, steps)
    perturbed = walk(model, with_first_sentence_rolled(steps, task.source_dictionary))
    victim, reached = int(steps[0]["lanes"][0]), 0
    for sample in steps[1:]:
        for sentence, lane in zip(sample["id"].tolist(), sample["lanes"].tolist()):
            difference = (reference[sentence] - perturbed[sentence]).abs().max().item()
            if sample["position"].group == 0 and lane == victim and sample["position"].step <= 2:
                assert difference > 1e-3, f"sentence {sentence} ignores a sentence of its chunk"
                reached += 1
            else:
                assert difference == 0, f"sentence {sentence} read a sentence outside its chunk"
    assert reached == 2


@pytest.mark.parametrize("options, added", [
    (AMN, ["encoder.context_network.source_layer_norm"]),
    ([*AMN, "--stacked-context-encoder"], ["encoder.context_network.source_layer_norm",
                                           "encoder.context_network.context_encoder.layer_norm"]),
    (CHUNKS_OF_THREE, []),  # the global layer's LayerNorm moves to its input
    (CONCAT, []),
], ids=["amn", "amn-stacked", "local-global", "concat"])
def test_pre_norm_adds_only_context_layer_norms_that_a_transformer_leaves_fresh(data_bin, options, added):
    """A pre-norm model has the post-norm model's parameters, fairseq's final LayerNorms and the
    system's own LayerNorms for the stream it reads, which are context parameters: a plain pre-norm
    transformer's weights leave them as initialised (the plain normalisation)."""
    _, post_norm, _, _ = build(data_bin, *options)
    task, plain, model = plain_and_system(data_bin, "mbart", *options)
    fairseqs = set(plain.state_dict()) - set(build(data_bin, *PLAIN, task="translation")[1].state_dict())
    names = {name for name, _ in model.named_parameters()}
    new = {name.rsplit(".", 1)[0] for name in names - {n for n, _ in post_norm.named_parameters()} - fairseqs}
    assert new == set(added)
    for name, parameter in model.named_parameters():
        if name.rsplit(".", 1)[0] in added:
            assert is_context_parameter(parameter)
            assert torch.equal(parameter, torch.ones_like(parameter) if name.endswith("weight") else torch.zeros_like(parameter))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_amn_reads_the_stream_after_self_attention_and_gates_the_encoders_output(data_bin, layout):
    """x' is the top layer's residual stream after its self-attention block through the CAMN's own
    LayerNorm (not the feed-forward block's); H_source is fairseq's encoder output, after its final
    LayerNorm: a gate forced open gives exactly the transformer's encoder output."""
    task, plain, model = plain_and_system(data_bin, layout, *AMN)
    network = model.encoder.context_network
    with torch.no_grad():
        network.source_layer_norm.weight.mul_(2.0)
        network.source_layer_norm.bias.add_(0.5)
    sample = batches(task, "test")[1]
    src_tokens, src_lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
    context_tokens = model.collate_context([[sentence] for sentence in unpadded(src_tokens, model.encoder.padding_idx)])
    streams, queries = [], []
    top = model.encoder.layers[-1]
    handles = [
        top.final_layer_norm.register_forward_hook(lambda module, inputs, output: streams.append(inputs[0])),
        network.attention.register_forward_pre_hook(lambda module, inputs: queries.append(inputs[0])),
    ]
    try:
        with torch.no_grad():
            gated = model.encoder(src_tokens, src_lengths, context_tokens=context_tokens)["encoder_out"][0]
    finally:
        for handle in handles:
            handle.remove()
    (stream,), (query,) = streams, queries
    assert torch.equal(query, network.source_layer_norm(stream))
    assert not torch.allclose(query, top.final_layer_norm(stream), atol=1e-3)
    with torch.no_grad():
        plain_output = plain.encoder(src_tokens, src_lengths)["encoder_out"][0]
        assert not torch.allclose(gated, plain_output, atol=1e-3)
        network.gate.proj.bias.fill_(1e4)
        opened = model.encoder(src_tokens, src_lengths, context_tokens=context_tokens)["encoder_out"][0]
    assert torch.equal(opened, plain_output)


@pytest.mark.parametrize("layout", ["post-norm", *LAYOUTS])
def test_the_amn_encoder_runs_its_layers_as_fairseqs_encoder_does(data_bin, layout):
    """The AMN's encoder runs its layers itself, to take x' between the top layer's two blocks: without
    context its whole output (every key, all hidden states too) is bit for bit fairseq's encoder's with
    the same weights, in training (dropout drawn alike) and in evaluation, on padded rows."""
    dropouts = ["--dropout", "0.3", "--attention-dropout", "0.1", "--activation-dropout", "0.1"]
    _, plain, _, _ = build(data_bin, *PLAIN, *LAYOUTS.get(layout, []), *dropouts, "--seed", "3", task="translation")
    task, model, _, cfg = build(data_bin, *AMN, *LAYOUTS.get(layout, []), *dropouts, "--seed", "4")
    model.load_state_dict(plain.state_dict(), model_cfg=cfg.model)
    sample = batches(task, "test")[1]
    src_tokens, src_lengths = sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"]
    assert bool(src_tokens.eq(model.encoder.padding_idx).any())
    for training, all_hiddens in ((True, True), (True, False), (False, True)):
        plain.train(training), model.train(training)
        torch.manual_seed(5)
        theirs = plain.encoder(src_tokens, src_lengths, return_all_hiddens=all_hiddens)
        torch.manual_seed(5)
        ours = model.encoder(src_tokens, src_lengths, return_all_hiddens=all_hiddens)
        assert ours.keys() == theirs.keys()
        for key, values in theirs.items():
            assert len(ours[key]) == len(values), key
            assert all(a is b is None or torch.equal(a, b) for a, b in zip(ours[key], values)), (key, training)


@pytest.mark.parametrize("gated", [True, False], ids=["gate", "no-fusion-gate"])
def test_the_pre_norm_global_layer_fuses_the_stream_it_reads_normalised(gated):
    """Pre-norm: r = LayerNorm(x), h^G from r, g = sigmoid(W_g [r; h^G]), the fused stream
    (1 - g) x + g h^G (without the gate x + h^G); a gate of 1/2 is exactly half the residual sum,
    which the encoder's final LayerNorm does not tell apart (as in post-norm)."""
    torch.manual_seed(0)
    layer = GlobalContextLayer(16, 4, 2, 0.0, 0.0, gated=gated, normalize_before=True).eval()
    with torch.no_grad():
        layer.layer_norm.weight.normal_()
        stream = torch.randn(2, 5, 16) * 4
        segments = torch.tensor([[0, 0, 1, 1, 2], [0, 1, 1, 2, 2]])
        padding = torch.zeros(2, 5, dtype=torch.bool)
        fused, _ = layer(stream, segments, padding)
        read = layer.layer_norm(stream)
        global_, _ = layer.attention(read, segments, padding)
        if gated:
            gate = torch.sigmoid(layer.gate(torch.cat([read, global_], dim=-1)))
            assert torch.equal(fused, (1 - gate) * stream + gate * global_)
            layer.gate.weight.zero_()
            layer.gate.bias.zero_()
            assert torch.equal(2 * layer(stream, segments, padding)[0], stream + global_)
        else:
            assert torch.equal(fused, stream + global_)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_pre_norm_global_layer_sits_before_the_encoders_final_layer_norm(data_bin, layout):
    """The global layer reads the last local layer's output (the residual stream), and the
    encoder's output is fairseq's final LayerNorm of what it gives."""
    task, _, model = plain_and_system(data_bin, layout, *CHUNKS_OF_THREE)
    with_random_context_parameters(model)
    sample = batches(task, "test")[0]
    net_input = sample["net_input"]
    streams, fused = [], []
    handles = [
        model.encoder.layers[-1].register_forward_hook(lambda module, inputs, output: streams.append(output)),
        model.encoder.global_context.register_forward_hook(lambda module, inputs, output: fused.append((inputs[0], output[0]))),
    ]
    try:
        with torch.no_grad():
            carry = model.starting_carry(sample["lanes"], torch.arange(sample["lanes"].numel()), net_input)
    finally:
        for handle in handles:
            handle.remove()
    (stream,), ((read, given),) = streams, fused
    lengths = net_input["chunk_lengths"]
    chunk_ids = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    positions = torch.arange(chunk_ids.numel()) - torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    words = ChunkWords.of(net_input["chunk_src_tokens"].eq(model.encoder.padding_idx), chunk_ids, positions)
    several = words.sentences > 1
    assert bool(several.any()) and not bool(several.all()), "chunks of one sentence and of several"
    assert torch.equal(read, words.gather(stream))
    with torch.no_grad():
        expected = model.encoder.layer_norm(words.scatter(torch.where(several[:, None, None], given, read), stream))
    assert torch.equal(carry.encoded[chunk_ids, positions].transpose(0, 1), expected)


@pytest.mark.parametrize("options, refused", [
    ([*AMN, "--encoder-layerdrop", "0.1"], "transformer_associated_memory does not support --encoder-layerdrop"),
    ([*AMN, "--checkpoint-activations"], "transformer_associated_memory does not support --checkpoint-activations"),
    ([*CHUNKS_OF_THREE, "--checkpoint-activations"], "transformer_local_global does not support --checkpoint-activations"),
    ([*CHUNKS_OF_THREE, "--cross-self-attention"], "transformer_local_global does not support --cross-self-attention"),
    ([*CHUNKS_OF_THREE, "--decoder-layerdrop", "0.1"], "transformer_local_global does not support --decoder-layerdrop"),
], ids=["amn-layerdrop", "amn-checkpointing", "local-global-checkpointing", "local-global-cross-self-attention",
        "local-global-layerdrop"])
def test_what_pre_norm_layers_do_not_change_is_still_refused(data_bin, options, refused):
    with pytest.raises(OptionError, match=refused):
        build(data_bin, *options, *LAYOUTS["mbart"])
