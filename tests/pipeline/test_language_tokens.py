"""Stage one from a pretrained checkpoint with language tokens: a tiny mBART-shaped model trained by
fairseq's ``translation_from_pretrained_bart`` (pre-norm, learned positions, embedding norm,
``x </s> [en]`` → ``y </s> [de]``) and a tiny pre-norm multilingual transformer trained by
``translation_multi_simple_epoch`` (``__en__ x </s>`` → ``__de__ y </s>``). Each document system
built on either, with the options ``memory-nmt-checkpoint-options`` reads from it, translates as the
checkpoint does under its own task before any update (the same hypotheses and scores) wherever
the system computes what the sentence model computes; with a language token in the wrong place
it translates otherwise; without the checkpoint's languages it is refused, naming ``--langs``."""
import re
import shlex

import pytest
import torch
from fairseq import checkpoint_utils, options as fairseq_options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from commands import run_command
from conftest import (
    PLUGIN, REPO, batches, build, check_clis_and_hub_translate_alike, fairseq_command, run, save_checkpoint,
    script_in_process,
)
from memory_nmt.pipeline.checkpoint_fit import CheckpointFit, CheckpointMismatchError, check_options
from memory_nmt.pipeline.option_ranges import OptionError
from memory_nmt_tools.checkpoint_options import checkpoint_options

SYSTEMS = {  # --arch, its options, and which sentences it translates as the sentence model does
    "sentence": (["--arch", "transformer"], "all"),
    "memory": (["--arch", "transformer_recurrent_memory", "--memory-size", "4"], "all"),
    "concat": (["--arch", "transformer_context_concat"], "first"),
    "amn": (["--arch", "transformer_associated_memory"], "first"),
    "local_global": (["--arch", "transformer_local_global", "--chunk-sentences", "1", "--global-layer", "extra"], "all"),
}
DECODING = ["--beam", "3", "--max-len-b", "12"]


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

    with pytest.MonkeyPatch.context() as patch:  # as conftest's WITH_BART_TASK_FIXED
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


def document_system(data_bin, path, *options, lang_dict=None):
    """(task, model): a document system with ``path``'s shape and languages, started from its weights
    as --finetune-from-model starts it."""
    task, model, _, cfg = build(data_bin, *checkpoint_options(path, lang_dict=lang_dict), *options)
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
    return checkpoint_options(path, "languages")


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
    shape = checkpoint_options(path, "shape")
    task, model, _, cfg = build(data_bin, *shape, *SYSTEMS["memory"][0])
    with pytest.raises(CheckpointMismatchError, match=r"encoder\.embed_tokens\.weight has shape .* give its --langs"):
        model.load_state_dict(checkpoint_utils.load_checkpoint_to_cpu(path)["model"], model_cfg=cfg.model)


def test_a_checkpoint_built_with_other_options_is_refused_naming_them(data_bin, pretrained, tmp_path):
    """fairseq-train --finetune-from-model of the mBART-shaped checkpoint into a post-norm model with
    sinusoidal positions (its shape options left out): refused on one line naming the options to give."""
    path = pretrained["mbart"]
    shape = checkpoint_options(path, "shape")
    left_out = ("--encoder-normalize-before", "--decoder-normalize-before", "--encoder-learned-pos",
                "--decoder-learned-pos", "--layernorm-embedding")
    refused = run_command(
        [fairseq_command("fairseq-train"), str(data_bin), "--user-dir", str(PLUGIN), "--task", "document_translation",
         *SYSTEMS["memory"][0], *(option for option in shape if option not in left_out), *language_options(path),
         "--finetune-from-model", path, "--criterion", "document_label_smoothed_cross_entropy", "--optimizer",
         "adam", "--lr", "1e-4", "--max-update", "1", "--max-tokens", "400", "--cpu", "--no-save",
         "--save-dir", str(tmp_path), "-s", "en", "-t", "de"])
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    named = re.search(r"does not fit this model: it was built with (.*); give the checkpoint's "
                      r"\(memory-nmt-checkpoint-options", refused.stderr)
    assert named and named[1].split(", ") == list(left_out), refused.stderr[-2000:]


