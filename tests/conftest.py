"""What every test module shares: a tiny synthetic document corpus binarized with fairseq-preprocess,
checkpoints trained on it, two tiny pretrained checkpoints with language tokens (mBART-shaped and
multilingual), a tiny sentencepiece model standing in for a pretrained checkpoint's and a checkpoint
built on data it segmented, fairseq tasks/models/criteria built from command-line arguments as
fairseq-train builds them, and the contract checks every system reuses (walk, context reach,
decoding, the stock CLIs and the hub alike).

The tests are grouped as the code is: ``pipeline/`` (the document machinery, the stock CLIs, the
package's imports), ``systems/`` (what makes each system itself, and adding one) and ``tools/``
(the commands, the recipes and the paper's analyses)."""
import copy
import functools
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import filelock
import pytest
import sentencepiece
import torch

from commands import run_command
from memory_nmt_tools import prepare_documents, synthetic_documents

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "memory_nmt"
SHARED_DATA = REPO.parent / "shared" / "data"
TINY_DIMS = [
    "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--share-all-embeddings", "--dropout", "0.0",
]
TINY_MODEL = ["--arch", "transformer_recurrent_memory_small", *TINY_DIMS, "--memory-size", "4"]
CONCAT = ["--arch", "transformer_context_concat_small", *TINY_DIMS]
AMN = ["--arch", "transformer_associated_memory_small", *TINY_DIMS]
LOCAL_GLOBAL = ["--arch", "transformer_local_global_small", *TINY_DIMS]
COMMON = [  # fairseq-train options of the CLI tests
    "--user-dir", str(PLUGIN), "--label-smoothing", "0.1", "--optimizer", "adam",
    "--max-tokens", "200", "--cpu", "--seed", "1", "--log-format", "simple",
    "--log-interval", "1", "--no-epoch-checkpoints",
]
MEMORY_TRAIN = [  # fairseq-train options of the memory model's CLI tests
    "--user-dir", str(PLUGIN), "--task", "document_translation", *TINY_MODEL,
    "--criterion", "document_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "5",
    "--max-tokens", "200", "--optimization-window", "1-3", "--cpu", "--seed", "1",
    "--log-format", "simple", "--log-interval", "1", "--no-epoch-checkpoints",
]
MEMORY_RUN = [*MEMORY_TRAIN, "--dropout", "0.2", "--save-interval-updates", "2"]  # memory_run's options
SENTENCE_TRAIN = [
    *COMMON, "--task", "translation", "--required-batch-size-multiple", "1",
    "--arch", "transformer", *TINY_DIMS, "--criterion", "label_smoothed_cross_entropy",
    "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "2", "--max-update", "3",
]


def share_cores_between_workers():
    """Under pytest-xdist (pytest.ini runs one worker per core), each worker and the fairseq
    processes it starts use their share of the cores: without it every worker's torch would use
    them all, and two workers' training would crowd each other out."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()  # macOS
        threads = max(1, cores // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)


share_cores_between_workers()


FAST_MODULES = (  # the quick tier (pytest -m fast, under a minute): options, data, batching, documents
    "test_option_ranges.py", "test_system_option_ranges.py", "test_data.py", "test_packing.py",
    "test_package_imports.py", "test_docs_links.py",
    "test_paths.py", "test_document_bleu.py", "test_document_index.py", "test_synthetic.py",
    "test_prepare_documents.py", "test_system_contract.py",
)


def pytest_collection_modifyitems(config, items):
    """The tests of FAST_MODULES are marked ``fast``; tests marked ``gpu`` are skipped where CUDA
    is not present."""
    for item in items:
        if item.path.name in FAST_MODULES:
            item.add_marker(pytest.mark.fast)
    if torch.cuda.is_available():
        return
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(no_gpu)


def fairseq_command(name):
    return str(Path(sys.executable).with_name(name))


def run(command, cwd=None):
    result = run_command(command, cwd=cwd)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def preprocess(*arguments):
    """``fairseq-preprocess arguments``, run by its own ``main`` in this process (which has imported
    fairseq already, as a fresh process would take seconds to); the log file it opens in its
    destination folder is closed after."""
    from fairseq import options
    from fairseq_cli import preprocess as fairseq_preprocess

    logger = logging.getLogger(fairseq_preprocess.__name__)
    handlers = list(logger.handlers)
    try:
        fairseq_preprocess.main(options.get_preprocessing_parser().parse_args(list(arguments)))
    finally:
        for handler in logger.handlers[len(handlers):]:
            logger.removeHandler(handler)
            handler.close()


def built_once(tmp_path_factory, name, build):
    """The folder ``name`` after ``build(folder)`` filled it, once a test run: under pytest-xdist in the
    folder all its workers share, built by the first worker that asks (the others wait on a lock file and
    take what it built; a worker whose build failed leaves it to the next one); without xdist, in a folder
    of this process's own. Tests only read it; one that changes what is there works on a copy (as
    test_cli.py's dictionary shuffled in a copy of ``data_bin``)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    folder = tmp_path_factory.getbasetemp().parent / name
    built = folder.with_name(f"{name}.built")
    with filelock.FileLock(folder.with_name(f"{name}.lock")):
        if not built.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            built.touch()
    return folder


