"""transformer_local_global (Zheng et al., 2020): local layers read their own sentence only, the global
layer its own chunk only, with the sentence distances of eq. 1; the paper's layout (N-1 local layers,
then the global layer) and the layout of older checkpoints; Figure 4's sentence attention; the
previous target sentence takes no gradient; training on whole chunks computes what decoding sentence
by sentence computes; a chunk of one sentence is the sentence model's translation; batching changes
nothing; and the stock CLIs, interactive mode and the hub run it. The ablations of Table 3:
test_local_global_ablations.py."""
import re

import pytest
import torch
from fairseq.data import data_utils
from fairseq.sequence_generator import SequenceGenerator

from commands import run_command
from conftest import (
    COMMON, LOCAL_GLOBAL, PLUGIN, TINY_DIMS, Recorder, batches, build, check_clis_and_hub_translate_alike,
    check_hypotheses_score_as_teacher_forced, fairseq_command, fitted_parameters, lane_steps, run, save_checkpoint, walk,
)
from memory_nmt.pipeline.checkpoint_fit import CheckpointMismatchError
from memory_nmt.pipeline.context_parameters import is_context_parameter
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt.pipeline.planners import EpochRequest, WholeChunks
from memory_nmt.systems.local_global.global_context import ChunkWords, SegmentRelativeAttention, sentence_attention

ADDED_OPTIONS = ("global_layer", "no_document_encoding", "no_word_position_reset", "no_segment_embedding",
                 "no_relative_attention", "no_fusion_gate", "no_transformer_xl_decoder")


def local_global_model(data_bin, chunk, *more, seed=0):
    """A model whose context parameters are random (they start at zero, which would make the
    context tests vacuous), in double precision, for evaluation."""
    task, model, criterion, _ = build(data_bin, *LOCAL_GLOBAL, "--chunk-sentences", str(chunk), *more)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if is_context_parameter(parameter):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    return task, model.double().eval(), criterion


def whole_chunk_batches(task, split, chunk, max_tokens=400):
    task.load_dataset(split)
    planned = WholeChunks(chunk).plan(task.dataset(split), EpochRequest(max_tokens, None))
    return [step.collate(planned.items.dataset) for (step,) in planned.items.items]


def real_logits(task, split, logits):
    """Each sentence's logits without its target padding."""
    sizes = task.dataset(split).pairs.tgt_sizes
    return {sentence: rows[: sizes[sentence]] for sentence, rows in logits.items()}


def test_whole_chunks_compute_what_sentence_by_sentence_computes(data_bin):
    """Training reads the previous sentence's row of the same batch; validation and decoding read
    what the lane carried: the same function."""
    task, model, _ = local_global_model(data_bin, 3, "--max-relative-sentences", "1")
    whole = real_logits(task, "valid", walk(model, whole_chunk_batches(task, "valid", 3)))
    stepwise = real_logits(task, "valid", walk(model, batches(task, "valid")))
    assert sorted(whole) == sorted(stepwise) == list(range(len(task.dataset("valid"))))
    assert max((whole[i] - stepwise[i]).abs().max().item() for i in whole) < 1e-5
    alone_task, alone, _ = local_global_model(data_bin, 1)
    alone = real_logits(alone_task, "valid", walk(alone, batches(alone_task, "valid")))
    assert all((alone[i] - stepwise[i]).abs().max().item() > 1e-3 for i in whole), "every sentence reads its chunk"