def test_a_checkpoint_whose_tensors_fit_but_built_otherwise_is_loaded_with_a_warning(data_bin, pretrained, caplog):
    """The heads and the activation shape no tensor: the model takes the checkpoint's weights, but the
    warning names what it computes otherwise; with the checkpoint's own options there is none."""
    path = pretrained["mbart"]
    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    other = ["--activation-fn", "relu", "--decoder-attention-heads", "2"]
    for options, warned in (([], []), (other, ["--decoder-attention-heads 4 (this model's: 2), --activation-fn gelu "
                                                "(this model's: relu)"])):
        _, model, _, cfg = build(data_bin, *checkpoint_options(path), *SYSTEMS["memory"][0], *options)
        caplog.clear()
        check_options(path, state["cfg"]["model"], CheckpointFit(model, state["model"]), cfg.model)
        warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
        assert warnings == [f"{path} was built with {names}: this model takes its weights but computes otherwise than "
                            "it did; to start from what it computes, give the checkpoint's "
                            f"(memory-nmt-checkpoint-options {path} prints them)" for names in warned]


def test_checkpoint_options_name_the_checkpoints_shape_and_languages(pretrained, monkeypatch, capsys):
    """Its command line run in this process."""
    result = script_in_process(monkeypatch, capsys, REPO / "scripts" / "checkpoint_options.py", pretrained["mbart"])
    assert result.returncode == 0, result.stderr[-2000:]
    printed = result.stdout.split()
    for flag in ("--encoder-normalize-before", "--encoder-learned-pos", "--layernorm-embedding", "--share-all-embeddings"):
        assert flag in printed
    assert printed[printed.index("--activation-fn") + 1] == "gelu" and printed[-2:] == ["--langs", "en,de"]
    multilingual = checkpoint_options(pretrained["multilingual"])
    assert checkpoint_options(pretrained["multilingual"], "languages") == multilingual[multilingual.index("--langs"):] == [
        "--langs", "en,de", "--lang-tok-style", "multilingual", "--encoder-langtok", "src", "--decoder-langtok"]
    assert checkpoint_options(pretrained["multilingual"], "shape") == multilingual[:multilingual.index("--langs")]


