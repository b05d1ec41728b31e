"""transformer_associated_memory: its context is the previous N source sentences of its own
document, and nothing else; a gate forced open, or a document's first sentence, gives the plain
transformer's encoder output; padding and batching change nothing; eq. 14-15 against a slow
reference; the ablations (without both: the paper's stack of N encoder layers); finetuning from a
plain transformer; the stock CLIs and the hub."""
import math

import pytest
import torch
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from fairseq.trainer import Trainer

from conftest import (
    AMN,
    COMMON,
    TINY_DIMS,
    TINY_TRANSFORMER_MODULES,
    Recorder,
    batches,
    build,
    check_clis_and_hub_translate_alike,
    check_context_reach,
    fairseq_command,
    fitted_parameters,
    refused_option,
    run,
    walk,
)
from memory_nmt.pipeline.context_parameters import is_context_parameter
from memory_nmt.pipeline.data import DocumentDataError
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt.pipeline.sentence_encoding import SentenceEncoding
from memory_nmt.systems.associated_memory.context_network import GATE_BIAS, ContextEncoder
from memory_nmt.systems.associated_memory.model import AssociatedMemoryTransformerModel


def amn_model(data_bin, *more):
    task, model, _, _ = build(data_bin, *AMN, *more)
    model.eval()
    return task, model


def encoder_output(logits, extra, row):
    """A row's encoder output at its real (unpadded) source positions."""
    encoder_out = extra["encoding"].encoder_out
    return encoder_out["encoder_out"][0][:, row][~encoder_out["encoder_padding_mask"][0][row]]


@pytest.mark.parametrize("reach, options", [
    (1, []),
    (2, ["--context-sentences", "2"]),
    (2, ["--context-sentences", "2", "--context-combination", "parallel"]),
    (1, ["--no-context-rnn"]),
    (1, ["--no-inter-sentence-attention"]),
    (1, ["--stacked-context-encoder"]),
    (2, ["--stacked-context-encoder", "--context-sentences", "2"]),
], ids=["1", "2-concatenate", "2-parallel", "no-rnn", "no-attention", "stacked", "stacked-2"])
def test_context_is_the_previous_n_source_sentences_of_the_same_document(data_bin, reach, options):
    task, model = amn_model(data_bin, *options)
    steps = batches(task, "test", max_tokens=60)
    group = [s for s in steps if s["position"].group == 0]
    assert len(group) >= 4 and group[0]["lanes"].numel() >= 2 and len(steps) > len(group)
    assert int(group[0]["lanes"][0]) in group[3]["lanes"].tolist()
    check_context_reach(model, steps, task.source_dictionary, reach, of_row=encoder_output, threshold=1e-4)


def test_gate_open_or_first_sentence_gives_the_plain_transformers_encoder_output(data_bin):
    _, plain, _, _ = build(data_bin, "--arch", "transformer", *TINY_DIMS, "--seed", "3", task="translation")
    plain.eval()
    task, model = amn_model(data_bin)
    model.load_state_dict(plain.state_dict())
    steps = batches(task, "test")
    with torch.no_grad():
        plain_outputs = [plain.encoder(s["net_input"]["src_tokens"], s["net_input"]["src_lengths"]) for s in steps]
    expected = {
        sentence: encoder_output(None, {"encoding": SentenceEncoding(output)}, row)
        for s, output in zip(steps, plain_outputs) for row, sentence in enumerate(s["id"].tolist())
    }
    first_sentences = {i for s in steps if s["position"].step == 0 for i in s["id"].tolist()}
    gated = walk(model, steps, of_row=encoder_output)
    assert all(torch.equal(gated[i], expected[i]) for i in first_sentences)
    assert all(not torch.allclose(gated[i], expected[i], atol=1e-3) for i in set(expected) - first_sentences)
    with torch.no_grad():
        model.encoder.context_network.gate.proj.bias.fill_(1e4)
    assert all(torch.equal(output, expected[i]) for i, output in walk(model, steps, of_row=encoder_output).items())


def test_a_row_reads_the_same_in_a_batch_as_alone(data_bin):
    """Other rows' source and context, and the padding they bring, change no row's output."""
    task, model = amn_model(data_bin, "--context-sentences", "2", "--context-combination", "parallel")
    model.double()
    steps = batches(task, "test", max_tokens=1000)
    together = walk(model, steps, of_row=encoder_output)
    alone = walk(model, batches(task, "test", max_tokens=None, max_sentences=1), of_row=encoder_output)
    assert any(s["lanes"].numel() >= 3 and s["position"].step >= 2 for s in steps)
    assert sorted(together) == sorted(alone) == list(range(len(task.dataset("test"))))
    for sentence, output in together.items():
        assert torch.allclose(output, alone[sentence], atol=1e-10), sentence


