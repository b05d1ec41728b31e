"""``document_translation``: fairseq's translation task, fed and decoded document by document.

Datasets are fairseq-preprocess output plus ``{split}.{src}-{tgt}.docids`` (``data.py``).
``build_model`` chooses, once, how the model's batches are planned from what its system declares
(``regime.py``); ``get_batch_iterator`` asks that regime's planner (``planners.py``) for the
epoch's batches: for the training split, when fairseq-train trains the model, what its papers
train it on (windows of sentence steps of documents in lanes that refill, batches of whole chunks,
or shuffled sentences with their context); for other splits, and every split of a model loaded
from a checkpoint to translate or score, one sentence step an item, never shuffled inside a group;
fairseq takes them from the task's epoch iterator (``batch_iterator.py``). ``train_step`` trains
on a batch (read as its type, ``samples.py``) through the criterion (``criterion.py``), which owns
what the lanes carry, and ``build_generator`` returns the document generator (``generator.py``),
so ``fairseq-train`` and ``fairseq-generate`` work unchanged. fairseq-interactive's lines, and the
hub's documents, are placed in documents by ``interactive.py``. Whatever ``--arch`` builds is run
as a document system (``system.py``): a model that mixes in ``DocumentSystem`` with its context,
any other fairseq encoder-decoder model sentence by sentence. A system whose sentences read
context sentences the data chooses (``chosen_context.py``) gets every split's batches from the
split's view for the run's ``--seed`` and the epoch. fairseq's precision options are checked as
fairseq-train builds the model, and named where decoding does not use them (``precision.py``).
"""
import ast
import glob
import hashlib
import logging
import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import List, Optional

import torch
from fairseq import utils
from fairseq.data import indexed_dataset
from fairseq.dataclass import ChoiceEnum
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq.search import LexicallyConstrainedBeamSearch
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from omegaconf import II
from omegaconf.errors import InterpolationResolutionError

from .batch_iterator import DocumentBatchIterator
from .checkpoint_fit import TRAINING_START, check_training_start
from .checkpoint_languages import checkpoints_loaded, take_checkpoint_languages
from .chosen_context import check_split
from .criterion import DocumentLabelSmoothedCrossEntropyConfig, DocumentLabelSmoothedCrossEntropyCriterion
from .data import DocumentDataError, DocumentDataset, read_docids
from .document_task import TranslatesDocuments
from .errors import UnsupportedOptionError
from .generator import CONTEXT_FROM, DocumentSequenceGenerator
from .interactive import InteractiveLines, InteractiveSession, Placement
from .language_tokens import ENCODER_LANGTOKS, LANG_TOK_STYLES, LanguageTokens
from .option_ranges import OptionError, Range, add_with_ranges, check_ranges, flag_of
from .planners import EpochRequest, PlannedEpoch
from .precision import PRECISION_OPTIONS, check_training_precision, warn_of_decoding_precision
from .regime import Regime
from .samples import lines_sample, read_sample
from .system import document_system
from .used_options import check_used

logger = logging.getLogger(__name__)

DDP_BACKENDS = ("legacy_ddp", "no_c10d")
TRAINING_BATCHES = ("system", "lanes")
LANE_ROWS = ("packed", "padded")
DEFAULT_WINDOW = "4"  # four sentence steps an update: chosen by time to quality (docs/training.md); the paper's is 'full'
DICTIONARIES = "dictionary_fingerprints"  # in a checkpoint's task state
LANE_TRAINING_OPTIONS = ("optimization_window", "lane_rows", "passes_per_step")  # the task's, for training in lanes
CRITERION_TRAINING_OPTIONS = ("gradient_reach", "gradient_across_windows", "max_graph_tokens")  # ... the criterion's


def fingerprint(dictionary) -> str:
    """A digest of a fairseq dictionary's symbols in their order (its indices)."""
    return hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()