def saved_as(path, destination, **task_fields):
    """``path``'s checkpoint with ``task_fields`` in its task's config; with NLLB's data-source tags
    (``add_data_source_prefix_tags``), three more embedding rows for them after the language tokens."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    vars(state["cfg"]["task"]).update(task_fields)  # the multilingual task's config: an argparse Namespace
    tags = None  # the same rows in every shared embedding matrix
    for name, weight in state["model"].items() if task_fields.get("add_data_source_prefix_tags") else ():
        if name.endswith("embed_tokens.weight") or name.endswith("output_projection.weight"):
            tags = torch.randn(3, weight.size(1)) if tags is None else tags
            state["model"][name] = torch.cat([weight, tags])
    torch.save(state, destination)
    return str(destination)


def test_nllbs_data_source_tags_follow_the_language_tokens(data_bin, pretrained, tmp_path):
    """NLLB-200's dictionary ends with the NLLB branch's data-source tags after its language tokens:
    --add-data-source-prefix-tags adds them there, checkpoint_options reads it from the checkpoint, and
    the checkpoint loads; no sentence gets a tag."""
    path = saved_as(pretrained["multilingual"], tmp_path / "nllb.pt", add_data_source_prefix_tags=True)
    languages = checkpoint_options(path, "languages")
    assert "--add-data-source-prefix-tags" in languages
    task, model = document_system(data_bin, path, *SYSTEMS["memory"][0])
    dictionary = task.source_dictionary
    assert [dictionary[i] for i in range(len(dictionary) - 5, len(dictionary))] == [
        "__en__", "__de__", "<MINED_DATA>", "<MMT_BT_DATA>", "<SMT_BT_DATA>"]
    tags = set(range(len(dictionary) - 3, len(dictionary)))
    for sample in batches(task, "test"):
        assert not tags & set(sample["net_input"]["src_tokens"].unique().tolist())
        assert not tags & set(sample["target"].unique().tolist())
    shape = checkpoint_options(path, "shape")
    without_tags, *_ = build(data_bin, *shape, *checkpoint_options(pretrained["multilingual"], "languages"),
                             *SYSTEMS["memory"][0])
    assert len(without_tags.source_dictionary) == len(dictionary) - 3



def test_a_checkpoint_whose_languages_came_from_a_file_takes_the_file(data_bin, pretrained, tmp_path, monkeypatch,
                                                                       capsys):
    """mBART-50's finetuned models read their languages from --lang-dict: checkpoint_options asks for
    the file, and the document task reads the languages from it as translation_multi_simple_epoch does."""
    path = saved_as(pretrained["multilingual"], tmp_path / "from_a_file.pt", langs=None, lang_dict="/gone/langs.txt")
    command = [REPO / "scripts" / "checkpoint_options.py", path, "--only", "languages"]
    asked = script_in_process(monkeypatch, capsys, *command)
    assert asked.returncode != 0 and "--lang-dict /gone/langs.txt: give that file" in asked.stderr
    lang_dict = tmp_path / "langs.txt"
    lang_dict.write_text("en\nde\n", encoding="utf-8")
    given = script_in_process(monkeypatch, capsys, *command, "--lang-dict", str(lang_dict))
    assert given.returncode == 0, given.stderr[-2000:]
    languages = given.stdout.split()
    assert languages[:2] == ["--lang-dict", str(lang_dict)] and "--encoder-langtok" in languages
    both = script_in_process(monkeypatch, capsys, *command[:2], "--lines", "--lang-dict", str(lang_dict))
    assert both.stdout.splitlines() == [shlex.join(checkpoint_options(path, "shape")), given.stdout.strip()]
    task, _ = document_system(data_bin, path, *SYSTEMS["memory"][0], lang_dict=str(lang_dict))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    for unusable, says in ((tmp_path / "gone.txt", "cannot read it"), (empty, "names no language")):
        with pytest.raises(OptionError, match=f"--lang-dict {unusable}: {says}"):
            build(data_bin, *checkpoint_options(path, "shape"), *SYSTEMS["memory"][0], "--lang-dict", str(unusable),
                  *languages[2:])
    assert task.language_tokens == document_system(data_bin, pretrained["multilingual"], *SYSTEMS["memory"][0])[0].language_tokens


def decoding_task(data_bin, path, *options):
    """The document task as fairseq-generate sets it up to decode ``path``."""
    from fairseq import tasks
    from fairseq.utils import import_user_module

    args = fairseq_options.parse_args_and_arch(fairseq_options.get_generation_parser(), [
        str(data_bin), "--user-dir", str(PLUGIN), "--task", "document_translation", "--path", str(path), *options])
    cfg = convert_namespace_to_omegaconf(args)
    import_user_module(cfg.common)
    return tasks.setup_task(cfg.task)


def document_checkpoint(data_bin, path, destination):
    """A memory model started from ``path`` with its language options, saved as fairseq-train saves it."""
    _, model, _, cfg = build(data_bin, *checkpoint_options(path), *SYSTEMS["memory"][0])
    save_checkpoint(model, cfg, destination)
    return destination


LANGUAGE_RUNS = [  # (the checkpoint, this command line's language options, the refusal's words or None)
    ("mbart", [], None),
    ("multilingual", [], None),
    ("document", [], None),  # a memory model finetuned from the multilingual checkpoint
    ("multilingual", ["--lang-dict", "{en_de}", "--lang-tok-style", "multilingual", "--encoder-langtok", "src",
                      "--decoder-langtok"], None),
    ("mbart", ["--langs", "de,en", "--change-languages"], None),
    ("mbart", ["--langs", "de,en"], "--langs de,en (the checkpoint's: en,de); give the checkpoint's (--langs en,de), or "
                                    "leave them out to take them from it"),
    ("mbart", ["--lang-dict", "{de_en}"], "--lang-dict {de_en}: de,en (the checkpoint's: en,de)"),
    ("mbart", ["--langs", "en,de", "--decoder-langtok"], "--decoder-langtok (the checkpoint has not)"),
    ("multilingual", ["--langs", "en,de"], "--encoder-langtok none (the checkpoint's: src), no --decoder-langtok (the "
                                           "checkpoint has it); give the checkpoint's (--langs en,de --lang-tok-style "
                                           "multilingual --encoder-langtok src --decoder-langtok)"),
    ("multilingual", ["--langs", "en,de", "--encoder-langtok", "tgt", "--decoder-langtok"],
     "--encoder-langtok tgt (the checkpoint's: src)"),
    ("multilingual", ["--langs", "en,de", "--encoder-langtok", "src", "--decoder-langtok", "--lang-tok-style", "mbart"],
     "--lang-tok-style mbart (the checkpoint's: multilingual)"),
    ("multilingual", ["--langs", "en,de", "--encoder-langtok", "src", "--decoder-langtok",
                      "--add-data-source-prefix-tags"], "--add-data-source-prefix-tags (the checkpoint has not)"),
    ("document", ["--langs", "en,de"], "no --decoder-langtok (the checkpoint has it)"),
    ("sentence", ["--langs", "en,de"], "--langs en,de (the checkpoint has no language tokens); leave them out, as it "
                                       "places no language tokens"),
]


@pytest.fixture(scope="module")
def language_checkpoints(data_bin, pretrained, sentence_checkpoint, tmp_path_factory):
    """{name: checkpoint} of every LANGUAGE_RUNS case, and {name: file} of two --lang-dict files."""
    root = tmp_path_factory.mktemp("languages")
    for name, langs in (("en_de", "en\nde\n"), ("de_en", "de\nen\n")):
        (root / f"{name}.txt").write_text(langs, encoding="utf-8")
    checkpoints = {**pretrained, "sentence": str(sentence_checkpoint),
                   "document": str(document_checkpoint(data_bin, pretrained["multilingual"], root / "document.pt"))}
    return checkpoints, {name: str(root / f"{name}.txt") for name in ("en_de", "de_en")}


# every case in training; in decoding, which reads the same options by the same code, the checkpoints without
# options given and those of a document model and a sentence model
LANGUAGE_COMMANDS = [("fairseq-train --finetune-from-model", *case) for case in LANGUAGE_RUNS] + [
    ("fairseq-generate --path", *case) for case in LANGUAGE_RUNS if not case[1] or case[0] in ("document", "sentence")]


@pytest.mark.parametrize("command, checkpoint, options, refusal", LANGUAGE_COMMANDS,
                         ids=[f"{command.split()[0]} {c} {' '.join(o) or 'none'}" for command, c, o, _ in LANGUAGE_COMMANDS])
def test_a_runs_language_options_are_the_checkpoints(data_bin, language_checkpoints, caplog, command, checkpoint,
                                                      options, refusal):
    """Finetuning from a checkpoint, or decoding one: a command line that gives no language options takes
    the checkpoint's (one log line), one that gives others is refused on one line naming each option with
    both values (unless --change-languages, in training); a sentence model's checkpoint has none."""
    checkpoints, files = language_checkpoints
    path = checkpoints[checkpoint]
    options = [option.format(**files) for option in options]
    training = command.startswith("fairseq-train")
    start = (lambda: build(data_bin, *checkpoint_options(path, "shape"), *SYSTEMS["memory"][0], "--finetune-from-model",
                           path, *options)[0]) if training else (lambda: decoding_task(data_bin, path, *options))
    if refusal is not None:
        with pytest.raises(OptionError) as refused:
            start()
        change = ", or --change-languages to train it with these" if training else ""
        assert str(refused.value).startswith(f"{path} was trained with other language options than this command "
                                             "line's: "), refused.value
        assert refusal.format(**files) in str(refused.value) and str(refused.value).endswith(change), refused.value
        return
    caplog.clear()
    with caplog.at_level("INFO"):
        task = start()
    taken = [record.getMessage() for record in caplog.records if "which this command line does not give" in
             record.getMessage()]
    if options:
        assert not taken
        return
    own = checkpoint_options(path, "languages")
    assert taken == [f"language options of {path}, which this command line does not give: {' '.join(own)}"]
    assert task.language_tokens == build(data_bin, *checkpoint_options(path), *SYSTEMS["memory"][0])[0].language_tokens


