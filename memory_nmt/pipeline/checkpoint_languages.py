"""A run's language-token options, taken from the checkpoint it loads or checked against it.

A pretrained checkpoint (mBART, mBART-50, NLLB), and every document model finetuned from one,
translates as it was trained only with its language tokens where its task put them
(``language_tokens.py``): the same languages in the same order, the same placement. So before
the document task builds its dictionaries, the options that place them (``--langs`` or
``--lang-dict``, ``--lang-tok-style``, ``--encoder-langtok``, ``--decoder-langtok``,
``--add-data-source-prefix-tags``) are compared with those of the checkpoint the run loads
(``checkpoints_loaded``: fairseq-generate's, -interactive's and -validate's ``--path``;
fairseq-train's run it resumes, else its ``--continue-once`` or ``--finetune-from-model``:
``training_start``):

- a command line that gives none of them takes the checkpoint's, and says so in one log line;
- one that gives others is refused on one line naming each option with both values, unless it
  asks for its own with ``--change-languages`` (training a pretrained model on other languages);
- a checkpoint without language tokens (a sentence model's, say) counts as one whose options are
  all off.

``LanguageOptions.of_checkpoint`` reads them from the task config of any checkpoint that has
them: mBART's pretraining (``denoising``, ``multilingual_denoising``) and finetuning
(``translation_from_pretrained_bart``), ``translation_multi_simple_epoch``, and the document task's
own; ``memory-nmt-checkpoint-options`` prints them from there.
"""
import logging
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from fairseq import utils
from omegaconf import DictConfig

from .checkpoint_files import config_value, mapped_checkpoint
from .language_tokens import MULTI_SIMPLE_EPOCH, languages, read_lang_dict
from .option_ranges import OptionError

logger = logging.getLogger(__name__)

DEFAULT_STYLE = "multilingual"
# fairseq-train's options that name the checkpoint it starts from (``training_start``)
STARTING_CHECKPOINT = ("finetune_from_model", "restore_file", "save_dir", "checkpoint_suffix", "continue_once")
SHOWN_LANGUAGES = 8  # a longer list is named by its length and first difference