def test_local_layers_read_their_sentence_and_the_global_layer_its_chunk(data_bin):
    """Documents of 2-6 sentences in chunks of 2: a perturbed sentence changes the local encoding of
    no other sentence, and the final encoding of the other sentence of its chunk only (not the
    other chunks of its document, nor other documents)."""
    task, model, _ = local_global_model(data_bin, 2)
    (sample,) = whole_chunk_batches(task, "valid", 2, max_tokens=4000)
    net_input, lanes = sample["net_input"], sample["lanes"]
    documents = task.dataset("valid").documents
    document_of = {i: d.doc_id for d in documents for i in range(d.first, d.first + d.length)}
    ids = sample["id"].tolist()
    victim = next(row for row, i in enumerate(ids) if sum(document_of[j] == document_of[i] for j in ids) >= 4)

    def encode(src_tokens):
        local = []
        handle = model.encoder.layers[-1].register_forward_hook(lambda m, i, out: local.append(out))
        try:
            with torch.no_grad():
                context = model.sentence_context(model.starting_carry(lanes, torch.arange(lanes.numel()), net_input), net_input, 0)
                out = model.encode(src_tokens, chunk_positions=net_input["chunk_positions"], **context.inputs)
        finally:
            handle.remove()
        return local[0], out.encoder_out["encoder_out"][0]

    local, final = encode(net_input["src_tokens"])
    tokens = net_input["src_tokens"].clone()
    content = tokens[victim].ge(task.source_dictionary.nspecial)
    tokens[victim, content] = torch.roll(tokens[victim, content], 1)
    perturbed_local, perturbed_final = encode(tokens)
    same_chunk = lanes.eq(lanes[victim])
    assert int(same_chunk.sum()) == 2
    for row in range(len(ids)):
        if row == victim:
            continue
        assert torch.equal(local[:, row], perturbed_local[:, row]), "a local layer read another sentence"
        changed = (final[:, row] - perturbed_final[:, row]).abs().max().item()
        if same_chunk[row]:
            assert changed > 1e-3, "the global layer ignores a sentence of its chunk"
        else:
            assert changed == 0, f"row {row} (document {document_of[ids[row]]}) read another chunk"


@pytest.mark.parametrize("layout, local", [("top", 2), ("extra", 3)])
def test_the_papers_layout_has_n_encoder_layers_the_last_of_them_global(data_bin, layout, local):
    """--encoder-layers 3: by default (top, the paper's) 2 local layers and the global layer, 3 in
    all; extra keeps 3 local layers under it. The global layer reads the last local layer's output."""
    options = ("--encoder-layers", "3") + (("--global-layer", layout) if layout == "extra" else ())
    task, model, _ = local_global_model(data_bin, 3, *options)
    assert model.args.global_layer == layout and len(model.encoder.layers) == local
    (sample,) = whole_chunk_batches(task, "valid", 3, max_tokens=4000)
    net_input, recorded = sample["net_input"], {}

    def keep(name, inputs):
        def hook(module, given, output):
            recorded[name] = given[0] if inputs else output
        return hook

    hooks = [model.encoder.layers[-1].register_forward_hook(keep("local", False)),
             model.encoder.global_context.register_forward_hook(keep("global", True))]
    try:
        with torch.no_grad():
            model.encoder(net_input["src_tokens"], chunk_positions=net_input["chunk_positions"],
                          chunk_ids=sample["lanes"])
    finally:
        for hook in hooks:
            hook.remove()
    words = ChunkWords.of(net_input["src_tokens"].eq(task.source_dictionary.pad()), sample["lanes"],
                          net_input["chunk_positions"])
    assert torch.equal(words.gather(recorded["local"]), recorded["global"])


def test_layouts_that_cannot_be_built_or_filled_are_refused_by_name(data_bin, sentence_checkpoint):
    from fairseq import checkpoint_utils

    with pytest.raises(OptionError, match="--encoder-layers 1 with --global-layer top leaves no local layer"):
        build(data_bin, *LOCAL_GLOBAL, "--encoder-layers", "1")
    _, model, _, cfg = build(data_bin, *LOCAL_GLOBAL)
    plain = checkpoint_utils.load_checkpoint_to_cpu(str(sentence_checkpoint))["model"]
    with pytest.raises(CheckpointMismatchError, match="finetune from it with --global-layer extra"):
        model.load_state_dict(plain, model_cfg=cfg.model)


def test_a_checkpoint_saved_before_the_layout_and_ablation_options_computes_as_before(data_bin, tmp_path):
    """Its saved options lack --global-layer and the ablation flags: it loads with the layout it was
    trained with (every --encoder-layers layer local, the global layer above) and every part, and
    computes what it computed."""
    from fairseq import checkpoint_utils

    task, model, _, cfg = build(data_bin, *LOCAL_GLOBAL, "--global-layer", "extra", "--chunk-sentences", "3")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if is_context_parameter(parameter):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    for option in ADDED_OPTIONS:
        delattr(cfg.model, option)
    save_checkpoint(model, cfg, tmp_path / "checkpoint.pt")
    (loaded,), _, loaded_task = checkpoint_utils.load_model_ensemble_and_task(
        [str(tmp_path / "checkpoint.pt")], arg_overrides={"data": str(data_bin)}
    )
    assert loaded.args.global_layer == "extra" and len(loaded.encoder.layers) == 2
    assert not any(getattr(loaded.args, option) for option in ADDED_OPTIONS[1:])
    model.eval()
    loaded.eval()
    expected, given = walk(model, batches(task, "valid")), walk(loaded, batches(loaded_task, "valid"))
    assert sorted(given) == sorted(expected) and all(torch.equal(given[i], expected[i]) for i in expected)