@pytest.mark.parametrize("lang_dict, says", [
    ("gone.txt", "cannot read it (No such file or directory)"),
    ("empty.txt", "names no language"),
    ("de_fr.txt", "lacks en, which {path} was trained on"),
    ("de_en.txt", "names other languages than {path_file}, which {path} was trained with"),
])
def test_checkpoint_options_check_the_lang_dict_they_are_given(pretrained, tmp_path, monkeypatch, capsys, lang_dict,
                                                               says):
    """``memory-nmt-checkpoint-options --lang-dict`` exited 0 with a file it could not read, an empty one, or one
    naming other languages than the checkpoint's task named (its pairs) or read (its own file, where it is here)."""
    for name, langs in (("empty.txt", "\n"), ("de_fr.txt", "de\nfr\n"), ("de_en.txt", "de\nen\n"),
                        ("en_de.txt", "en\nde\n")):
        (tmp_path / name).write_text(langs, encoding="utf-8")
    own_file = tmp_path / "en_de.txt" if lang_dict == "de_en.txt" else "/gone/langs.txt"
    path = saved_as(pretrained["multilingual"], tmp_path / "from_a_file.pt", langs=None, lang_dict=str(own_file))
    done = script_in_process(monkeypatch, capsys, REPO / "scripts" / "checkpoint_options.py", path, "--only",
                             "languages", "--lang-dict", str(tmp_path / lang_dict))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"checkpoint_options.py: error: --lang-dict {tmp_path / lang_dict}: "
        + says.format(path=path, path_file=own_file)
        + ("" if lang_dict in ("gone.txt", "empty.txt") else
           ": give that file" if lang_dict == "de_en.txt" else ": give the file of the checkpoint's languages")
        + ("; give the file of the checkpoint's languages, one a line in its order (mBART-50's ML50_langs.txt)"
           if lang_dict in ("gone.txt", "empty.txt") else "")), done.stderr[-2000:]


