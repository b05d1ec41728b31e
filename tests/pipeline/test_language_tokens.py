"""Stage one from a pretrained checkpoint with language tokens: a tiny mBART-shaped model trained by
fairseq's ``translation_from_pretrained_bart`` (pre-norm, learned positions, embedding norm,
``x </s> [en]`` → ``y </s> [de]``) and a tiny pre-norm multilingual transformer trained by
``translation_multi_simple_epoch`` (``__en__ x </s>`` → ``__de__ y </s>``). Each document system
built on either, with the options ``memory-nmt-checkpoint-options`` reads from it, translates as the
checkpoint does under its own task before any update (the same hypotheses and scores) wherever
the system computes what the sentence model computes; with a language token in the wrong place
it translates otherwise; without the checkpoint's languages it is refused, naming ``--langs``."""
import subprocess
import sys

import pytest
import torch
from fairseq import checkpoint_utils, options as fairseq_options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from conftest import PLUGIN, REPO, batches, build, fairseq_command, run
from memory_nmt.systems.checkpoint_fit import CheckpointMismatchError
from memory_nmt_tools.checkpoint_options import checkpoint_options

TINY_SHAPE = [
    "--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "4",
    "--decoder-attention-heads", "4", "--dropout", "0.0", "--encoder-normalize-before", "--decoder-normalize-before",
]
TRAINING = [
    "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "2",
    "--max-update", "3", "--max-tokens", "200", "--cpu", "--seed", "1", "--log-format", "simple",
    "--no-epoch-checkpoints", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--required-batch-size-multiple", "1", "-s", "en", "-t", "de",
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
SYSTEMS = {  # --arch, its options, and which sentences it translates as the sentence model does
    "sentence": (["--arch", "transformer"], "all"),
    "memory": (["--arch", "transformer_recurrent_memory", "--memory-size", "4"], "all"),
    "concat": (["--arch", "transformer_context_concat"], "first"),
    "amn": (["--arch", "transformer_associated_memory"], "first"),
    "local_global": (["--arch", "transformer_local_global", "--chunk-sentences", "1", "--global-layer", "extra"], "all"),
}
DECODING = ["--beam", "3", "--max-len-b", "12"]


@pytest.fixture(scope="module")
def pretrained(data_bin, tmp_path_factory):
    """{layout: checkpoint}: each trained 3 updates by its own fairseq task."""
    root = tmp_path_factory.mktemp("pretrained")
    run([sys.executable, "-c", WITH_BART_TASK_FIXED, str(data_bin), *BART_TASK, "--arch", "mbart_base",
         *TINY_SHAPE, *TRAINING, "--save-dir", str(root / "mbart")])
    run([fairseq_command("fairseq-train"), str(data_bin), *MULTILINGUAL_TASK, "--arch", "transformer",
         "--share-all-embeddings", *TINY_SHAPE, *TRAINING, "--save-dir", str(root / "multilingual")])
    return {layout: str(root / layout / "checkpoint_last.pt") for layout in ("mbart", "multilingual")}


def translations(task, model, samples, generation_options):
    """{sentence id: (best hypothesis's tokens, its score)}, decoded by ``task`` as fairseq-generate does."""
    parser = fairseq_options.get_generation_parser()
    args = fairseq_options.parse_args_and_arch(parser, ["x", "--user-dir", str(PLUGIN), *generation_options])
    generator = task.build_generator([model], convert_namespace_to_omegaconf(args).generation)
    best = {}
    with torch.no_grad():
        for sample in samples:
            for sentence, hypotheses in zip(sample["id"].tolist(), task.inference_step(generator, [model], sample)):
                best[sentence] = (hypotheses[0]["tokens"].tolist(), float(hypotheses[0]["score"]))
    return best


@pytest.fixture(scope="module")
def own_translations(pretrained, data_bin):
    """{layout: translations of the test split by the checkpoint under its own task}."""
    from fairseq.tasks.translation_from_pretrained_bart import TranslationFromPretrainedBARTTask

    with pytest.MonkeyPatch.context() as patch:  # as WITH_BART_TASK_FIXED
        patch.setattr(TranslationFromPretrainedBARTTask, "args", property(lambda self: self.cfg), raising=False)
        own = {}
        for layout, path in pretrained.items():
            (model,), cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": str(data_bin)})
            task.load_dataset("test")
            dataset = task.dataset("test")
            if layout == "multilingual":
                (dataset,) = dataset.datasets
            samples = task.get_batch_iterator(dataset, max_tokens=400).next_epoch_itr(shuffle=False)
            own[layout] = translations(task, model.eval(), samples, ["--task", cfg.task._name, *DECODING])
        return own


def document_system(data_bin, path, *options):
    """(task, model): a document system with ``path``'s shape and languages, started from its weights
    as --finetune-from-model starts it."""
    task, model, _, cfg = build(data_bin, *checkpoint_options(path), *options)
    model.load_state_dict(checkpoint_utils.load_checkpoint_to_cpu(path)["model"], model_cfg=cfg.model)
    task.trains_its_model = False
    return task, model.eval()


def document_translations(task, model, language_options):
    return translations(task, model, batches(task, "test"), ["--task", "document_translation", *language_options, *DECODING])


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("layout", ["mbart", "multilingual"])
def test_each_system_starts_translating_as_the_checkpoint(data_bin, pretrained, own_translations, layout, system):
    arch, exact = SYSTEMS[system]
    path = pretrained[layout]
    task, model = document_system(data_bin, path, *arch)
    got = document_translations(task, model, language_options(path))
    own = own_translations[layout]
    assert got.keys() == own.keys()
    firsts = {document.first for document in task.datasets["test"].documents}
    compared = own.keys() if exact == "all" else firsts
    for sentence in compared:
        assert got[sentence][0] == own[sentence][0], (sentence, got[sentence], own[sentence])
        assert got[sentence][1] == pytest.approx(own[sentence][1], abs=1e-5), sentence
    if exact == "first":
        assert any(got[s][1] != pytest.approx(own[s][1], abs=1e-5) for s in own.keys() - firsts), \
            "with its previous sentence, a sentence reads more than the sentence model does"
    target_token = task.language_tokens.target
    assert all(tokens[-1] == target_token for tokens, _ in got.values()) if layout == "mbart" else \
        all(tokens[0] == target_token for tokens, _ in got.values())


def language_options(path):
    """The language-token options of ``path``, which ``checkpoint_options`` gives last."""
    options = checkpoint_options(path)
    return options[options.index("--langs"):]


@pytest.mark.parametrize("layout, wrong", [
    ("mbart", ["--langs", "de,en"]),  # the checkpoint's tokens in another order: [en] where [de] was
    ("multilingual", ["--encoder-langtok", "tgt"]),  # the source starts with __de__
])
def test_a_language_token_in_the_wrong_place_translates_otherwise(data_bin, pretrained, own_translations, layout, wrong):
    path = pretrained[layout]
    task, model = document_system(data_bin, path, *SYSTEMS["memory"][0], *wrong)
    got = document_translations(task, model, [*language_options(path), *wrong])
    own = own_translations[layout]
    assert any(got[sentence] != own[sentence] for sentence in own)


def test_a_checkpoint_with_language_tokens_is_refused_without_its_langs(data_bin, pretrained):
    path = pretrained["multilingual"]
    shape = checkpoint_options(path)[:-len(language_options(path))]
    task, model, _, cfg = build(data_bin, *shape, *SYSTEMS["memory"][0])
    with pytest.raises(CheckpointMismatchError, match=r"encoder\.embed_tokens\.weight has shape .* give its --langs"):
        model.load_state_dict(checkpoint_utils.load_checkpoint_to_cpu(path)["model"], model_cfg=cfg.model)


def test_checkpoint_options_name_the_checkpoints_shape_and_languages(pretrained):
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "checkpoint_options.py"), pretrained["mbart"]],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    printed = result.stdout.split()
    for flag in ("--encoder-normalize-before", "--encoder-learned-pos", "--layernorm-embedding", "--share-all-embeddings"):
        assert flag in printed
    assert printed[printed.index("--activation-fn") + 1] == "gelu" and printed[-2:] == ["--langs", "en,de"]
    multilingual = checkpoint_options(pretrained["multilingual"])
    assert multilingual[multilingual.index("--langs"):] == [
        "--langs", "en,de", "--lang-tok-style", "multilingual", "--encoder-langtok", "src", "--decoder-langtok"]


@pytest.mark.parametrize("layout", ["mbart", "multilingual"])
def test_a_targets_decoder_input_starts_from_its_last_token_as_fairseqs_collater_makes_it(data_bin, pretrained, layout):
    """What a system teacher-forces a reference or hypothesis with (``teacher_forcing_input``) is the
    collater's decoder input: mBART's starts with [de], the multilingual one's with </s>."""
    from memory_nmt.pipeline.teacher_forcing import teacher_forcing_input

    task, model = document_system(data_bin, pretrained[layout], *SYSTEMS["sentence"][0])
    start = task.language_tokens.target if layout == "mbart" else task.target_dictionary.eos()
    for sample in batches(task, "test"):
        decoder_input = sample["net_input"]["prev_output_tokens"]
        assert bool(decoder_input[:, 0].eq(start).all())
        assert torch.equal(teacher_forcing_input(sample["target"], task.target_dictionary), decoder_input)