def slow_parallel_context(attention, source, source_mask, contexts, context_masks, present):
    """a_i of eq. 10-15, loop by loop: rows, context sentences, heads, words."""
    heads, width = attention.heads, attention.head_dim
    out = torch.zeros_like(source)
    sequence = 0
    for row in range(source.size(1)):
        words = [i for i in range(source.size(0)) if not source_mask[row, i]]
        per_sentence, mean_raw = [], []
        for _ in range(int(present[row].sum())):
            context = contexts[:, sequence]
            context_words = [k for k in range(context.size(0)) if not context_masks[sequence, k]]
            sequence += 1
            vectors, raw_sum = torch.zeros(source.size(0), source.size(2), dtype=source.dtype), 0.0
            for h in range(heads):
                part = slice(h * width, (h + 1) * width)
                for i in range(source.size(0)):
                    q = attention.q_proj(source[i, row])[part]
                    raw = [float(q @ attention.k_proj(context[k])[part]) / math.sqrt(width) for k in context_words]
                    alphas = [math.exp(r - max(raw)) for r in raw]
                    alphas = [a / sum(alphas) for a in alphas]
                    vectors[i, part] = sum(a * attention.v_proj(context[k])[part] for a, k in zip(alphas, context_words))
                    if i in words:
                        raw_sum += sum(raw)
            per_sentence.append(attention.out_proj(vectors))
            mean_raw.append(raw_sum / (heads * len(words) * len(context_words)))
        betas = [math.exp(m - max(mean_raw)) for m in mean_raw]
        for beta, vectors in zip(betas, per_sentence):
            out[:, row] += beta / sum(betas) * vectors
    return out