@pytest.mark.parametrize("layout", ["mbart", "multilingual"])
def test_the_hub_translates_as_generate_and_interactive_without_the_language_token(data_bin, pretrained, layout,
                                                                                    tmp_path):
    """A document system started from either checkpoint, saved: fairseq-generate, fairseq-interactive
    and the hub translate alike (fairseq's hub left the target's language token in every translation,
    '... [de]' or '__de__ ...', where the command lines strip what the generator strips)."""
    from memory_nmt.systems.recurrent_memory.model import RecurrentMemoryTransformerModel

    path = pretrained[layout]
    task, model, _, cfg = build(data_bin, *checkpoint_options(path), *SYSTEMS["memory"][0])
    model.load_state_dict(checkpoint_utils.load_checkpoint_to_cpu(path)["model"], model_cfg=cfg.model)
    save_checkpoint(model, cfg, tmp_path / "document.pt")
    check_clis_and_hub_translate_alike(data_bin, tmp_path / "document.pt", RecurrentMemoryTransformerModel,
                                       options=["-s", "en", "-t", "de", *language_options(path)])


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


@pytest.mark.parametrize("layout", ["mbart", "multilingual"])
def test_contrastive_candidates_score_as_the_checkpoint_scores_them(data_bin, pretrained, layout):
    """A contrastive item's sentences get the language tokens where the checkpoint's task puts them, so
    the sentence system built from the checkpoint scores a candidate as the checkpoint scores that
    sentence pair under its own task (the sum of its tokens' log-probabilities, teacher-forced, the
    decoder input starting from mBART's [de]); without the tokens the scores differ."""
    from fairseq.tasks.translation_from_pretrained_bart import TranslationFromPretrainedBARTTask

    from memory_nmt.evaluation.contrastive import ContrastiveItem, score_items

    path = pretrained[layout]
    with pytest.MonkeyPatch.context() as patch:  # as conftest's WITH_BART_TASK_FIXED
        patch.setattr(TranslationFromPretrainedBARTTask, "args", property(lambda self: self.cfg), raising=False)
        (own_model,), _, own_task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": str(data_bin)})
        own_task.load_dataset("test")
    dataset = own_task.dataset("test")
    dataset = dataset.datasets[0] if layout == "multilingual" else dataset
    sample = dataset.collater([dataset[i] for i in range(6)])
    with torch.no_grad():
        log_probs = own_model.eval().get_normalized_probs(own_model(**sample["net_input"]), log_probs=True)
    target = sample["target"]
    own_scores = log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1).masked_fill(
        target.eq(own_task.target_dictionary.pad()), 0).sum(-1)

    task, model = document_system(data_bin, path, *SYSTEMS["sentence"][0])
    language_tokens = {task.language_tokens.source, task.language_tokens.target} - {None}
    sources = [task.source_dictionary.string(dataset[i]["source"], extra_symbols_to_ignore=language_tokens)
               for i in sample["id"].tolist()]
    targets = [task.target_dictionary.string(dataset[i]["target"], extra_symbols_to_ignore=language_tokens)
               for i in sample["id"].tolist()]
    items = [ContrastiveItem([], [], source, [reference, targets[i - 1]], 0, f"test:{i}")
             for i, (source, reference) in enumerate(zip(sources, targets))]
    scores = [candidates[0] for candidates in score_items(model, task, items)]
    assert scores == pytest.approx(own_scores.tolist(), abs=1e-4)
    task.language_tokens = None
    assert [candidates[0] for candidates in score_items(model, task, items)] != pytest.approx(own_scores.tolist(), abs=1e-4)