@pytest.mark.parametrize("relative", [True, False], ids=["relative", "no-relative-attention"])
def test_segment_relative_attention_follows_eq_1(relative):
    """Against a slow reference: logits (W^Q x_i)(W^K x_j + g^K_d) / sqrt(d_head), values
    W^V x_j + g^V_d, with d the query's sentence minus the key's, clipped to [-1, 1]; without
    relative attention, no g at all. The weights it gives out are the reference's."""
    torch.manual_seed(0)
    attention = SegmentRelativeAttention(embed_dim=8, heads=2, max_distance=1, dropout=0.0, relative=relative).double()
    assert hasattr(attention, "distance_keys") == relative
    x = torch.randn(2, 5, 8, dtype=torch.double)
    segments = torch.tensor([[0, 0, 1, 2, 3], [0, 1, 1, 0, 0]])
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    out, given_weights = attention(x, segments, padding)
    project = {name: getattr(attention, f"{name}_proj") for name in "qkv"}
    for chunk in range(2):
        for i in range(5):
            if padding[chunk, i]:
                continue
            heads = []
            for head in range(2):
                part = slice(4 * head, 4 * head + 4)
                q = project["q"](x[chunk, i])[part]
                logits, values = [], []
                for j in range(5):
                    if padding[chunk, j]:
                        continue
                    d = max(-1, min(1, int(segments[chunk, i] - segments[chunk, j]))) + 1
                    key, value = project["k"](x[chunk, j])[part], project["v"](x[chunk, j])[part]
                    if relative:
                        key, value = key + attention.distance_keys[d, part], value + attention.distance_values[d, part]
                    logits.append(q @ key / 2.0)
                    values.append(value)
                weights = torch.softmax(torch.stack(logits), 0)
                real = (~padding[chunk]).nonzero().squeeze(1)
                assert torch.allclose(given_weights[chunk, head, i, real], weights, atol=1e-12)
                heads.append(sum(w * v for w, v in zip(weights, values)))
            expected = attention.out_proj(torch.cat(heads))
            assert torch.allclose(out[chunk, i], expected, atol=1e-10)


def test_sentence_attention_is_figure_4s_mean_over_a_sentences_words():
    """alpha_{k kappa} = 1/|x_k| sum_i sum_j alpha^{kappa,j}_{k,i} (and the mean over heads), loop by
    loop, for two chunks with padding; each row sums to 1."""
    generator = torch.Generator().manual_seed(0)
    segments = torch.tensor([[0, 0, 1, 2, 2, 2], [0, 1, 1, 0, 0, 0]])
    padding = torch.tensor([[False] * 6, [False, False, False, True, True, True]])
    scores = torch.randn(2, 3, 6, 6, generator=generator, dtype=torch.double)
    weights = torch.softmax(scores.masked_fill(padding[:, None, None, :], float("-inf")), -1)
    by_sentence = sentence_attention(weights, segments, padding, sentences=3)
    for chunk in range(2):
        words = [i for i in range(6) if not padding[chunk, i]]
        for k in range(3):
            queries = [i for i in words if segments[chunk, i] == k]
            for kappa in range(3):
                keys = [j for j in words if segments[chunk, j] == kappa]
                expected = sum(float(weights[chunk, h, i, j]) for h in range(3) for i in queries for j in keys)
                expected /= 3 * max(len(queries), 1)
                assert by_sentence[chunk, k, kappa].item() == pytest.approx(expected, abs=1e-12)
    assert torch.allclose(by_sentence[0].sum(-1), torch.ones(3, dtype=torch.double))
    assert torch.allclose(by_sentence[1, :2].sum(-1), torch.ones(2, dtype=torch.double))