def world_size(cfg) -> int:
    """The data-parallel workers of this run: the process group's, once fairseq has joined it
    (launched by torchrun, ``--distributed-world-size`` may be left out, and the task's config
    then still says 1), else ``--distributed-world-size``."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return max(cfg.distributed_world_size, torch.distributed.get_world_size())
    return cfg.distributed_world_size


def from_the_run(cfg, name: str):
    """The value of one of the task config's options of the whole run (``II(...)``), or None where
    the config is not part of a run's (built in Python, or a checkpoint's from before the option)."""
    try:
        value = getattr(cfg, name, None)
    except InterpolationResolutionError:  # a config without the run's part it points to
        return None
    return None if isinstance(value, str) and value.startswith("${") else value


def check_update_freq(update_freq):
    """Refuse an --update-freq below 1, which fairseq takes and fails on with a traceback."""
    for value in update_freq or ():
        if value < 1:
            raise OptionError(f"--update-freq {','.join(map(str, update_freq))}: give 1 or more batches an update")


def check_checkpoint_paths(paths: Optional[str]):
    """Refuse a --path (fairseq-generate, fairseq-interactive) that fairseq finds only with a
    traceback: a directory, or a local file missing with nothing beside it that fairseq could open
    in its place (its --checkpoint-suffix and sharded files extend the name before ``.pt``: a
    ``.pt`` file whose name begins with the name given)."""
    for path in utils.split_paths(paths or ""):
        if not path or "://" in path:
            continue
        if os.path.isdir(path):
            raise OptionError(f"--path {path}: a directory; give a checkpoint file in it, such as "
                              f"{os.path.join(path, 'checkpoint_best.pt')}")
        stem, extension = (path[:-len(".pt")], ".pt") if path.endswith(".pt") else (path, "")
        if not glob.glob(glob.escape(stem) + "*" + extension):
            raise OptionError(f"--path {path}: no such file; give a checkpoint that fairseq-train wrote")


def check_split_exists(data_path: str, split: str, source: str, target: str, impl: Optional[str]):
    """Refuse a split (--gen-subset, --valid-subset, ...) that ``data_path`` does not hold in either
    direction of the language pair (as fairseq looks for it), naming the ones it does hold."""
    pairs = (f"{source}-{target}", f"{target}-{source}")
    if any(indexed_dataset.dataset_exists(os.path.join(data_path, f"{split}.{pair}.{source}"), impl=impl)
           for pair in pairs):
        return
    present = sorted({name.split(".")[0] for name in (os.listdir(data_path) if os.path.isdir(data_path) else [])
                      if any(f".{pair}.{source}" in name for pair in pairs)})
    raise DocumentDataError(
        f"{data_path}: no split {split!r} of {source}-{target} (it has: {', '.join(present) or 'none'}); give "
        "--gen-subset, --valid-subset or --train-subset one of those, or binarize the split with fairseq-preprocess"
    )


def loss_scale_of(optimizer) -> float:
    """The factor fairseq's ``optimizer.backward`` multiplies the loss by (fp16, AMP), else 1."""
    if isinstance(optimizer, AMPOptimizer):
        return float(optimizer.scaler.get_scale())
    scaler = getattr(optimizer, "scaler", None)
    return float(scaler.loss_scale) if scaler is not None else 1.0