@pytest.mark.parametrize("system", [name for name in SYSTEMS if name != "sentence"])
def test_fairseq_train_finetunes_each_system_from_the_mbart_checkpoint(data_bin, pretrained, system, tmp_path):
    """fairseq-train --finetune-from-model from the mBART-shaped checkpoint (the multilingual layout runs
    through the from_pretrained recipe's test): every one of its tensors is loaded into the system,
    only the system's own parameters are new, and an update is taken with the language tokens in place."""
    path = pretrained["mbart"]
    trained = run([fairseq_command("fairseq-train"), str(data_bin), "--user-dir", str(PLUGIN), "--task",
                   "document_translation", *SYSTEMS[system][0], *checkpoint_options(path), "--finetune-from-model", path,
                   "--criterion", "document_label_smoothed_cross_entropy", "--optimizer", "adam", "--lr", "1e-4",
                   "--max-update", "1", "--max-tokens", "400", "--cpu", "--dropout", "0.0", "--no-save",
                   "--save-dir", str(tmp_path), "--log-format", "simple", "-s", "en", "-t", "de"])
    log = trained.stdout + trained.stderr
    loaded = re.search(r"parameters loaded from the checkpoint: (\d+) tensors", log)
    new = re.search(r"new parameters \(not in the checkpoint\), freshly initialised: \d+ tensors: (.*)", log)
    weights = [name for name in checkpoint_utils.load_checkpoint_to_cpu(path)["model"] if not name.endswith(".version")]
    if loaded is None:  # a system without parameters of its own: fairseq's strict load_state_dict took them all
        assert system == "concat" and f"loading pretrained model from {path}" in log, log[-3000:]
    else:
        assert int(loaded[1]) == len(weights), log[-3000:]
    assert new is None or not re.search(r"embed_tokens|layers\.\d+(,|$)", new[1]), new[1]  # the system's own only
    assert "computes otherwise than it did" not in log, "built with the checkpoint's own options: no warning"
    assert re.search(r"\| train \| epoch 001 \|.*\| num_updates 1 \|", log), log[-2000:]