def write_corpus(root):
    """``data_bin``'s documents in ``root``: their text in ``raw``, binarized in ``bin``."""
    for split, count, seed in (("train", 40, 1), ("valid", 8, 2), ("test", 6, 3)):
        synthetic_documents.write_documents(
            synthetic_documents.generate_documents(count, seed=seed, min_sentences=2, max_sentences=6),
            str(root / "raw" / split),
        )
    preprocess(
        "--source-lang", "en", "--target-lang", "de",
        "--trainpref", str(root / "raw" / "train.flat"), "--validpref", str(root / "raw" / "valid.flat"),
        "--testpref", str(root / "raw" / "test.flat"), "--destdir", str(root / "bin"),
        "--joined-dictionary", "--workers", "1",
    )
    for split in ("train", "valid", "test"):
        shutil.copy(root / "raw" / f"{split}.docids", root / "bin" / f"{split}.en-de.docids")


@pytest.fixture(scope="session")
def data_bin(tmp_path_factory):
    """train/valid/test splits of synthetic documents, binarized, with their docids (their text in ``../raw``)."""
    return built_once(tmp_path_factory, "corpus", write_corpus) / "bin"


@pytest.fixture(scope="session")
def sentence_checkpoint(data_bin, tmp_path_factory):
    """A plain fairseq transformer of the tiny size, trained for 3 updates (translation task)."""
    def train(save_dir):
        run([fairseq_command("fairseq-train"), str(data_bin), *SENTENCE_TRAIN, "--save-dir", str(save_dir)])

    return built_once(tmp_path_factory, "sentence", train) / "checkpoint_last.pt"


@pytest.fixture(scope="session")
def memory_run(data_bin, tmp_path_factory):
    """The memory model trained by fairseq-train for 4 updates, with MEMORY_RUN's options (dropout on, a
    checkpoint every 2 updates): (its --save-dir, its log). A test that goes on with the run goes on
    in a copy of the folder."""
    def train(save_dir):
        result = run([fairseq_command("fairseq-train"), str(data_bin), *MEMORY_RUN, "--save-dir", str(save_dir),
                      "--max-update", "4"])
        (save_dir / "train.log").write_text(result.stdout + result.stderr)

    save_dir = built_once(tmp_path_factory, "memory_run", train)
    return save_dir, (save_dir / "train.log").read_text()


@pytest.fixture(scope="session")
def concat_checkpoint(data_bin, sentence_checkpoint, tmp_path_factory):
    """A 2-to-2 concatenation model finetuned for 4 updates from the plain transformer checkpoint."""
    def finetune(save_dir):
        result = run([
            fairseq_command("fairseq-train"), str(data_bin), *COMMON, "--task", "document_translation",
            *CONCAT, "--source-context", "1", "--target-context", "1",
            "--criterion", "document_label_smoothed_cross_entropy",
            "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "2", "--max-update", "4",
            "--finetune-from-model", str(sentence_checkpoint), "--save-dir", str(save_dir),
        ])
        log = result.stdout + result.stderr
        assert "num_updates 4" in log and f"loading pretrained model from {sentence_checkpoint}" in log

    return built_once(tmp_path_factory, "concat", finetune) / "checkpoint_last.pt"


