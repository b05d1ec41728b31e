"""Document batching: docids checks, lanes and groups, --max-tokens, workers, windows, passes,
the data loader's worker processes and the thread that makes batches ahead."""
import collections
import gc
import logging
import multiprocessing
import time

import pytest
import torch
from fairseq import utils

from conftest import CONCAT, TINY_MODEL, batches, build
from memory_nmt.pipeline.data import DocumentDataError, parse_window, read_docids
from memory_nmt.pipeline.lane_steps import PackedStep, RefilledStep, StepPosition, WholeChunkStep, digest_text
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt.pipeline.packing import deal_to_rows, pack, padded_tokens
from memory_nmt.pipeline.planners import plan_text
from memory_nmt.pipeline.refilled_lanes import OneSentenceARow, SentencesPacked, forward_passes


def test_docids_errors_name_file_and_line(tmp_path):
    path = tmp_path / "train.en-de.docids"
    path.write_text("a\na\nb\n")
    assert [(d.doc_id, d.first, d.length) for d in read_docids(str(path), 3)] == [("a", 0, 2), ("b", 2, 1)]
    with pytest.raises(DocumentDataError, match=r"3 lines, but the binarized split has 4"):
        read_docids(str(path), 4)
    path.write_text("a\nb\na\n")
    with pytest.raises(DocumentDataError, match=r"docids:3: document 'a' continues"):
        read_docids(str(path), 3)
    with pytest.raises(DocumentDataError, match="not found"):
        read_docids(str(tmp_path / "missing.docids"), 3)
    path.write_bytes(b"a\r\nb\xff\nc\n")
    with pytest.raises(DocumentDataError, match=r"docids:2: not valid UTF-8"):
        read_docids(str(path), 3)
    path.write_bytes(b"a\r\na\r\nb\n")
    assert [d.doc_id for d in read_docids(str(path), 3)] == ["a", "b"]
    path.write_bytes("\ufeffa\na\nb\n".encode("utf-8"))  # a byte-order mark, as some editors write
    assert [(d.doc_id, d.length) for d in read_docids(str(path), 3)] == [("a", 2), ("b", 1)]
    path.write_text("a\na \na\n")
    with pytest.raises(DocumentDataError, match=r"docids:2: document id 'a ' has spaces at its ends"):
        read_docids(str(path), 3)
    (tmp_path / "valid.en-de.docids").mkdir()
    with pytest.raises(DocumentDataError, match=r"valid.en-de.docids: a directory, where the split's document index"):
        read_docids(str(tmp_path / "valid.en-de.docids"), 3)


def _documents(task, split):
    dataset = task.dataset(split)
    return {d.doc_id: list(range(d.first, d.first + d.length)) for d in dataset.documents}


def test_every_sentence_once_in_lane_order(data_bin):
    task, _, _, _ = build(data_bin, *TINY_MODEL)
    steps = batches(task, "valid", max_tokens=120)
    seen = collections.Counter(i for s in steps for i in s["id"].tolist())
    assert sorted(seen) == list(range(len(task.dataset("valid")))) and set(seen.values()) == {1}

    lane_document = {}
    for sample in steps:
        position = sample["position"]
        tokens = sample["net_input"]["src_tokens"].numel()
        assert max(tokens, sample["target"].numel()) <= 120
        for sentence, lane in zip(sample["id"].tolist(), sample["lanes"].tolist()):
            document, index = task.dataset("valid").document_of(sentence)
            assert index == position.step, "batch t must hold sentence t of each document"
            assert lane_document.setdefault((position.group, lane), document.doc_id) == document.doc_id
    groups = collections.defaultdict(list)
    for sample in steps:
        groups[sample["position"].group].append(sample["position"].step)
    assert all(steps_ == list(range(len(steps_))) for steps_ in groups.values())


def test_too_long_sentence_is_an_error_not_a_drop(data_bin):
    task, model, _, _ = build(data_bin, *TINY_MODEL)
    with pytest.raises(DocumentDataError, match=r"sentence \d+ of document 'doc\d+'.*raise --max-tokens"):
        batches(task, "valid", max_tokens=5)
    as_fairseq_trains = utils.resolve_max_positions(task.max_positions(), model.max_positions(), 5)
    with pytest.raises(DocumentDataError, match=r"raise --max-tokens"):  # fairseq counts --max-tokens in
        batches(task, "train", max_tokens=5, max_positions=as_fairseq_trains)
    with pytest.raises(DocumentDataError, match=r"more than the 4 the model takes"):
        batches(task, "valid", max_positions=(4, 4))