def test_several_context_sentences_in_parallel_weigh_by_eq_14_15(data_bin):
    _, model = amn_model(data_bin, "--context-sentences", "3", "--context-combination", "parallel")
    network = model.encoder.context_network.double()
    generator = torch.Generator().manual_seed(0)
    source = torch.randn(5, 3, 32, generator=generator, dtype=torch.float64)
    source_mask = torch.tensor([[False] * 5, [True, True] + [False] * 3, [True] + [False] * 4])
    present = torch.tensor([[True, True, True], [True, False, False], [True, True, False]])
    lengths = [4, 2, 6, 3, 1, 5]
    context_masks = torch.arange(6).unsqueeze(0) >= torch.tensor(lengths).unsqueeze(1)
    embedded = torch.randn(6, 6, 32, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        contexts = network.context_encoder(embedded, context_masks)
        fast = network.context_vectors(source, source_mask, embedded, context_masks, present)
        slow = slow_parallel_context(network.attention, source, source_mask, contexts, context_masks, present)
    assert torch.allclose(fast, slow, atol=1e-10)


def test_without_the_rnn_there_is_no_gru(data_bin):
    _, plain = amn_model(data_bin)
    _, ablated = amn_model(data_bin, "--no-context-rnn")
    assert any(".rnn." in name for name, _ in plain.named_parameters())
    assert not any(".rnn." in name for name, _ in ablated.named_parameters())


@pytest.mark.parametrize("options", [[], ["--no-inter-sentence-attention"], ["--stacked-context-encoder"]],
                         ids=["attention", "no-attention", "stacked"])
def test_without_inter_sentence_attention_every_word_reads_the_same_context_vector(data_bin, options):
    ablated = bool(options)
    task, model = amn_model(data_bin, *options)
    network = model.encoder.context_network
    read, context_vectors = [], network.context_vectors

    def recording(*args):
        read.append(context_vectors(*args))
        return read[-1]

    network.context_vectors = recording
    walk(model, batches(task, "test"))
    assert read
    uniform = [bool(torch.allclose(vectors, vectors[:1].expand_as(vectors), atol=1e-6)) for vectors in read]
    assert all(uniform) if ablated else not any(uniform)


def test_without_both_the_context_is_read_by_a_stack_of_n_encoder_layers(data_bin):
    """Table 3's last ablation as section 6.2 describes it: no GRU, no inter-sentence attention, and
    --encoder-layers (here 3) layers of attention and feed-forward, like the source encoder's, over
    the context; every one of them is used (moving the top one's feed-forward moves the encoder
    output of every sentence with context, and of no first sentence)."""
    task, model = amn_model(data_bin, "--stacked-context-encoder", "--encoder-layers", "3")
    network = model.encoder.context_network
    assert model.args.no_context_rnn and model.args.no_inter_sentence_attention
    assert not any(".rnn." in name or ".attention." in name for name, _ in network.named_parameters())
    layers = network.context_encoder.layers
    assert len(layers) == 3 and all(isinstance(layer, TransformerEncoderLayerBase) for layer in [*layers, *model.encoder.layers])
    steps = batches(task, "test")
    before = walk(model, steps, of_row=encoder_output)
    with torch.no_grad():
        layers[-1].fc2.weight.add_(torch.randn(layers[-1].fc2.weight.shape, generator=torch.Generator().manual_seed(0)))
    after = walk(model, steps, of_row=encoder_output)
    first_sentences = {i for s in steps if s["position"].step == 0 for i in s["id"].tolist()}
    for sentence in before:
        moved = not torch.allclose(before[sentence], after[sentence], atol=1e-6)
        assert moved == (sentence not in first_sentences), sentence


def test_the_two_flags_together_keep_the_single_attention_block(data_bin):
    """Checkpoints trained with --no-context-rnn --no-inter-sentence-attention, before the stacked
    encoder existed, have one attention block and no feed-forward: they still load."""
    _, model = amn_model(data_bin, "--no-context-rnn", "--no-inter-sentence-attention")
    encoder = model.encoder.context_network.context_encoder
    assert isinstance(encoder, ContextEncoder) and encoder.rnn is None
    assert not model.args.stacked_context_encoder


def test_options_it_cannot_use_are_refused_by_name(data_bin, capsys):
    assert refused_option(capsys, data_bin, *AMN, "--context-sentences", "0").endswith(
        "argument --context-sentences: 0: give 1 or more"
    )
    with pytest.raises(OptionError, match="does not support --encoder-layerdrop"):
        build(data_bin, *AMN, "--encoder-layerdrop", "0.1")


def test_max_tokens_holds_the_context_with_the_trainers_max_positions(data_bin):
    """As for the concatenation model: fairseq's trainer counts --max-tokens into the positions it
    passes, and the context is still counted within --max-tokens, up to the model's positions."""
    from fairseq import utils

    task, model, _, _ = build(data_bin, *AMN, "--context-sentences", "3")
    positions = utils.resolve_max_positions(task.max_positions(), model.max_positions(), 12)
    with pytest.raises(DocumentDataError, match="with the previous sentences its system reads, more than --max-tokens 12"):
        batches(task, "train", max_tokens=12, max_positions=positions)


def test_decoding_in_any_batches_translates_every_sentence_once_alike(data_bin):
    task, model = amn_model(data_bin, "--context-sentences", "2")
    model.double()
    results = []
    for options in ({"max_tokens": 1000}, {"max_tokens": None, "max_sentences": 1}, {"max_tokens": None, "max_sentences": 2}):
        best, trace = Recorder(task, model).decode(batches(task, "test", **options))
        assert sorted(best) == list(range(len(task.dataset("test")))), "every sentence exactly once"
        assert any("context_tokens" in inputs for _, inputs, _ in trace)
        results.append(best)
    assert results[0] == results[1] == results[2]


@pytest.fixture(scope="module")
def amn_finetuned(data_bin, sentence_checkpoint, tmp_path_factory):
    """The associated memory finetuned for 4 updates from the plain transformer checkpoint, the
    pretrained parameters frozen (--lr 0), the CAMN's trained at --context-lr: (checkpoint, log)."""
    save_dir = tmp_path_factory.mktemp("amn")
    result = run([
        fairseq_command("fairseq-train"), str(data_bin), *COMMON, "--task", "document_translation", *AMN,
        "--criterion", "document_label_smoothed_cross_entropy",
        "--lr-scheduler", "two_rate_inverse_sqrt", "--lr", "0", "--warmup-updates", "2",
        "--context-lr", "1e-2", "--context-warmup-updates", "1", "--max-update", "4",
        "--finetune-from-model", str(sentence_checkpoint), "--save-dir", str(save_dir),
    ])
    return save_dir / "checkpoint_last.pt", result.stdout + result.stderr


def test_finetuning_from_a_plain_transformer_loads_it_and_trains_the_camn(sentence_checkpoint, amn_finetuned):
    from fairseq import checkpoint_utils

    checkpoint, log = amn_finetuned
    assert "num_updates 4" in log
    loaded, new = fitted_parameters(log)
    assert (loaded[1], new[1]) == (TINY_TRANSFORMER_MODULES, "encoder.context_network")
    sentence = checkpoint_utils.load_checkpoint_to_cpu(str(sentence_checkpoint))["model"]
    finetuned = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))["model"]
    camn = {key for key in finetuned if key.startswith("encoder.context_network.")}
    assert camn and set(finetuned) - camn == set(sentence)
    assert new[0] == len(camn)
    for key, value in sentence.items():
        assert torch.equal(finetuned[key], value), f"{key} is not the sentence checkpoint's"
    assert not torch.equal(finetuned["encoder.context_network.gate.proj.bias"], torch.full((32,), GATE_BIAS))


def test_the_two_rate_scheduler_trains_the_camn_at_its_own_rate(data_bin):
    task, model, criterion, cfg = build(
        data_bin, *AMN, "--optimizer", "adam", "--lr-scheduler", "two_rate_inverse_sqrt",
        "--lr", "1e-4", "--context-lr", "1e-3",
    )
    groups = Trainer(cfg, task, model, criterion).optimizer.param_groups
    camn = list(model.encoder.context_network.parameters())
    assert camn and all(is_context_parameter(p) for p in camn)
    assert [id(p) for p in groups[1]["params"]] == [id(p) for p in camn]
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in model.parameters()} - {id(p) for p in camn}


def test_stock_clis_and_hub_translate_documents_alike(data_bin, amn_finetuned):
    check_clis_and_hub_translate_alike(data_bin, amn_finetuned[0], AssociatedMemoryTransformerModel)