@dataclass
class DocumentTranslationConfig(TranslationConfig):
    training_batches: ChoiceEnum(TRAINING_BATCHES) = field(
        default="system",
        metadata={
            "help": "what training batches hold: 'system', what the system's papers train it on "
            "(documents in lanes that refill for a system that carries state, shuffled "
            "sentences with their context for one whose context is earlier sentences, whole "
            "chunks for one that reads chunks; one batch an update but in lanes), or 'lanes' "
            "for every system but one that reads chunks, which keeps its whole chunks (a "
            "controlled comparison in the recurrent memory model's regime)",
            "used": "unchunked",
        },
    )
    optimization_window: str = field(
        default=DEFAULT_WINDOW,
        metadata={
            "help": "in lanes, sentence steps whose gradients make one update (paper section 5.3): "
            "a number, a range A-B drawn anew for every update, or 'full' for a whole group of "
            "documents (the paper's Figure 5; in lanes a group holds every lane's documents: 3 "
            "updates an epoch on 1,071 real documents at --max-tokens 4096); the default, four "
            "steps of up to --max-tokens each an update, learnt the far context soonest in wall-clock "
            "time (docs/training.md): give --max-tokens a quarter of an update's tokens",
            "used": "lanes",
        },
    )
    lane_rows: ChoiceEnum(LANE_ROWS) = field(
        default="packed",
        metadata={
            "help": "in training in lanes, how a sentence step's sentences go into rows: 'packed', "
            "several to a row, each attending only to itself (packing.py: a row padded at its end "
            "only), for a system that supports it (the recurrent memory model, fairseq's "
            "transformer); 'padded', one a row, padded to the widest of its forward pass",
            "used": "lanes",
        },
    )
    passes_per_step: int = field(
        default=1,
        metadata={
            "help": "in training, a sentence step may go through the model in up to this many "
            "forward passes: with packed rows each within --max-tokens, so a step holds up to "
            "this many batches' sentences; with padded rows, of similar-length sentences that "
            "fit --max-tokens together (less padding, so more documents a step; a system that "
            "trains on whole chunks takes one pass)",
            "range": Range(1),
            "used": "lanes",
        },
    )
    context_from: ChoiceEnum(CONTEXT_FROM) = field(
        default="hypothesis",
        metadata={
            "help": "in decoding, what a translated sentence passes on to the next sentence of "
            "its document: the model's own translation ('hypothesis'), or the reference "
            "translation ('reference', for analysis; fairseq-generate on a split with targets)"
        },
    )
    langs: Optional[str] = field(
        default=None,
        metadata={
            "help": "a pretrained checkpoint's languages, comma-separated, in its order (as its fairseq task "
            "took them): their language tokens are added to both dictionaries and placed in every sentence as "
            "that task placed them: with --encoder-langtok or --decoder-langtok as "
            "translation_multi_simple_epoch (mBART-50 many-to-many, NLLB), else as "
            "translation_from_pretrained_bart (mBART: the source ends with [src], the target with [tgt])"
        },
    )
    lang_dict: Optional[str] = field(
        default=None,
        metadata={"help": "instead of --langs: a file of the checkpoint's languages, one a line in its order, as "
                          "translation_multi_simple_epoch's option (mBART-50's ML50_langs.txt)"},
    )
    lang_tok_style: ChoiceEnum(LANG_TOK_STYLES) = field(
        default="multilingual",
        metadata={"help": "with --encoder-langtok / --decoder-langtok: the language tokens' form, __lang__ "
                          "('multilingual') or [lang] ('mbart'), as translation_multi_simple_epoch's option"},
    )
    encoder_langtok: Optional[ChoiceEnum(ENCODER_LANGTOKS)] = field(
        default=None,
        metadata={"help": "the source starts with the source ('src') or target ('tgt') language's token, as "
                          "translation_multi_simple_epoch's option (needs --langs)"},
    )
    decoder_langtok: bool = field(
        default=False,
        metadata={"help": "the target starts with its language's token, which decoding forces as the first "
                          "token, as translation_multi_simple_epoch's option (needs --langs)"},
    )
    keep_inference_langtok: bool = field(
        default=False,
        metadata={"help": "with --decoder-langtok: keep the forced language token in the output"},
    )
    add_data_source_prefix_tags: bool = field(
        default=False,
        metadata={"help": "with --langs: add NLLB's data-source tags (<MINED_DATA>, <MMT_BT_DATA>, <SMT_BT_DATA>) "
                          "to both dictionaries after the language tokens, as the NLLB branch of fairseq's "
                          "option of that name does (NLLB-200's checkpoints hold their embeddings); no sentence "
                          "gets one"},
    )
    change_languages: bool = field(
        default=False,
        metadata={"help": "take this command line's language options (--langs, --lang-dict, --lang-tok-style, "
                          "--encoder-langtok, --decoder-langtok, --add-data-source-prefix-tags) where they differ from "
                          "those of the checkpoint it loads (train a pretrained model on other languages); without "
                          "it such a run is refused, and one that gives none takes the checkpoint's"},
    )
    distributed_world_size: int = II("distributed_training.distributed_world_size")
    ddp_backend: str = II("distributed_training.ddp_backend")
    update_freq: List[int] = II("optimization.update_freq")
    checkpoint_paths: Optional[str] = II("common_eval.path")  # what fairseq-generate and -interactive load
    model_overrides: str = II("common_eval.model_overrides")  # ... with these options changed
    finetune_from_model: Optional[str] = II("checkpoint.finetune_from_model")  # what fairseq-train loads, unless
    restore_file: Optional[str] = II("checkpoint.restore_file")  # ... it resumes a run
    save_dir: Optional[str] = II("checkpoint.save_dir")
    reset_optimizer: bool = II("checkpoint.reset_optimizer")  # ... and whether it takes only the weights
    reset_dataloader: bool = II("checkpoint.reset_dataloader")
    fp16: bool = II("common.fp16")  # the run's precision (precision.py)
    memory_efficient_fp16: bool = II("common.memory_efficient_fp16")
    bf16: bool = II("common.bf16")
    memory_efficient_bf16: bool = II("common.memory_efficient_bf16")
    tpu: bool = II("common.tpu")
    cpu: bool = II("common.cpu")


