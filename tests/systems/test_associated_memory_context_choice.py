"""transformer_associated_memory's --context-choice (Table 4): the next N source sentences of the
sentence's own document, never an earlier one or itself, or N random sentences of the split's
other documents, drawn from the seed, the epoch and the sentence, in every kind of batch (shuffled
training sentences, training lanes, decoding) and read by the model; the default and an older
checkpoint's options are the previous sentences, as before; fairseq-interactive, the hub and the
contrastive scorer, which cannot know them, are refused by name; fairseq-train and
fairseq-generate end to end."""
import re

import pytest
import torch

from commands import run_command
from conftest import AMN, COMMON, Recorder, batches, build, fairseq_command, lane_steps, run, walk
from memory_nmt.evaluation.contrastive import ContrastiveItem, score_items
from memory_nmt.pipeline.chosen_context import ChosenContextError, chosen_sentences
from memory_nmt.pipeline.data import DocumentDataError, DocumentDataset, Document
from memory_nmt.pipeline.samples import passes_in, read_sample
from memory_nmt.systems.associated_memory.model import AssociatedMemoryTransformerModel
from memory_nmt.systems.previous_sentences import ContextCuts


def rows_of(task, items):
    """(sentence index, the source sentences the batch brings it) of every row of ``items``."""
    for item in items:
        for rows in passes_in(read_sample(item)):
            read = chosen_sentences(rows.net_input, task.regime.context_choice, task.source_dictionary.pad())
            yield from zip(rows.batch["id"].tolist(), read)


def documents_of(dataset):
    return {index: document for document in dataset.documents
            for index in range(document.first, document.first + document.length)}


def tokens(pairs, indices):
    return [pairs[j]["source"].tolist() for j in indices]


@pytest.mark.parametrize("split, options", [
    ("train", []), ("train", ["--training-batches", "lanes"]), ("test", []),
], ids=["training-sentences", "training-lanes", "decoding"])
def test_next_context_is_the_following_sentences_of_the_same_document(data_bin, split, options):
    task, _, _, _ = build(data_bin, *AMN, "--context-choice", "next", "--context-sentences", "2", *options)
    assert task.regime.unit == ("lanes" if options else "sentences")
    items = batches(task, split, max_tokens=400)
    dataset = task.dataset(split)
    document_of, pairs = documents_of(dataset), dataset.pairs
    seen = 0
    for sentence, read in rows_of(task, items):
        document = document_of[sentence]
        following = range(sentence + 1, min(sentence + 3, document.first + document.length))
        assert [s.tolist() for s in read] == tokens(pairs, following), sentence
        seen += 1
    assert seen == len(dataset)
    if split == "train" and not options:
        assert all(previous == ((), ()) for item in items for previous in item["previous_sentences"])


def test_the_model_reads_the_next_sentences_in_decoding(data_bin):
    """What the encoder gets at every decoded sentence is its next sentence (concatenated, J = 1),
    nothing at a document's last sentence, whatever the lanes carried."""
    task, model, _, _ = build(data_bin, *AMN, "--context-choice", "next")
    model.eval()
    steps = batches(task, "test", max_tokens=400)
    _, trace = Recorder(task, model).decode(steps)
    document_of, pairs = documents_of(task.dataset("test")), task.dataset("test").pairs
    pad, last_sentences = task.source_dictionary.pad(), 0
    for sample, inputs, _ in trace:
        context = inputs.get("context_tokens")
        for row, sentence in enumerate(sample["id"].tolist()):
            document = document_of[sentence]
            read = context[row, 0][context[row, 0].ne(pad)].tolist() if context is not None else []
            if sentence + 1 < document.first + document.length:
                assert read == pairs[sentence + 1]["source"].tolist(), sentence
            else:
                assert read == [], sentence
                last_sentences += 1
    assert last_sentences == len(task.dataset("test").documents)


def test_random_context_comes_from_other_documents_drawn_by_seed_and_epoch(data_bin):
    task, _, _, _ = build(data_bin, *AMN, "--context-choice", "random", "--context-sentences", "2")
    choice = task.regime.context_choice
    task.load_dataset("train")
    dataset = task.dataset("train")
    document_of = documents_of(dataset)
    draws = {(seed, epoch): dataset.choosing(choice, seed, epoch).chosen.indices for seed in (1, 2) for epoch in (1, 2)}
    for sentence, chosen in enumerate(draws[1, 1]):
        assert len(set(chosen)) == 2 and all(document_of[j] != document_of[sentence] for j in chosen)
    assert (dataset.choosing(choice, 1, 1).chosen.indices == draws[1, 1]).all(), "the same seed and epoch, alike"
    assert (draws[1, 1] != draws[1, 2]).any() and (draws[1, 1] != draws[2, 1]).any()
    for epoch in (1, 2):  # what the epoch's training batches bring
        expected = dataset.choosing(choice, 1, epoch).chosen
        rows = dict(rows_of(task, batches(task, "train", max_tokens=400, seed=1, epoch=epoch)))
        assert sorted(rows) == list(range(len(dataset)))
        for sentence, read in rows.items():
            assert [s.tolist() for s in read] == tokens(dataset.pairs, expected.of(sentence)), sentence


def test_random_context_decodes_alike_twice(data_bin):
    task, model, _, _ = build(data_bin, *AMN, "--context-choice", "random")
    model.eval()
    first, trace = Recorder(task, model).decode(batches(task, "test"))
    second, _ = Recorder(task, model).decode(batches(task, "test"))
    assert first == second and sorted(first) == list(range(len(task.dataset("test"))))
    assert all("context_tokens" in inputs for _, inputs, _ in trace), "every sentence reads one"