# the pretrained checkpoints' shape, training and tasks
PRETRAINED_SHAPE = [
    "--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "4",
    "--decoder-attention-heads", "4", "--dropout", "0.0", "--encoder-normalize-before", "--decoder-normalize-before",
]
PRETRAINING = [
    "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "2",
    "--max-update", "3", "--max-tokens", "200", "--cpu", "--seed", "1", "--log-format", "simple",
    "--no-epoch-checkpoints", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--required-batch-size-multiple", "1", "-s", "en", "-t", "de",
    "--data-buffer-size", "0",  # fairseq alone: no thread making batches to abort its exit (memory_nmt/pipeline/batches_ahead.py)
]
BART_TASK = ["--task", "translation_from_pretrained_bart", "--langs", "en,de"]
MULTILINGUAL_TASK = ["--task", "translation_multi_simple_epoch", "--lang-pairs", "en-de", "--langs", "en,de",
                     "--encoder-langtok", "src", "--decoder-langtok", "--sampling-method", "temperature"]
# fairseq 0.12's translation_from_pretrained_bart reads self.args, which its TranslationTask base no
# longer sets; the fixture runs fairseq-train with the task's config under that name.
WITH_BART_TASK_FIXED = (
    "import sys; from fairseq.tasks.translation_from_pretrained_bart import TranslationFromPretrainedBARTTask as T; "
    "T.args = property(lambda self: self.cfg); from fairseq_cli.train import cli_main; "
    "sys.argv = ['fairseq-train', *sys.argv[1:]]; cli_main()"
)


@pytest.fixture(scope="session")
def pretrained(data_bin, tmp_path_factory):
    """{layout: checkpoint} of two tiny pretrained checkpoints with language tokens, each trained 3 updates by its
    own fairseq task: an mBART-shaped one (``translation_from_pretrained_bart``: pre-norm, learned positions,
    embedding norm, ``x </s> [en]`` -> ``y </s> [de]``) and a pre-norm multilingual transformer
    (``translation_multi_simple_epoch``: ``__en__ x </s>`` -> ``__de__ y </s>``)."""
    def pretrain(root):
        run([sys.executable, "-c", WITH_BART_TASK_FIXED, str(data_bin), *BART_TASK, "--arch", "mbart_base",
             *PRETRAINED_SHAPE, *PRETRAINING, "--save-dir", str(root / "mbart")])
        run([fairseq_command("fairseq-train"), str(data_bin), *MULTILINGUAL_TASK, "--arch", "transformer",
             "--share-all-embeddings", *PRETRAINED_SHAPE, *PRETRAINING, "--save-dir", str(root / "multilingual")])

    root = built_once(tmp_path_factory, "pretrained", pretrain)
    return {layout: str(root / layout / "checkpoint_last.pt") for layout in ("mbart", "multilingual")}


TRAIN_EN = ["the lower house passed the new budget .", "the lowest prices were newer .",
            "she passed the houses slowly ."] * 3
TRAIN_DE = ["das unterhaus verabschiedete den neuen haushalt .",
            "die niedrigsten preise waren neuer .", "sie ging langsam an den häusern vorbei ."] * 3


def train_sentencepiece(directory):
    """A tiny sentencepiece model trained on TRAIN_EN and TRAIN_DE, standing in for a pretrained
    checkpoint's (a corpus this small holds fewer than 60 pieces: the limit is soft)."""
    corpus = directory / "spm-train.txt"
    corpus.write_text("\n".join(TRAIN_EN + TRAIN_DE) + "\n", encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(directory / "spm"), vocab_size=60,
        hard_vocab_limit=False, minloglevel=2,
    )
    return directory / "spm.model"


@pytest.fixture
def spm_model(tmp_path):
    """``train_sentencepiece``'s model."""
    return train_sentencepiece(tmp_path)


@pytest.fixture(scope="session")
def spm_checkpoint(tmp_path_factory):
    """(checkpoint, data-bin, sentencepiece model): TRAIN_EN and TRAIN_DE, three documents, segmented
    by ``train_sentencepiece``'s model as prepare_documents.py --spm-model segments them and binarized
    as the train and test splits, and a tiny fairseq transformer built on them and saved untrained
    (what a sentencepiece model's checkpoint holds is its dictionary: the scoring tools' checks read it)."""
    root = built_once(tmp_path_factory, "spm_checkpoint", write_spm_checkpoint)
    return root / "checkpoint.pt", root / "bin", root / "spm.model"