@dataclass(frozen=True)
class LanguageOptions:
    """The document task's options that place language tokens, as values to compare."""

    langs: Tuple[str, ...] = ()  # the languages, in their order (from --langs or --lang-dict)
    lang_dict: Optional[str] = None  # the file they are read from, where they are
    lang_tok_style: str = DEFAULT_STYLE  # with encoder_langtok or decoder_langtok only
    encoder_langtok: Optional[str] = None
    decoder_langtok: bool = False
    add_data_source_prefix_tags: bool = False
    # the languages the checkpoint's task named besides its list (its pairs): a --lang-dict must hold them
    named: Tuple[str, ...] = ()

    @classmethod
    def of_run(cls, cfg) -> "LanguageOptions":
        """The options a document task's config gives (``--lang-dict`` read)."""
        return cls(tuple(languages(cfg)), cfg.lang_dict, cfg.lang_tok_style, cfg.encoder_langtok,
                   bool(cfg.decoder_langtok), bool(cfg.add_data_source_prefix_tags))

    @classmethod
    def of_checkpoint(cls, task) -> "LanguageOptions":
        """The options that place the tokens as a checkpoint's task (its config) placed them; a
        ``--lang-dict`` that is not on this machine leaves ``langs`` empty and ``lang_dict`` named."""
        langs = split_langs(config_value(task, "langs"))
        lang_dict = None if langs else config_value(task, "lang_dict")
        if lang_dict and os.path.isfile(lang_dict):
            langs = read_lang_dict(lang_dict)
        encoder_langtok, decoder_langtok = config_value(task, "encoder_langtok"), config_value(task, "decoder_langtok")
        multilingual = config_value(task, "_name") == MULTI_SIMPLE_EPOCH or encoder_langtok or decoder_langtok
        return cls(
            tuple(langs), lang_dict, str(config_value(task, "lang_tok_style") or DEFAULT_STYLE) if multilingual
            else DEFAULT_STYLE, encoder_langtok or None, bool(decoder_langtok),
            bool(config_value(task, "add_data_source_prefix_tags")), tuple(named_languages(task)),
        )

    @property
    def given(self) -> bool:
        """Whether any option differs from the document task's default (none placed)."""
        return (self.langs, self.lang_dict) != ((), None) or self.placement() != LanguageOptions().placement()

    @property
    def multilingual(self) -> bool:
        return bool(self.encoder_langtok or self.decoder_langtok)

    def placement(self) -> tuple:
        """What places the tokens, besides the languages."""
        return (self.lang_tok_style if self.multilingual else DEFAULT_STYLE, self.encoder_langtok,
                self.decoder_langtok, self.add_data_source_prefix_tags)

    def command_line(self) -> List[str]:
        """The document task's options that give these."""
        if self.lang_dict:
            options = ["--lang-dict", self.lang_dict]
        else:
            options = ["--langs", ",".join(self.langs)] if self.langs else []
        options += ["--add-data-source-prefix-tags"] if self.add_data_source_prefix_tags else []
        if self.multilingual:
            options += ["--lang-tok-style", self.lang_tok_style]
            options += ["--encoder-langtok", self.encoder_langtok] if self.encoder_langtok else []
            options += ["--decoder-langtok"] if self.decoder_langtok else []
        return options

    def differences(self, checkpoint: "LanguageOptions") -> List[str]:
        """Where these differ from ``checkpoint``'s, each option as a command line gives it with both values."""
        differing = []
        if self.langs != checkpoint.langs and checkpoint.langs:
            option = f"--lang-dict {self.lang_dict}:" if self.lang_dict else "--langs"
            differing.append(f"{option} {described(self.langs, checkpoint.langs)} "
                             f"(the checkpoint's: {described(checkpoint.langs, self.langs)})")
        elif not checkpoint.langs and not checkpoint.lang_dict and self.langs:
            differing.append(f"--langs {described(self.langs, ())} (the checkpoint has no language tokens)")
        if self.multilingual and checkpoint.multilingual and self.lang_tok_style != checkpoint.lang_tok_style:
            differing.append(f"--lang-tok-style {self.lang_tok_style} (the checkpoint's: {checkpoint.lang_tok_style})")
        if self.encoder_langtok != checkpoint.encoder_langtok:
            differing.append(f"--encoder-langtok {self.encoder_langtok or 'none'} "
                             f"(the checkpoint's: {checkpoint.encoder_langtok or 'none'})")
        for name in ("decoder_langtok", "add_data_source_prefix_tags"):
            if getattr(self, name) != getattr(checkpoint, name):
                flag = "--" + name.replace("_", "-")
                differing.append(f"{flag} (the checkpoint has not)" if getattr(self, name) else
                                 f"no {flag} (the checkpoint has it)")
        return differing

    def give_to(self, cfg):
        """Set a document task's config ``cfg`` to these options."""
        for name in ("lang_dict", "lang_tok_style", "encoder_langtok", "decoder_langtok",
                     "add_data_source_prefix_tags"):
            setattr(cfg, name, getattr(self, name))
        cfg.langs = None if self.lang_dict else ",".join(self.langs)

    def lacks(self, langs: Sequence[str]) -> List[str]:
        """Of the languages the checkpoint's task named (its pairs), those ``langs`` lacks."""
        return [lang for lang in self.named if lang not in langs]


def split_langs(langs) -> List[str]:
    """A task config's ``langs``: a comma-separated string, or a list (fairseq's older configs)."""
    if isinstance(langs, (list, tuple)):
        return [str(lang) for lang in langs]
    return [lang.strip() for lang in (langs or "").split(",") if lang.strip()]


def named_languages(task) -> List[str]:
    """The languages a checkpoint's task names besides its list: its pairs' and its direction's."""
    pairs = config_value(task, "lang_pairs") or []
    pairs = pairs.split(",") if isinstance(pairs, str) else pairs
    named = [lang for pair in pairs for lang in str(pair).split("-") if lang]
    named += [lang for lang in (config_value(task, "source_lang"), config_value(task, "target_lang")) if lang]
    return list(dict.fromkeys(named))


def described(langs: Sequence[str], other: Sequence[str]) -> str:
    """``en,de``, or for a long list its length and where it first differs from ``other``."""
    if not langs:
        return "none"
    if len(langs) <= SHOWN_LANGUAGES:
        return ",".join(langs)
    first = next((i for i, (a, b) in enumerate(zip(langs, other)) if a != b), min(len(langs), len(other)))
    where = f", number {first + 1} {langs[first]}" if first < len(langs) else ""
    return f"{len(langs)} languages ({','.join(langs[:3])},...{where})"