def test_the_global_layers_sentence_attention_is_read_from_a_chunk(data_bin):
    """The encoder gives Figure 4's weights of a chunk: its global layer's attention weights, averaged
    as sentence_attention says; one row per sentence, each summing to 1."""
    task, model, _ = local_global_model(data_bin, 4)
    task.load_dataset("valid")
    pairs = task.dataset("valid").pairs
    chunk = [pairs[i]["source"] for i in range(4)]
    src_tokens = data_utils.collate_tokens(chunk, task.source_dictionary.pad(), left_pad=True)
    recorded = []
    handle = model.encoder.global_context.attention.register_forward_hook(lambda m, i, out: recorded.append(out[1]))
    try:
        with torch.no_grad():
            weights = model.encoder.sentence_attention(src_tokens)
    finally:
        handle.remove()
    padding = src_tokens.eq(task.source_dictionary.pad())
    words = ChunkWords.of(padding, torch.zeros(4, dtype=torch.long), torch.arange(4))
    assert weights.shape == (4, 4) and torch.allclose(weights.sum(-1), torch.ones(4, dtype=weights.dtype))
    assert torch.equal(weights, sentence_attention(recorded[0], words.segments, words.padding, 4)[0])


def test_the_previous_target_sentence_takes_no_gradient(data_bin):
    """In a whole-chunk batch, the loss of later sentences only: the first sentences' decoder
    states get no gradient (they reach the next sentence stop-gradient), their encoder does."""
    task, model, criterion = local_global_model(data_bin, 3)
    model.float().train()
    (sample,) = whole_chunk_batches(task, "valid", 3, max_tokens=4000)
    first = sample["net_input"]["chunk_positions"].eq(0)
    sample = dict(sample, target=sample["target"].masked_fill(first.unsqueeze(1), task.target_dictionary.pad()))
    states = {"encoder": [], "decoder": []}

    def keep(side):
        def hook(module, inputs, output):
            output = output[0] if side == "decoder" else output  # a decoder layer returns (x, attn, _)
            output.retain_grad()
            states[side].append(output)
        return hook

    handles = [model.encoder.layers[0].register_forward_hook(keep("encoder"))]
    handles += [layer.register_forward_hook(keep("decoder")) for layer in model.decoder.layers]
    try:
        criterion.forward_window(model, lane_steps([sample]), backward=lambda loss: loss.backward())
    finally:
        for handle in handles:
            handle.remove()
    for decoder_states in states["decoder"]:
        assert decoder_states.grad[:, first].abs().sum() == 0
        assert decoder_states.grad[:, ~first].abs().sum() > 0
    assert states["encoder"][0].grad[:, first].abs().sum() > 0, "the global layer reads the first sentences"


@pytest.mark.parametrize("layout, plain_encoder_layers", [("extra", "2"), ("top", "1")])
def test_a_chunk_of_one_sentence_is_translated_as_by_the_sentence_model(data_bin, layout, plain_encoder_layers):
    """A plain transformer's weights in the model (2 encoder layers: all local with --global-layer
    extra; 1 with top, whose second layer is the global one): new parameters as initialised, chunks
    of one sentence; the same logits (up to the order of float sums) and the same translations."""
    _, plain, _, _ = build(data_bin, "--arch", "transformer", *TINY_DIMS, "--encoder-layers", plain_encoder_layers,
                           "--seed", "3", task="translation")
    task, model, _, cfg = build(data_bin, *LOCAL_GLOBAL, "--chunk-sentences", "1", "--global-layer", layout)
    model.load_state_dict(plain.state_dict(), model_cfg=cfg.model)
    plain.eval()
    model.eval()
    steps = batches(task, "test")
    plain_steps = [  # fairseq's batches: without where each sentence stands in its chunk
        dict(s, net_input={k: v for k, v in s["net_input"].items() if not k.startswith("chunk_")}) for s in steps
    ]
    with torch.no_grad():
        expected = {i: logits for s in plain_steps for i, logits in zip(s["id"].tolist(), plain(**s["net_input"])[0])}
    logits = walk(model, steps)
    assert max((logits[i] - expected[i]).abs().max().item() for i in expected) < 1e-4

    plain_generator = SequenceGenerator([plain], task.target_dictionary, beam_size=3, max_len_b=12)
    best, _ = Recorder(task, model).decode(steps)
    for sample in plain_steps:
        for sentence, hypotheses in zip(sample["id"].tolist(), plain_generator.generate([plain], sample)):
            assert best[sentence] == hypotheses[0]["tokens"].tolist()