def test_workers_share_documents_and_batch_counts(data_bin):
    task, _, _, _ = build(data_bin, *TINY_MODEL, "--optimization-window", "2")
    per_worker = [batches(task, "train", max_tokens=60, num_shards=2, shard_id=w) for w in (0, 1)]
    assert len(per_worker[0]) == len(per_worker[1])
    owners = collections.defaultdict(set)
    for worker, items in enumerate(per_worker):
        for item in items:
            for step in item.get("steps", []):
                for sentence in step["id"].tolist():
                    owners[sentence].add(worker)
    assert sorted(owners) == list(range(len(task.dataset("train"))))
    documents = _documents(task, "train")
    for sentences in documents.values():
        assert len(set.union(*(owners[s] for s in sentences))) == 1, "a document split across workers"


@pytest.mark.parametrize("spec,low,high", [("1-3", 1, 3), ("2", 2, 2)])
def test_windows_cut_groups_in_order(data_bin, spec, low, high):
    task, _, _, _ = build(data_bin, *TINY_MODEL, "--optimization-window", spec)
    windows = [item["steps"] for item in batches(task, "train", max_tokens=60)]
    next_step = {}
    for window in windows:
        positions = [s["position"] for s in window]
        assert len({p.group for p in positions}) == 1
        assert len(window) <= high and (len(window) >= low or positions[-1].ends_group)
        group = positions[0].group
        assert positions[0].step == next_step.get(group, 0), "a group's steps must come in order"
        assert [p.step for p in positions] == list(range(positions[0].step, positions[0].step + len(window)))
        next_step[group] = positions[-1].step + 1
    assert len(set(spec_sizes := [len(w) for w in windows])) >= (2 if low < high else 1), spec_sizes


def test_four_sentence_steps_an_update_by_default(data_bin, caplog):
    """Without --optimization-window an update is four consecutive steps of a group (fewer where
    a group ends), each of up to --max-tokens; the log's batches line names the window."""
    caplog.set_level(logging.INFO, logger="memory_nmt.pipeline.task")
    task, _, _, _ = build(data_bin, *TINY_MODEL)
    windows = [item["steps"] for item in batches(task, "train", max_tokens=60)]
    assert max(len(window) for window in windows) == 4 and all(1 <= len(window) <= 4 for window in windows)
    assert "; --optimization-window 4" in caplog.text


def test_full_window_and_a_new_dealing_every_epoch(data_bin):
    """A full window is a whole group; the documents are dealt to lanes in another order every
    epoch, so the groups hold other documents (each sentence still once)."""
    task, _, _, _ = build(data_bin, *TINY_MODEL, "--optimization-window", "full")
    epoch1 = [item["steps"] for item in batches(task, "train", max_tokens=60, epoch=1)]
    epoch2 = [item["steps"] for item in batches(task, "train", max_tokens=60, epoch=2)]
    assert all(window[-1]["position"].ends_group and window[0]["position"].step == 0 for window in epoch1)
    order = lambda windows: [s["id"].tolist() for w in windows for s in w]  # noqa: E731
    assert sorted(sum(order(epoch1), [])) == sorted(sum(order(epoch2), [])) and order(epoch1) != order(epoch2)
    assert parse_window("full") == (None, None)
    with pytest.raises(OptionError, match="--optimization-window"):
        parse_window("3-1")


def test_small_split_still_feeds_every_worker(data_bin):
    task, _, _, _ = build(data_bin, *TINY_MODEL)
    per_worker = [batches(task, "valid", max_tokens=100000, num_shards=2, shard_id=w) for w in (0, 1)]
    assert len(per_worker[0]) == len(per_worker[1])
    sentences = [{i for s in items if s for i in s["id"].tolist()} for items in per_worker]
    assert sentences[0] and sentences[1] and not sentences[0] & sentences[1]
    assert len(sentences[0] | sentences[1]) == len(task.dataset("valid"))


def test_as_many_workers_as_documents(data_bin):
    task, _, _, _ = build(data_bin, *TINY_MODEL)
    task.load_dataset("valid")
    workers = len(task.dataset("valid").documents)
    per_worker = [batches(task, "valid", max_tokens=100000, num_shards=workers, shard_id=w)
                  for w in range(workers)]
    assert len({len(items) for items in per_worker}) == 1
    assert all(any(item for item in items) for items in per_worker), "a worker got no document"