def test_random_context_on_a_split_of_one_document_is_refused(data_bin):
    task, _, _, _ = build(data_bin, *AMN, "--context-choice", "random")
    task.load_dataset("test")
    pairs = task.dataset("test").pairs
    alone = DocumentDataset(pairs, [Document("talk", 0, len(pairs))], "test", "bin/test.en-de.docids")
    with pytest.raises(ChosenContextError, match=r"the split 'test' \(bin/test.en-de.docids\) has one document, "
                                                 r"'talk': give the split several documents"):
        alone.choosing(task.regime.context_choice, 1, 1)


def test_max_tokens_counts_the_chosen_sentences(data_bin):
    task, _, _, _ = build(data_bin, *AMN, "--context-choice", "next", "--context-sentences", "3")
    with pytest.raises(DocumentDataError, match=r"with the context sentences its system reads \(--context-choice "
                                                r"next\), more than --max-tokens 12"):
        batches(task, "train", max_tokens=12)


def test_cuts_keep_the_nearest_sentences():
    sentences = tuple(torch.full((3,), value) for value in (7, 8, 9))
    assert [int(s[0]) for s in ContextCuts().fitting(sentences, 7, "b", "r")] == [8, 9]
    assert [int(s[0]) for s in ContextCuts().fitting(sentences, 7, "b", "r", nearest_first=True)] == [7, 8]


def test_previous_is_the_default_and_an_older_checkpoints_options_build_it(data_bin):
    """--no-inter-sentence-attention alone keeps the previous sentences; options without the
    field (a checkpoint from before it) build the same model, computing the same."""
    task, model, _, _ = build(data_bin, *AMN, "--no-inter-sentence-attention")
    assert model.args.context_choice == "previous" and model.context_choice() is None
    assert task.regime.context_choice is None and model.context_sentences() == (1, 0)
    args = model.args
    del args.context_choice
    older = AssociatedMemoryTransformerModel.build_model(args, task)
    older.load_state_dict(model.state_dict())
    assert args.context_choice == "previous" and older.context_choice() is None
    model.eval()
    older.eval()
    steps = batches(task, "test")
    assert not any("chosen_context_counts" in s["net_input"] for s in steps)
    ours, theirs = walk(model, steps), walk(older, steps)
    assert all(torch.equal(ours[i], theirs[i]) for i in ours)


def test_the_contrastive_scorer_is_refused_by_name(data_bin):
    task, model, _, _ = build(data_bin, *AMN, "--context-choice", "next")
    item = ContrastiveItem(["a"], ["b"], "a", ["b", "c"], 0, "items.json:1")
    with pytest.raises(ChosenContextError, match="--context-choice next .* fairseq-generate"):
        score_items(model, task, [item])


@pytest.mark.parametrize("choice", ["next", "random"])
def test_fairseq_train_and_generate_end_to_end_interactive_and_the_hub_refused(data_bin, tmp_path, choice):
    """Trained for 3 updates, the model translates the test split with fairseq-generate (random: the
    same twice); fairseq-interactive and the hub are refused, naming the option and fairseq-generate."""
    save_dir = tmp_path / "checkpoints"
    log = run([
        fairseq_command("fairseq-train"), str(data_bin), *COMMON, "--task", "document_translation", *AMN,
        "--context-choice", choice, "--criterion", "document_label_smoothed_cross_entropy",
        "--lr", "1e-3", "--max-update", "3", "--save-dir", str(save_dir),
    ])
    assert "num_updates 3" in log.stdout + log.stderr
    checkpoint = save_dir / "checkpoint_last.pt"
    decoding = [str(data_bin), "--user-dir", COMMON[1], "--task", "document_translation", "--path", str(checkpoint),
                "--beam", "2", "--max-len-b", "10", "--cpu"]
    generate = [fairseq_command("fairseq-generate"), *decoding, "--gen-subset", "test", "--max-tokens", "200"]
    runs = 2 if choice == "random" else 1  # random context drawn from --seed: the same every time
    outputs = [sorted(line for line in run(generate).stdout.splitlines() if line.startswith("H-")) for _ in range(runs)]
    assert len(outputs[0]) == len((data_bin / "test.en-de.docids").read_text().splitlines())
    assert all(output == outputs[0] for output in outputs)
    refusal = f"--context-choice {choice} .*fairseq-interactive, the hub.*fairseq-generate"
    if choice == "next":  # the same refusal for random: the hub's path is fairseq-interactive's
        interactive = run_command([fairseq_command("fairseq-interactive"), *decoding, "--source-lang", "en",
                                   "--target-lang", "de"], input="a b\n")
        assert interactive.returncode != 0 and re.search(refusal, interactive.stderr), interactive.stderr[-2000:]
    hub = AssociatedMemoryTransformerModel.from_pretrained(
        str(save_dir), checkpoint_file=checkpoint.name, data_name_or_path=str(data_bin)
    )
    with pytest.raises(ChosenContextError, match=refusal):
        hub.translate_document(["a b", "c d"])


def test_training_in_lanes_reads_the_chosen_sentences(data_bin):
    """--training-batches lanes: a window's steps train the CAMN on the next sentences they bring."""
    task, model, criterion, _ = build(data_bin, *AMN, "--context-choice", "next", "--training-batches", "lanes",
                                      "--optimization-window", "2")
    item = batches(task, "train", max_tokens=200)[0]
    assert all("chosen_context_counts" in step["net_input"] for step in item["steps"])
    loss, _, _ = criterion.forward_window(model, lane_steps(item), backward=lambda loss: loss.backward())
    assert torch.isfinite(loss)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoder.context_network.parameters())