def checkpoints_loaded(paths: Optional[str], finetune_from_model: Optional[str], restore_file: Optional[str],
                       save_dir: Optional[str], checkpoint_suffix: str = "", continue_once: Optional[str] = None) -> List[str]:
    """The checkpoint files a run loads, as fairseq finds them: the --path of fairseq-generate,
    -interactive and -validate; else the one fairseq-train starts from (``training_start``). Only
    those that are files."""
    if paths:
        found = utils.split_paths(paths)
    else:
        start = training_start(finetune_from_model, restore_file, save_dir, checkpoint_suffix, continue_once)
        found = [start[0]] if start else []
    return [path for path in found if path and os.path.isfile(path)]


def training_start(finetune_from_model: Optional[str], restore_file: Optional[str], save_dir: Optional[str],
                   checkpoint_suffix: str = "", continue_once: Optional[str] = None) -> Optional[Tuple[str, str]]:
    """(the checkpoint fairseq-train starts from, the option that names it), as fairseq chooses it
    (``checkpoint_utils.load_checkpoint``): a --restore-file other than its default (with
    --checkpoint-suffix before ``.pt``); else the last checkpoint of the --save-dir it resumes
    (``checkpoint_last{suffix}.pt``); else, where there is none, --continue-once or
    --finetune-from-model. None where it starts afresh."""
    suffix = checkpoint_suffix or ""
    if restore_file and restore_file != "checkpoint_last.pt":
        return restore_file.replace(".pt", suffix + ".pt") if suffix else restore_file, "--restore-file"
    last = os.path.join(save_dir or "checkpoints", f"checkpoint_last{suffix}.pt")
    if os.path.isfile(last):
        return last, "--save-dir"
    if continue_once:
        return continue_once, "--continue-once"
    return (finetune_from_model, "--finetune-from-model") if finetune_from_model else None


def checkpoint_languages(path: str) -> LanguageOptions:
    """The language options of the checkpoint at ``path`` (its tensors mapped, not read)."""
    state = mapped_checkpoint(path)
    task = config_value(state.get("cfg") or {}, "task") or state.get("args") or {}
    return LanguageOptions.of_checkpoint(task)


def runs_task_config(cfg):
    """The run's own task config, which fairseq-train saves in its checkpoints: fairseq's ``setup_task``
    hands a task a copy of it merged with the task's defaults (``merge_with_parent``), whose parent
    is the run's config; ``cfg`` itself where it has no such parent (a config built alone)."""
    parent = cfg._get_parent() if isinstance(cfg, DictConfig) else None
    if isinstance(parent, DictConfig) and isinstance(parent.get("task"), DictConfig):
        return parent.task
    return cfg


def take_checkpoint_languages(cfg, checkpoints: Sequence[str], training: bool):
    """Give the document task's config ``cfg`` the language options of the checkpoints the run loads
    where it gives none (and the run's config, so that its checkpoints hold them); refuse it where it
    gives others (unless ``cfg.change_languages``)."""
    if cfg.change_languages:
        return
    run = LanguageOptions.of_run(cfg)
    for path in checkpoints:
        theirs = checkpoint_languages(path)
        if theirs.lang_dict and not theirs.langs and not run.langs:
            raise OptionError(
                f"{path} reads its languages from --lang-dict {theirs.lang_dict}, which is not on this machine: "
                "give that file (the checkpoint's languages, one a line in its order; mBART-50's ML50_langs.txt) "
                "as --lang-dict")
        if not run.given and theirs.given:
            for config in (cfg, runs_task_config(cfg)):  # the same config twice where it has no parent
                theirs.give_to(config)
            logger.info("language options of %s, which this command line does not give: %s", path,
                        " ".join(theirs.command_line()))
            run = LanguageOptions.of_run(cfg)
        differing = run.differences(theirs)
        if differing:
            change = ", or --change-languages to train it with these" if training else ""
            fix = (f"give the checkpoint's ({' '.join(theirs.command_line())}), or leave them out to take them from it"
                   if theirs.given else "leave them out, as it places no language tokens")
            raise OptionError(f"{path} was trained with other language options than this command line's: "
                              f"{', '.join(differing)}; {fix}{change}")
        lacking = theirs.lacks(run.langs) if theirs.lang_dict and not theirs.langs else []
        if lacking:
            raise OptionError(f"{'--lang-dict ' + run.lang_dict if run.lang_dict else '--langs'}: lacks "
                              f"{', '.join(lacking)}, which {path} was trained on: give the checkpoint's languages")