def test_one_sentence_documents(data_bin, tmp_path):
    """Every sentence its own document: one step per group, every sentence decoded once."""
    import shutil

    from memory_nmt.pipeline.generator import DocumentSequenceGenerator

    data = tmp_path / "bin"
    shutil.copytree(data_bin, data)
    lines = (data / "test.en-de.docids").read_text().splitlines()
    (data / "test.en-de.docids").write_text("".join(f"single{i}\n" for i in range(len(lines))))
    task, model, _, _ = build(data, *TINY_MODEL)
    steps = batches(task, "test")
    assert {s["position"].step for s in steps} == {0} and all(s["position"].ends_group for s in steps)
    generator = DocumentSequenceGenerator([model.eval()], task.target_dictionary, beam_size=2, max_len_b=5)
    decoded = [i for s in steps for i, _ in zip(s["id"].tolist(), generator.generate([model], s))]
    assert sorted(decoded) == list(range(len(lines)))


def test_forward_passes_cut_where_padding_is_saved():
    assert forward_passes([10, 3, 10, 2, 9, 3], 1) == (60, [[0, 1, 2, 3, 4, 5]])
    assert forward_passes([10, 3, 10, 2, 9, 3], 4) == (39, [[0, 2, 4], [1, 5, 3]])  # 9 apart saves 2 < 39/10
    assert forward_passes([5, 5, 5], 3) == (15, [[0, 1, 2]])


def padded_tokens_of(batch) -> int:
    """A batch's tokens as --max-tokens counts them: rows times the longer side."""
    return batch["net_input"]["src_tokens"].size(0) * max(batch["net_input"]["src_tokens"].size(1),
                                                          batch["target"].size(1))


def check_lanes_walk_every_sentence_once(task, steps):
    """Every training sentence once, in its lane, right after its document's previous one."""
    seen, lane_holds = collections.Counter(), {}  # (group, lane) -> (document, index) of its last row
    for step in steps:
        passes = step.get("passes", [step])
        lanes = [lane for p in passes for lane in p["lanes"].tolist()]
        assert len(set(lanes)) == len(lanes)
        for p in passes:
            assert p["position"] == step["position"]
            for sentence, lane, goes_on in zip(p["id"].tolist(), p["lanes"].tolist(), p["continues"].tolist()):
                document, index = task.dataset("train").document_of(sentence)
                key = (step["position"].group, lane)
                assert lane_holds.get(key) == (document, index - 1) if goes_on else index == 0
                lane_holds[key] = (document, index)
                seen[sentence] += 1
    assert sorted(seen) == list(range(len(task.dataset("train")))) and set(seen.values()) == {1}


def test_steps_in_passes_keep_every_sentence_and_the_token_bound(data_bin):
    """--passes-per-step with rows of one sentence: each training step's rows go through the model
    in passes whose padded tokens together stay within --max-tokens; so groups take more lanes,
    and every sentence is still trained on once, in its lane, right after its document's previous one."""
    padded = ("--lane-rows", "padded")
    one_pass, _, _, _ = build(data_bin, *TINY_MODEL, *padded, "--optimization-window", "full")
    in_passes, _, _, _ = build(data_bin, *TINY_MODEL, *padded, "--optimization-window", "full", "--passes-per-step", "3")
    single = [step for item in batches(one_pass, "train", max_tokens=60) for step in item["steps"]]
    split = [step for item in batches(in_passes, "train", max_tokens=60) for step in item["steps"]]
    assert len(split) < len(single), "fewer, fuller steps"
    assert any("passes" in step for step in split) and not any("passes" in step for step in single)
    for step in split:
        assert sum(padded_tokens_of(p) for p in step.get("passes", [step])) <= 60
    check_lanes_walk_every_sentence_once(in_passes, split)
    assert not any("passes" in step for step in batches(in_passes, "valid", max_tokens=60)), "training only"