@register_task("document_translation", dataclass=DocumentTranslationConfig)
class DocumentTranslationTask(TranslatesDocuments, TranslationTask):
    """Translate documents sentence by sentence, carrying context from each sentence to the next."""

    @classmethod
    def add_args(cls, parser):
        add_with_ranges(parser, DocumentTranslationConfig())

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        """The task of a run, its language options taken from or checked against the checkpoint it
        loads (``checkpoint_languages.py``) before its dictionaries get their language tokens; a task
        built from a checkpoint's own config (the hub's) has the checkpoint's."""
        if not kwargs.get("from_checkpoint"):
            paths = from_the_run(cfg, "checkpoint_paths")
            checkpoints = checkpoints_loaded(paths, *(from_the_run(cfg, name) for name in
                                                      ("finetune_from_model", "restore_file", "save_dir")))
            take_checkpoint_languages(cfg, checkpoints, training=not paths)
        return super().setup_task(cfg, **kwargs)

    def __init__(self, cfg: DocumentTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.training_plan: Optional[PlannedEpoch] = None  # the current epoch's training plan
        self.regime = Regime.before_any_model(cfg)  # of the model built last: how its batches are planned
        self.trains_its_model = True  # fairseq-train builds its model; the others load theirs
        self.criterion_training_options = {}  # of the criterion built last (build_criterion)
        self.interactive = InteractiveSession()
        self.placements: Optional[List[Placement]] = None  # of the lines fairseq-interactive just encoded
        self.language_tokens = LanguageTokens.of(cfg, src_dict, tgt_dict)
        check_ranges(cfg, DocumentTranslationConfig)
        check_update_freq(from_the_run(cfg, "update_freq"))
        check_checkpoint_paths(from_the_run(cfg, "checkpoint_paths"))
        if world_size(cfg) > 1 and cfg.ddp_backend not in DDP_BACKENDS:
            raise OptionError(
                f"--ddp-backend {cfg.ddp_backend}: document training runs a window's sentence "
                "steps through the model before it back-propagates them, which PyTorch's "
                "DistributedDataParallel cannot reduce; use --ddp-backend legacy_ddp"
            )

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        paths = self.cfg.data.split(os.pathsep)
        data_path = paths[(epoch - 1) % len(paths)] if split == self.cfg.train_subset else paths[0]
        check_split_exists(data_path, split, self.cfg.source_lang, self.cfg.target_lang, self.cfg.dataset_impl)
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        if self.language_tokens is not None:
            self.datasets[split] = self.language_tokens.placed(self.datasets[split])
        docids = os.path.join(
            data_path, f"{split}.{self.cfg.source_lang}-{self.cfg.target_lang}.docids"
        )
        pairs = self.datasets[split]
        self.datasets[split] = DocumentDataset(
            pairs, read_docids(docids, len(pairs)), stream=split, docids_path=docids
        )
        if self.regime.context_choice is not None:
            check_split(self.regime.context_choice, self.datasets[split])
        logger.info(
            "%s: %d sentences in %d documents", split, len(pairs), len(self.datasets[split].documents)
        )

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        self.regime = Regime.of_model(document_system(model), model, self.cfg)
        if self.regime.context_choice is not None:
            for dataset in self.datasets.values():  # fairseq-train loads the validation splits first
                check_split(self.regime.context_choice, dataset)
        self.interactive.chunk_sentences = self.regime.chunk_sentences
        self.trains_its_model = not from_checkpoint
        if from_checkpoint:
            model.overridden_options = tuple(ast.literal_eval(from_the_run(self.cfg, "model_overrides") or "{}"))
        if self.trains_its_model:
            check_training_precision(self.precision_options())
            check_used(self.cfg, DocumentTranslationConfig, self.regime)
            check_training_start(model, cfg, **{name: from_the_run(self.cfg, name) for name in TRAINING_START})
            window = f"; --optimization-window {self.cfg.optimization_window}" if self.regime.unit == "lanes" else ""
            logger.info("training batches: %s%s", self.regime.training.describe(), window)
        return model

    def precision_options(self) -> dict:
        """The run's precision options (``precision.py``), None where the config has none."""
        return {name: from_the_run(self.cfg, name) for name in PRECISION_OPTIONS}

    def build_criterion(self, cfg):
        criterion = super().build_criterion(cfg)
        if not isinstance(criterion, DocumentLabelSmoothedCrossEntropyCriterion):
            raise DocumentDataError(
                "the document_translation task trains with "
                "--criterion document_label_smoothed_cross_entropy, which carries each "
                "document's context from sentence to sentence"
            )
        if self.trains_its_model:
            check_used(cfg, DocumentLabelSmoothedCrossEntropyConfig, self.regime)
            if self.regime.unit == "lanes" and self.regime.carries_states:
                criterion.refuse_windows_that_cut_every_gradient(self.cfg.optimization_window)
        self.criterion_training_options = {name: getattr(cfg, name) for name in CRITERION_TRAINING_OPTIONS}
        return criterion

    def training_options(self) -> dict:
        """The plugin's options that shape how the model trains, flag to value as its command line
        gives it, for the training iterator's state: --training-batches, and those of training in
        lanes where the model trains in lanes (elsewhere they do nothing)."""
        values = {"training_batches": self.cfg.training_batches}
        if self.regime.unit == "lanes":
            values.update({name: getattr(self.cfg, name) for name in LANE_TRAINING_OPTIONS},
                          **self.criterion_training_options)
        return {flag_of(name): "none" if value is None else str(value) for name, value in values.items()}

    def get_batch_iterator(
        self,
        dataset,
        max_tokens=None,
        max_sentences=None,
        max_positions=None,
        ignore_invalid_inputs=False,
        required_batch_size_multiple=1,
        seed=1,
        num_shards=1,
        shard_id=0,
        num_workers=0,
        epoch=1,
        data_buffer_size=0,
        disable_iterator_cache=False,
        skip_remainder_batch=False,
        grouped_shuffling=False,
        update_epoch_batch_itr=False,
    ):
        """Document batches (``data.py``). Unlike fairseq's default, nothing is skipped:
        ``--skip-invalid-size-inputs-valid-test`` and ``--required-batch-size-multiple`` do not
        apply, since a missing sentence would shift the context of the rest of its document."""
        if isinstance(dataset, InteractiveLines):
            dataset.check_positions(max_positions)
            return DocumentBatchIterator(
                dataset=dataset,
                collate_fn=dataset.collater,
                batch_sampler=dataset.batches(max_sentences, max_tokens),
                disable_shuffling=True,
            )
        if not isinstance(dataset, DocumentDataset):
            return super().get_batch_iterator(
                dataset, max_tokens, max_sentences, max_positions, ignore_invalid_inputs,
                required_batch_size_multiple, seed, num_shards, shard_id, num_workers, epoch,
                data_buffer_size, disable_iterator_cache, skip_remainder_batch,
                grouped_shuffling, update_epoch_batch_itr,
            )
        # The plan first: it names a sentence over --max-tokens as such, where the check of the
        # positions would blame them (fairseq's trainer counts --max-tokens into max_positions).
        training = self.trains_its_model and dataset.stream == self.cfg.train_subset
        dataset = dataset.choosing(self.regime.context_choice, seed, epoch)
        planner = self.regime.training if training else self.regime.stepping
        planned = planner.plan(dataset, EpochRequest(max_tokens, max_sentences, num_shards, shard_id, seed, epoch))
        dataset.check_positions(max_positions)
        if training:
            self.training_plan = planned
        return DocumentBatchIterator(
            dataset=planned.items,
            collate_fn=planned.items.collater,
            batch_sampler=planned.batches,
            seed=seed,
            num_shards=num_shards if planned.fairseq_shards else 1,
            shard_id=shard_id if planned.fairseq_shards else 0,
            num_workers=num_workers,
            epoch=epoch,
            buffer_size=data_buffer_size,
            disable_shuffling=not planned.fairseq_shards,
            plan=planned.digest if training else None,
            training_options=self.training_options() if training else None,
        )

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """One update: a window of sentence steps of documents in lanes, forward and backward step
        by step, or one batch of whole chunks or of sentences with their context (``samples.py``)."""
        model.train()
        model.set_num_updates(update_num)

        def backward(loss):
            with torch.autograd.profiler.record_function("backward"):
                optimizer.backward(loss * 0 if ignore_grad else loss)

        precision = torch.autocast("cuda") if isinstance(optimizer, AMPOptimizer) else nullcontext()
        with precision:
            return criterion.train_on(
                model, read_sample(sample), backward=backward, stateless=ignore_grad,
                loss_scale=loss_scale_of(optimizer),
            )

    def planned_samples_before(self, position) -> List[dict]:
        """The batches of the training steps before ``position`` from which what its lanes carry
        into it comes (``planners.EpochItems.samples_before``): what the criterion replays when
        training resumes inside a group."""
        return self.training_plan.items.samples_before(position)

    def get_interactive_tokens_and_lengths(self, lines, encode_fn):
        """fairseq-interactive's lines: an empty line ends a document (``interactive.py``)."""
        lines = self.interactive.without_byte_order_mark(lines)
        self.placements = self.interactive.place(lines)
        return super().get_interactive_tokens_and_lengths(lines, encode_fn)

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        if self.language_tokens is not None:
            src_tokens = self.language_tokens.sources(src_tokens)
            src_lengths = [tokens.numel() for tokens in src_tokens]
        pairs = super().build_dataset_for_inference(src_tokens, src_lengths, constraints)
        if self.placements is None:
            return pairs
        placements, self.placements = self.placements, None
        return InteractiveLines(pairs, placements, self.interactive)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        """fairseq-interactive gives only the source tokens: its batches' lanes (and chunk inputs)
        come from the session, with the lanes whose documents have ended and been translated
        (the generator forgets what they carried); lines that end documents get an empty
        translation."""
        if read_sample(sample) is None and self.interactive.pending:
            batch = self.interactive.take(sample["net_input"]["src_tokens"].size(0))
            if batch.document_ends:
                return [[self.empty_translation()] for _ in range(batch.ids.numel())]
            device = sample["net_input"]["src_tokens"].device
            net_input = {**sample["net_input"], **{key: value.to(device) for key, value in batch.chunks.items()}}
            sample = lines_sample({**sample, "net_input": net_input}, batch.lanes.to(device),
                                  batch.continues.to(device), self.interactive.take_finished_lanes())
        if constraints is None and isinstance(getattr(generator, "search", None), LexicallyConstrainedBeamSearch):
            raise UnsupportedOptionError(
                "--constraints: fairseq-generate has no constraints to decode with (a binarized split holds "
                "none, and fairseq's own translation task fails on it too): give each sentence's constraints to "
                "fairseq-interactive --constraints, after a tab on its line"
            )
        if prefix_tokens is None and self.language_tokens is not None:
            tokens = sample["net_input"]["src_tokens"]
            prefix_tokens = self.language_tokens.prefix_tokens(tokens.size(0), tokens.device)
        return super().inference_step(generator, models, sample, prefix_tokens, constraints)

    def empty_translation(self) -> dict:
        return {
            "tokens": torch.tensor([self.target_dictionary.eos()]),
            "score": torch.tensor(0.0),
            "attention": None,
            "alignment": [],
            "positional_scores": torch.tensor([0.0]),
        }

    def state_dict(self):
        """fairseq's task state, and the fingerprints of the dictionaries the model is trained with
        (saved in its checkpoints: ``load_state_dict`` compares them with the data's)."""
        return {**super().state_dict(), DICTIONARIES: self.dictionary_fingerprints()}

    def load_state_dict(self, state_dict):
        """A checkpoint's task state. One whose model was trained with other dictionaries than the
        data's (the same size in another order decodes garbage without a word) is refused."""
        trained = state_dict.get(DICTIONARIES)
        if trained is not None:
            here = self.dictionary_fingerprints()
            for side, language in (("source", self.cfg.source_lang), ("target", self.cfg.target_lang)):
                if trained[side] != here[side]:
                    raise DocumentDataError(
                        f"the checkpoint's model was trained with another {side} dictionary than "
                        f"{os.path.join(self.cfg.data.split(os.pathsep)[0], f'dict.{language}.txt')} "
                        f"(its symbols or their order differ): binarize the data with the dictionary "
                        "the model was trained with (fairseq-preprocess --srcdict / --tgtdict)"
                    )
        super().load_state_dict(state_dict)

    def dictionary_fingerprints(self) -> dict:
        return {side: fingerprint(dictionary) for side, dictionary in
                (("source", self.source_dictionary), ("target", self.target_dictionary))}

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        if getattr(args, "beam", 1) < 1:
            raise OptionError(f"--beam {args.beam}: give 1 or more")
        min_len, max_len_a, max_len_b = (getattr(args, name, default) for name, default in
                                         (("min_len", 1), ("max_len_a", 0), ("max_len_b", 200)))
        if max_len_a <= 0 and max_len_b < min_len:
            raise OptionError(
                f"--max-len-b {max_len_b} with --max-len-a {max_len_a}: a translation may take at most "
                f"--max-len-a x source length + --max-len-b tokens, fewer than --min-len {min_len}; give "
                f"--max-len-b {min_len} or more"
            )
        if getattr(args, "score_reference", False):
            raise UnsupportedOptionError(
                "--score-reference is not supported by document_translation yet: "
                "it would score every sentence as a document start"
            )
        if getattr(args, "print_alignment", False):
            raise UnsupportedOptionError(
                "--print-alignment is not supported by document_translation yet: fairseq takes "
                "alignments from a pass of its own, which would not read the document's context"
            )
        warn_of_decoding_precision(self.precision_options())
        return super().build_generator(
            models, args, seq_gen_cls=seq_gen_cls or DocumentSequenceGenerator,
            extra_gen_cls_kwargs={
                "context_from": self.cfg.context_from,
                **(self.language_tokens.generator_options(self.cfg.keep_inference_langtok)
                   if self.language_tokens is not None else {}),
                **(extra_gen_cls_kwargs or {}),
            },
            **kwargs,
        )