def test_incremental_decoding_with_the_previous_sentence_equals_teacher_forcing(data_bin):
    task, model, _ = local_global_model(data_bin, 4)
    group = [s for s in batches(task, "test", max_tokens=1000) if s["position"].group == 0]
    _, trace = Recorder(task, model).decode(group)
    compared = check_hypotheses_score_as_teacher_forced(task, model, trace, atol=1e-6)
    assert compared > 20 and any(s["position"].step for s, _, _ in trace)


def test_batching_changes_no_translation_and_loses_no_sentence(data_bin):
    task, model, _ = local_global_model(data_bin, 3)
    results = []
    for options in ({"max_tokens": 1000}, {"max_tokens": None, "max_sentences": 1}, {"max_tokens": None, "max_sentences": 2}):
        best, _ = Recorder(task, model).decode(batches(task, "test", **options))
        assert sorted(best) == list(range(len(task.dataset("test")))), "every sentence exactly once"
        results.append(best)
    assert results[0] == results[1] == results[2]


def test_batches_hold_whole_chunks_within_max_tokens(data_bin):
    """Training: every sentence once, in a batch of whole chunks of one document each (cut every 4
    sentences from the document's start). Decoding: a chunk's first step brings its sentences,
    and --max-tokens bounds them too."""
    task, _, _ = local_global_model(data_bin, 4)
    for sample in batches(task, "valid", max_tokens=60):
        net_input = sample["net_input"]
        assert net_input["src_tokens"].numel() <= 60
        assert sample["position"].step > 0 or net_input["chunk_src_tokens"].numel() <= 60
    items = batches(task, "train", max_tokens=150)
    documents = task.dataset("train").documents
    document_of = {i: d for d in documents for i in range(d.first, d.first + d.length)}
    seen = []
    for item in items:
        (step,) = item["steps"]
        assert step["net_input"]["src_tokens"].numel() <= 150 and "chunk_lengths" not in step["net_input"]
        ids, lanes = step["id"].tolist(), step["lanes"].tolist()
        positions = step["net_input"]["chunk_positions"].tolist()
        for lane in set(lanes):
            rows = sorted((positions[r], ids[r]) for r in range(len(ids)) if lanes[r] == lane)
            sentences = [i for _, i in rows]
            assert [p for p, _ in rows] == list(range(len(rows))) and len(rows) <= 4
            assert sentences == list(range(sentences[0], sentences[0] + len(rows)))
            document = document_of[sentences[0]]
            assert document_of[sentences[-1]] == document and (sentences[0] - document.first) % 4 == 0
        seen += ids
    assert sorted(seen) == list(range(len(task.dataset("train"))))


@pytest.fixture(scope="module")
def local_global_checkpoint(data_bin, sentence_checkpoint, tmp_path_factory):
    """Finetuned for 4 updates from the plain transformer (every one of its layers local, the global
    layer above: --global-layer extra), its new parameters at their own rate."""
    save_dir = tmp_path_factory.mktemp("local_global")
    result = run([
        fairseq_command("fairseq-train"), str(data_bin), *COMMON, "--task", "document_translation",
        *LOCAL_GLOBAL, "--global-layer", "extra", "--chunk-sentences", "3",
        "--criterion", "document_label_smoothed_cross_entropy",
        "--lr-scheduler", "two_rate_inverse_sqrt", "--lr", "1e-3", "--context-lr", "3e-3",
        "--warmup-updates", "2", "--max-update", "4", "--finetune-from-model", str(sentence_checkpoint),
        "--save-dir", str(save_dir),
    ])
    return save_dir / "checkpoint_last.pt", result.stdout + result.stderr


def test_finetuned_from_a_transformer_through_the_cli(data_bin, local_global_checkpoint):
    _, log = local_global_checkpoint
    _, model, _, _ = build(data_bin, *LOCAL_GLOBAL, "--global-layer", "extra", "--chunk-sentences", "3")
    assert "num_updates 4" in log
    (_, loaded), (_, new) = fitted_parameters(log)
    assert loaded == ("encoder.embed_tokens, encoder.layers.0-1, decoder.embed_tokens, decoder.layers.0-1, "
                      "decoder.output_projection")
    assert new == ("encoder.segment_embeddings, encoder.global_context, decoder.layers.0.self_attn.relative_positions, "
                   "decoder.layers.1.self_attn.relative_positions")
    context_tensors = sum(is_context_parameter(p) for p in model.parameters())
    assert f" {context_tensors} context tensors (--context-lr), peak lr 0.003" in log