@pytest.mark.parametrize("passes", ["1", "3"])
def test_packed_steps_keep_every_sentence_and_each_pass_within_the_token_bound(data_bin, passes):
    """Rows of several sentences (the default for the memory model): every pass of a step within
    --max-tokens on its own, rows of several sentences, every sentence once, in its lane, in
    order; validation keeps one sentence a row."""
    packed, _, _, _ = build(data_bin, *TINY_MODEL, "--optimization-window", "full", "--passes-per-step", passes)
    padded, _, _, _ = build(data_bin, *TINY_MODEL, "--lane-rows", "padded")
    assert packed.regime.training.packed_width == 32 and padded.regime.training.packed_width is None
    steps = [step for item in batches(packed, "train", max_tokens=60) for step in item["steps"]]
    batches_of = [p for step in steps for p in step.get("passes", [step])]
    assert all(padded_tokens_of(p) <= 60 for p in batches_of)
    assert all("packed_rows" in p and p["nsentences"] == p["id"].numel() for p in batches_of)
    assert any(p["net_input"]["src_tokens"].size(0) < p["nsentences"] for p in batches_of), "rows of several sentences"
    assert (passes == "3") == any("passes" in step for step in steps)
    check_lanes_walk_every_sentence_once(packed, steps)
    assert not any("packed_rows" in step for step in batches(packed, "valid", max_tokens=60)), "training only"


def test_packed_rows_fit_where_one_sentence_a_row_does_not():
    """A long sentence among short ones: padded one a row, every row is as wide as it, and the
    step does not fit 60 tokens in one pass; packed, the short ones share rows and it fits, so the
    step's lanes are not bounded by its widest sentence. Each sentence in exactly one row."""
    widths = [(20, 18)] + [(4, 4)] * 8
    assert OneSentenceARow(60).passes([max(width) for width in widths]) is None
    (rows,) = SentencesPacked(60, 1, embed_dim=512).passes(widths)
    assert len(rows) < len(widths) and sorted(i for row in rows for i in row) == list(range(len(widths)))
    assert padded_tokens(widths, [list(row) for row in rows]) <= 60
    assert len(SentencesPacked(40, 3, embed_dim=512).passes(widths)) == 2, "or in two passes of 40"
    assert SentencesPacked(15, 3, embed_dim=512).passes(widths) is None, "never a sentence wider than a pass"


def test_packing_deals_rows_of_even_length_and_weighs_attention():
    """Longest first, each to the shortest row; rows of several sentences where they save padding,
    one a row where the sentences are as wide (packing would only lengthen the attention)."""
    widths = [(10, 10), (9, 9), (3, 3), (2, 2)]
    assert deal_to_rows(widths, 2) == [[0, 3], [1, 2]]
    assert pack(widths, embed_dim=512) == [[0, 3], [1, 2]]
    assert pack([(6, 6)] * 4, embed_dim=512) == [[0], [1], [2], [3]]


def test_a_model_loaded_from_a_checkpoint_reads_the_training_split_in_sentence_steps(data_bin):
    """fairseq-generate --gen-subset train (and validate, interactive, the hub) load their model
    from a checkpoint: the training split then comes in sentence steps like any other split.
    Training windows have no net_input, so fairseq-generate skipped every one, translated
    nothing and ended in a ZeroDivisionError."""
    task, _, _, cfg = build(data_bin, *TINY_MODEL)
    assert all("steps" in item for item in batches(task, "train")), "fairseq-train's windows"
    task.build_model(cfg.model, from_checkpoint=True)
    steps = batches(task, "train")
    assert all("net_input" in step for step in steps)
    assert sorted(i for step in steps for i in step["id"].tolist()) == list(range(len(task.dataset("train"))))


@pytest.mark.parametrize("buffer_size", [0, 10], ids=["unbuffered", "buffered"])
def test_data_loader_workers_stop_when_the_epochs_last_batch_is_taken(data_bin, buffer_size):
    """Not when the iterator is garbage: the garbage collector is off here, and the iterator still
    held. Left to a collection, the workers could be stopped from inside a later DataLoader worker
    (a fork inherits the garbage), where torch printed "Exception ignored ... can only test a
    child process" (fairseq-validate, fairseq-train)."""
    task, _, _, _ = build(data_bin, *TINY_MODEL)
    task.load_dataset("valid")
    before = set(multiprocessing.active_children())
    gc.disable()
    try:
        epoch = task.get_batch_iterator(
            task.dataset("valid"), max_tokens=200, num_workers=1, data_buffer_size=buffer_size
        ).next_epoch_itr(shuffle=False)
        taken = [next(epoch)]
        assert set(multiprocessing.active_children()) - before, "the epoch runs in a worker process"
        taken += list(epoch)
        assert sorted(i for sample in taken for i in sample["id"].tolist()) == list(range(len(task.dataset("valid"))))
        deadline = time.monotonic() + 10
        while set(multiprocessing.active_children()) != before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(multiprocessing.active_children()) == before and not epoch.has_next()
    finally:
        gc.enable()