def write_spm_checkpoint(root):
    """``spm_checkpoint``'s files in ``root``."""
    model = train_sentencepiece(root)
    for lang, lines in (("en", TRAIN_EN), ("de", TRAIN_DE)):
        (root / f"documents.{lang}").write_text("\n\n".join("\n".join(lines[i:i + 3]) for i in (0, 3, 6)) + "\n",
                                                encoding="utf-8")
    prepare_documents.main(["--format", "blank-lines", "--source", str(root / "documents.en"),
                            "--target", str(root / "documents.de"), "--source-lang", "en", "--target-lang", "de",
                            "--output-prefix", str(root / "pieces"), "--spm-model", str(model)])
    preprocess("--source-lang", "en", "--target-lang", "de",
               "--trainpref", str(root / "pieces"), "--testpref", str(root / "pieces"), "--destdir", str(root / "bin"),
               "--joined-dictionary", "--workers", "1")
    shutil.copy(root / "pieces.docids", root / "bin" / "test.en-de.docids")
    _, transformer, _, cfg = build(root / "bin", "--arch", "transformer", *TINY_DIMS, task="translation")
    save_checkpoint(transformer, cfg, root / "checkpoint.pt")


TINY_TRANSFORMER_MODULES = ("encoder.embed_tokens, encoder.layers.0-1, decoder.embed_tokens, "
                            "decoder.layers.0-1, decoder.output_projection")


def fitted_parameters(log):
    """The log lines of a plain transformer's checkpoint loaded into a system
    (``checkpoint_fit.py``): (count, modules) of the loaded parameters and of the new ones."""
    loaded = re.search(r"parameters loaded from the checkpoint: (\d+) tensors: (.*)", log)
    new = re.search(r"new parameters \(not in the checkpoint\), freshly initialised: (\d+) tensors: (.*)", log)
    assert loaded and new, log[-3000:]
    return (int(loaded.group(1)), loaded.group(2)), (int(new.group(1)), new.group(2))


@functools.lru_cache(maxsize=None)
def training_config(command_line):
    """The config (``cfg``) fairseq-train makes of ``command_line`` (a tuple of its arguments), parsed and
    composed once a test process: composing takes fairseq a good part of a second, and many tests build
    from the same command line. A command line the parser refuses is refused at every call."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parsed = options.parse_args_and_arch(options.get_training_parser(), list(command_line))
    return convert_namespace_to_omegaconf(parsed)


def build(data_dir, *arguments, task="document_translation"):
    """(task, model, criterion, cfg) as fairseq-train would build them from ``arguments``; the cfg is
    the caller's own copy of ``training_config``'s."""
    from fairseq import tasks, utils

    cfg = copy.deepcopy(training_config((
        str(data_dir), "--user-dir", str(PLUGIN), "--task", task, "--cpu",
        "--criterion", "document_label_smoothed_cross_entropy" if task == "document_translation"
        else "label_smoothed_cross_entropy", "--label-smoothing", "0.1", *arguments,
    )))
    utils.import_user_module(cfg.common)
    torch.manual_seed(cfg.common.seed)
    fairseq_task = tasks.setup_task(cfg.task)
    model = fairseq_task.build_model(cfg.model)
    criterion = fairseq_task.build_criterion(cfg.criterion)
    return fairseq_task, model, criterion, cfg


def refused_option(capsys, data_dir, *arguments, task="document_translation") -> str:
    """The line fairseq's parser ends with when it refuses ``arguments`` (exit status 2, as
    fairseq-train would end: the command line is refused before anything is read)."""
    with pytest.raises(SystemExit) as refused:
        build(data_dir, *arguments, task=task)
    assert refused.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def save_checkpoint(model, cfg, path):
    """A checkpoint as fairseq's loader reads it (what fairseq-train writes, minus the optimizer)."""
    torch.save({
        "cfg": cfg, "model": model.state_dict(), "last_optimizer_state": None,
        "optimizer_history": [{"criterion_name": "x", "optimizer_name": "x", "lr_scheduler_state": {}, "num_updates": 0}],
        "extra_state": {"train_iterator": {"epoch": 1}},
    }, path)