def test_stock_clis_and_hub_translate_documents_alike(data_bin, local_global_checkpoint):
    from memory_nmt.systems.local_global.model import LocalGlobalTransformerModel

    checkpoint, _ = local_global_checkpoint
    check_clis_and_hub_translate_alike(data_bin, checkpoint, LocalGlobalTransformerModel, buffer_size=1000)


def test_interactive_chunks_end_where_its_buffer_does(data_bin, local_global_checkpoint):
    checkpoint, _ = local_global_checkpoint
    lines = (data_bin.parent / "raw" / "test.en").read_text().splitlines()
    done = run_command(
        [fairseq_command("fairseq-interactive"), str(data_bin), "--user-dir", str(PLUGIN), "--task",
         "document_translation", "--path", str(checkpoint), "--beam", "2", "--max-len-b", "10", "--cpu",
         "--source-lang", "en", "--target-lang", "de", "--buffer-size", "2", "--num-workers", "0"],
        input="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(re.findall(r"^H-\d+\t", done.stdout, re.M)) == len(lines)
    assert "chunk cut by fairseq-interactive's buffer 1 times so far" in done.stderr
    assert "give a --buffer-size of at least the input's lines, or translate with fairseq-generate" in done.stderr


def test_chunks_cut_by_buffers_are_counted_and_logged_at_the_1st_10th_100th(caplog):
    """A buffer cuts a chunk only where its document goes on past it and the chunk is not full."""
    from memory_nmt.pipeline.interactive import InteractiveSession

    session = InteractiveSession()
    session.chunk_sentences = 4
    for _ in range(16):  # one document of 32 lines in buffers of 2: chunks end at lines 2, 4, 6, ...
        session.place(["a", "b"])
    session.place(["", "c"])  # the document ended with the last buffer: nothing cut
    assert session.chunks_cut_by_buffers == 15
    logged = [int(count) for count in re.findall(r"buffer (\d+) times so far", caplog.text)]
    assert logged == [1, 10]

    full = InteractiveSession()
    full.chunk_sentences = 2
    for _ in range(4):  # chunks of 2 end where the buffers of 2 do
        full.place(["a", "b"])
    assert full.chunks_cut_by_buffers == 0


def test_interactive_chunks_are_cut_by_size_and_buffer_and_forgotten_once_translated():
    from memory_nmt.pipeline.interactive import InteractiveSession

    session = InteractiveSession()
    session.chunk_sentences = 2
    first = session.place(["a", "b", "c", "", "d", "e"])
    assert [(p.lane, p.continues) for p in first] == [(0, False), (0, True), (1, False), (None, False), (2, False), (2, True)]
    assert session.take_finished_lanes() == []  # lanes 0 and 1 end in this buffer: translated at its end
    second = session.place(["f", ""])
    assert [(p.lane, p.continues) for p in second] == [(3, False), (None, False)]  # the buffer cut lane 2
    assert sorted(session.take_finished_lanes()) == [0, 1, 2]
    assert session.take_closed_lanes() == [3]


def test_the_decoders_self_attention_reads_only_the_previous_sentence_it_is_given():
    """The previous sentence is an argument of the self-attention (the decoder hands it down, layer by
    layer): called without one, it fails instead of reading none; given an empty one, it is fairseq's
    self-attention over the sentence's own words (its relative terms start at zero)."""
    from fairseq.modules import MultiheadAttention

    from memory_nmt.systems.local_global.target_context import PreviousSentence, PreviousSentenceAttention

    torch.manual_seed(0)
    attention = PreviousSentenceAttention(16, 4, 0.0).eval()
    states = torch.randn(5, 2, 16)
    with pytest.raises(ValueError, match="reads the previous sentence it is given"):
        attention(states, states, states)
    plain = MultiheadAttention(16, 4, self_attention=True).eval()
    plain.load_state_dict({k: v for k, v in attention.state_dict().items() if not k.startswith("relative")})
    mask = torch.triu(torch.full((5, 5), float("-inf")), 1)
    with torch.no_grad():
        ours, _ = attention(states, states, states, attn_mask=mask, previous=PreviousSentence())
        theirs, _ = plain(states, states, states, attn_mask=mask, need_weights=False)
    assert torch.allclose(ours, theirs, atol=1e-6)