@pytest.mark.parametrize("arch", [TINY_MODEL, CONCAT], ids=["lanes", "sentences"])
def test_every_worker_keeps_the_same_digest_of_the_epochs_batches(data_bin, arch):
    """fairseq saves worker 0's iterator state and every worker resumes from it: the digest of the
    epoch's training batches is every worker's, and another window or --max-tokens changes it."""
    def plans(task, max_tokens=60):
        task.load_dataset("train")
        return [task.get_batch_iterator(task.dataset("train"), max_tokens=max_tokens, num_shards=2, shard_id=worker).plan
                for worker in (0, 1)]

    task, _, _, _ = build(data_bin, *arch)
    first, second = plans(task)
    assert first is not None and first == second
    assert plans(task, max_tokens=80)[0] != first
    if arch is TINY_MODEL:
        other, _, _, _ = build(data_bin, *arch, "--optimization-window", "2")
        assert plans(other)[0] != first


def test_a_training_step_is_digested_in_one_fixed_text_whatever_its_kind():
    """A checkpoint saved inside an epoch keeps the digest of the epoch's plan, and resumes only
    where the plan's digest is the same: each kind of training step writes every field any step
    may have, in one fixed order, so that the digest follows the plan and not how the code names
    its types."""
    position = StepPosition("train", 2, 1, ends_group=False)
    assert plan_text([[RefilledStep(position, (7, 9), (0, 1), (True, False), passes=((1,), (0,)))]]) == (
        "[[SentenceStep(position=StepPosition(stream='train', group=2, step=1, ends_group=False), sentences=(7, 9), "
        "lanes=(0, 1), passes=((1,), (0,)), chunk_positions=(), chunk_starts=(), continues=(True, False), packed=())]]"
    )
    assert digest_text(PackedStep(position, (7, 9), (0, 1), (True, False), packed=(((0, 1),),))) == (
        "SentenceStep(position=StepPosition(stream='train', group=2, step=1, ends_group=False), sentences=(7, 9), "
        "lanes=(0, 1), passes=(), chunk_positions=(), chunk_starts=(), continues=(True, False), packed=(((0, 1),),))"
    )
    assert digest_text(WholeChunkStep(position, (7, 8), (0, 0), chunk_positions=(0, 1))) == (
        "SentenceStep(position=StepPosition(stream='train', group=2, step=1, ends_group=False), sentences=(7, 8), "
        "lanes=(0, 0), passes=(), chunk_positions=(0, 1), chunk_starts=(), continues=(), packed=())"
    )
    assert plan_text(([[1, 2], [3]], 1, 2)) == "([[1, 2], [3]], 1, 2)", "batches of indices as Python writes them"


def test_the_batches_made_ahead_are_every_batch_in_order_and_end_when_stopped():
    """The document task's iterator makes --data-buffer-size batches ahead in the thread of a fairseq
    ``BufferedIterator``, which ``stop`` ends (at exit: test_cli.py); ``stop`` reads the thread and
    what it made by fairseq's own names for them, ``_consumer`` and ``_queue``, which this pins."""
    import queue
    import threading

    from memory_nmt.pipeline.batch_iterator import DocumentBatchIterator
    from memory_nmt.pipeline.batches_ahead import BatchesAhead

    class Numbers(torch.utils.data.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, index):
            return index

    def epoch():
        return DocumentBatchIterator(dataset=Numbers(), collate_fn=lambda items: items[0],
                                     batch_sampler=[[i] for i in range(10)], buffer_size=3,
                                     disable_shuffling=True).next_epoch_itr(shuffle=False)

    assert list(epoch()) == list(range(10))
    assert list(epoch().take(3)) == [0, 1, 2]
    others = set(BatchesAhead.running)  # other tests' in this process, and the finished epoch's
    batches = epoch()
    assert next(batches) == 0
    running = [made for made in BatchesAhead.running if made not in others]
    assert len(running) == 1 and running[0]._consumer.is_alive()
    assert isinstance(running[0]._consumer, threading.Thread) and isinstance(running[0]._queue, queue.Queue)
    running[0].stop(seconds=10)
    assert not running[0]._consumer.is_alive()