def make_reads_nonzero(model, seed=0):
    """Give the Output Attention a random output projection, as training would: a fresh
    model adds exactly nothing from its memory, which would make context tests vacuous."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for unit in model.memory_units().values():
            weight = unit.read_attn.out_proj.weight
            weight.copy_(torch.randn(weight.shape, generator=generator) * 0.5)


def lane_steps(collated):
    """The sentence steps (``samples.LaneStep``) of a collated training window, or of a list of
    collated steps, as the criterion takes them."""
    from memory_nmt.pipeline.samples import read_lane_step, read_sample, steps_in

    if isinstance(collated, dict):
        return steps_in(read_sample(collated))
    return [read_lane_step(step) for step in collated]


def only_pass(collated):
    """The one forward pass (``samples.ForwardPass``) of a collated sentence step."""
    from memory_nmt.pipeline.samples import read_lane_step

    return read_lane_step(collated).only_pass


def batches(task, split, max_tokens=400, **kwargs):
    """The items fairseq would iterate for ``split`` (one epoch, one worker by default)."""
    task.load_dataset(split)
    return list(
        task.get_batch_iterator(task.dataset(split), max_tokens=max_tokens, **kwargs).next_epoch_itr(shuffle=False)
    )


def logits_of(logits, extra, row):
    return logits[row]


def walk(model, steps, of_row=logits_of):
    """``of_row(logits, extra, row)`` (default: the teacher-forced logits) of every sentence by
    id, each lane carrying its context from batch to batch in the pipeline's ``CarryStore``, each
    step the pipeline's teacher-forced step, as the criterion carries and runs them."""
    from memory_nmt.pipeline.carry import CarryStore
    from memory_nmt.pipeline.teacher_forcing import teacher_forced_step

    outputs, carries = {}, CarryStore()
    with torch.no_grad():
        for sample in steps:
            lanes = sample["lanes"]
            carry = carries.get(sample["position"])
            carry_in = carry.select(lanes) if carry is not None else None
            step = teacher_forced_step(model, carry_in, lanes, sample["net_input"], sample["target"])
            carries.keep(sample["position"], step.carry)
            logits, extra = step.net_output
            for row, sentence in enumerate(sample["id"].tolist()):
                outputs[sentence] = of_row(logits, extra, row)
    return outputs


def check_context_reach(model, steps, dictionary, reach, of_row=logits_of, threshold=1e-3):
    """Rolls the words of one source sentence (the first step's first row, in group 0): the next
    ``reach`` sentences of its document must change (``of_row`` by more than ``threshold``),
    and no other sentence may change at all."""
    reference = walk(model, steps, of_row)
    changed = [dict(s, net_input=dict(s["net_input"])) for s in steps]
    victim = int(changed[0]["lanes"][0])
    tokens = changed[0]["net_input"]["src_tokens"].clone()
    words = tokens[0].ge(dictionary.nspecial)
    tokens[0, words] = torch.roll(tokens[0, words], 1)
    changed[0]["net_input"]["src_tokens"] = tokens
    perturbed = walk(model, changed, of_row)
    for sample in steps[1:]:
        for sentence, lane in zip(sample["id"].tolist(), sample["lanes"].tolist()):
            difference = (reference[sentence] - perturbed[sentence]).abs().max().item()
            if sample["position"].group == 0 and lane == victim and sample["position"].step <= reach:
                assert difference > threshold, f"sentence {sentence} ignores a sentence of its context"
            else:
                assert difference == 0, f"sentence {sentence} read a sentence it must not read"


class Recorder:
    """Decodes steps with the document generator, keeping each step's context inputs and hypotheses."""

    def __init__(self, task, model, **generator_options):
        from memory_nmt.pipeline.generator import DocumentSequenceGenerator

        self.model = model
        self.generator = DocumentSequenceGenerator(
            [model], task.target_dictionary, beam_size=3, max_len_b=12, **generator_options
        )
        self.contexts = []
        self.sentence_context = model.sentence_context

    def record(self, *args, **kwargs):
        context = self.sentence_context(*args, **kwargs)
        self.contexts.append(context.inputs)
        return context

    def decode(self, steps):
        """{sentence id: best hypothesis} and, per step, (sample, context inputs, hypotheses)."""
        self.model.sentence_context = self.record
        try:
            best, trace = {}, []
            for sample in steps:
                hypotheses = self.generator.generate([self.model], sample)
                trace.append((sample, self.contexts[-1], hypotheses))
                for sentence, sentence_hypotheses in zip(sample["id"].tolist(), hypotheses):
                    assert sentence not in best, f"sentence {sentence} decoded twice"
                    best[sentence] = sentence_hypotheses[0]["tokens"].tolist()
            return best, trace
        finally:
            del self.model.sentence_context


def check_hypotheses_score_as_teacher_forced(task, model, trace, atol):
    """Each of the 3 best hypotheses of every decoded step (a Recorder trace) scores, token by
    token, what one teacher-forced pass over it with the same context inputs gives; returns how
    many hypotheses were compared."""
    pad, eos = task.target_dictionary.pad(), task.target_dictionary.eos()
    compared = 0
    for sample, inputs, hypotheses in trace:
        for rank in range(3):
            chosen = [h[rank] for h in hypotheses]
            width = max(h["tokens"].numel() for h in chosen)
            target = torch.full((len(chosen), width), pad)
            previous = torch.full((len(chosen), width), pad)
            for row, hypothesis in enumerate(chosen):
                tokens = hypothesis["tokens"]
                target[row, : tokens.numel()] = tokens
                previous[row, 0], previous[row, 1: tokens.numel()] = eos, tokens[:-1]
            net_input = dict(sample["net_input"], prev_output_tokens=previous)
            with torch.no_grad():
                log_probs = model.get_normalized_probs(model(**net_input, **inputs), log_probs=True)
            forced = log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
            for row, hypothesis in enumerate(chosen):
                scores = hypothesis["positional_scores"]
                assert torch.allclose(forced[row, : scores.numel()], scores, atol=atol)
                compared += 1
    return compared


def hypotheses_of(output):
    return {int(i): text for i, text in re.findall(r"^H-(\d+)\t[^\t]*\t(.*)$", output, re.M)}


def check_clis_and_hub_translate_alike(data_bin, checkpoint, model_class, buffer_size=3, user_dir=PLUGIN, options=()):
    """fairseq-generate, fairseq-interactive (documents separated by empty lines, read
    ``buffer_size`` lines at a time) and the hub of ``model_class`` translate the test documents
    with ``checkpoint`` alike, every sentence once; ``options``: the command lines' task options
    (the hub takes the checkpoint's)."""
    decoding = ["--user-dir", str(user_dir), "--task", "document_translation", "--path", str(checkpoint),
                "--beam", "3", "--max-len-b", "20", "--cpu", *options]
    generated = hypotheses_of(run([
        fairseq_command("fairseq-generate"), str(data_bin), *decoding, "--gen-subset", "test", "--max-tokens", "200",
    ]).stdout)
    sentences = sum(1 for _ in open(data_bin / "test.en-de.docids"))
    assert sorted(generated) == list(range(sentences))
    expected = [generated[i] for i in range(sentences)]

    lines = (data_bin.parent / "raw" / "test.en").read_text().splitlines()
    interactive = run_command(
        [fairseq_command("fairseq-interactive"), str(data_bin), *decoding,
         "--source-lang", "en", "--target-lang", "de", "--buffer-size", str(buffer_size), "--batch-size", "3"],
        input="\n".join(lines) + "\n")
    assert interactive.returncode == 0, interactive.stderr[-3000:]
    translated = hypotheses_of(interactive.stdout)
    assert sorted(translated) == list(range(len(lines)))
    assert [translated[i] for i, line in enumerate(lines) if line] == expected

    hub = model_class.from_pretrained(
        str(checkpoint.parent), checkpoint_file=checkpoint.name, data_name_or_path=str(data_bin)
    )
    hub.cfg.generation.max_len_b = 20
    documents = [d.split("\n") for d in "\n".join(lines).strip("\n").split("\n\n")]
    assert [s for t in hub.translate_documents(documents, beam=3) for s in t] == expected


def load_script(path: Path):
    """The module of a script outside any package (``examples/learn_to_remember/*.py``), imported
    from its file under its file name, without adding its folder to the import path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def script_in_process(monkeypatch, capsys, script: Path, *arguments):
    """``python script arguments`` as a finished process (``subprocess.CompletedProcess``: exit status,
    stdout, stderr), run by calling the script's ``main`` in this process under the script's name, which
    argparse names in its errors; a message ``main`` exits with goes to stderr with exit status 1, as
    Python does with it. Only for what ``main`` ends itself: an exception it leaves to the interpreter
    (and to the plugin's one-line errors, ``memory_nmt/one_line_errors.py``) reaches the test instead."""
    monkeypatch.setattr(sys, "argv", [str(script), *arguments])
    returncode = 0
    try:
        load_script(script).main()
    except SystemExit as exited:
        if isinstance(exited.code, str):
            print(exited.code, file=sys.stderr)
        returncode = 1 if isinstance(exited.code, str) else exited.code or 0
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(sys.argv, returncode, captured.out, captured.err)
