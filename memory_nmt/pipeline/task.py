"""``document_translation``: fairseq's translation task, fed and decoded document by document.

It keeps what fairseq's ``TranslationTask`` keeps (its config, data, model and steps); its options
are declared in ``task_config.py``, its checks of what a run gives it are ``run_checks.py``'s, and
the fingerprints of a checkpoint's dictionaries ``dictionary_fingerprints.py``'s. Datasets are
fairseq-preprocess output plus ``{split}.{src}-{tgt}.docids`` (``data.py``). ``build_model``
chooses, once, how the model's batches are planned from what its system declares (``regime.py``);
``get_batch_iterator`` asks that regime's planner (``planners.py``) for the epoch's batches: for
the training split, when fairseq-train trains the model, what its papers train it on (windows of
sentence steps of documents in lanes that refill, batches of whole chunks, or shuffled sentences
with their context); for other splits, and every split of a model loaded from a checkpoint to
translate or score, one sentence step an item, never shuffled inside a group; fairseq takes them
from the task's epoch iterator (``batch_iterator.py``). ``train_step`` trains on a batch (read as
its type, ``samples.py``) through the criterion (``criterion.py``), which owns what the lanes
carry, and ``build_generator`` returns the document generator (``generator.py``), so
``fairseq-train`` and ``fairseq-generate`` work unchanged. fairseq-interactive's lines, and the
hub's documents, are placed in documents by ``interactive.py``. Whatever ``--arch`` builds is run
as a document system (``system.py``): a model that mixes in ``DocumentSystem`` with its context,
any other fairseq encoder-decoder model sentence by sentence. A system whose sentences read context
sentences the data chooses (``chosen_context.py``) gets every split's batches from the split's view
for the run's ``--seed`` and the epoch. fairseq's precision options are checked as fairseq-train
builds the model, and named where decoding does not use them; with ``--amp-bf16`` training steps
and decoding run in bfloat16 (``precision.py``).
"""
import logging
import os
from typing import List, Optional

import torch
from fairseq.search import LexicallyConstrainedBeamSearch
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask

from .batch_iterator import CRITERION_TRAINING_OPTIONS, DocumentBatchIterator, training_options
from .checkpoint_fit import TRAINING_START, check_training_start
from .checkpoint_languages import STARTING_CHECKPOINT, checkpoints_loaded, take_checkpoint_languages
from .chosen_context import check_split
from .criterion import DocumentLabelSmoothedCrossEntropyConfig, DocumentLabelSmoothedCrossEntropyCriterion
from .data import DocumentDataset, read_docids
from .dictionary_fingerprints import DICTIONARIES, check_trained_with, fingerprints
from .document_task import TranslatesDocuments
from .errors import UnsupportedOptionError
from .generator import DocumentSequenceGenerator
from .interactive import InteractiveLines, InteractiveSession, Placement, empty_translation
from .language_tokens import LanguageTokens
from .option_ranges import OptionError, add_with_ranges, check_ranges
from .planners import EpochRequest, PlannedEpoch
from .precision import autocast, check_training_precision, loss_scale_of, run_precision, warn_of_decoding_precision
from .regime import Regime
from .run_checks import (check_checkpoint_paths, check_ddp_backend, check_generation_options, check_split_exists,
                         check_update_freq, world_size)
from .samples import lines_sample, read_sample
from .system import document_system
from .task_config import DocumentTranslationConfig, from_the_run
from .used_options import check_used

logger = logging.getLogger(__name__)


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
            checkpoints = checkpoints_loaded(paths, **{name: from_the_run(cfg, name) for name in STARTING_CHECKPOINT})
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
        check_ddp_backend(cfg.ddp_backend, world_size(cfg))

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
        if self.trains_its_model:
            check_training_precision(run_precision(self.cfg))
            check_used(self.cfg, DocumentTranslationConfig, self.regime)
            check_training_start(model, cfg, **{name: from_the_run(self.cfg, name) for name in TRAINING_START})
            window = f"; --optimization-window {self.cfg.optimization_window}" if self.regime.unit == "lanes" else ""
            logger.info("training batches: %s%s", self.regime.training.describe(), window)
        return model

    def build_criterion(self, cfg):
        criterion = super().build_criterion(cfg)
        if not isinstance(criterion, DocumentLabelSmoothedCrossEntropyCriterion):
            raise OptionError(
                "the document_translation task trains with "
                "--criterion document_label_smoothed_cross_entropy, which carries each "
                "document's context from sentence to sentence"
            )
        if self.trains_its_model:
            check_used(cfg, DocumentLabelSmoothedCrossEntropyConfig, self.regime)
            if self.regime.unit == "lanes" and self.regime.carries_states:
                criterion.train_in_windows(self.cfg.optimization_window)
        self.criterion_training_options = {name: getattr(cfg, name) for name in CRITERION_TRAINING_OPTIONS}
        return criterion

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
            training_options=(training_options(self.cfg, self.criterion_training_options, self.regime.unit == "lanes")
                              if training else None),
        )

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """One update: a window of sentence steps of documents in lanes, forward and backward step
        by step, or one batch of whole chunks or of sentences with their context (``samples.py``)."""
        model.train()
        model.set_num_updates(update_num)

        def backward(loss):
            with torch.autograd.profiler.record_function("backward"):
                optimizer.backward(loss * 0 if ignore_grad else loss)

        with autocast(self.cfg.amp_bf16, optimizer, next(model.parameters()).device):
            return criterion.train_on(
                model, read_sample(sample), backward=backward, stateless=ignore_grad,
                loss_scale=loss_scale_of(optimizer), samples_before=self.planned_samples_before,
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
                return [[empty_translation(self.target_dictionary.eos())] for _ in range(batch.ids.numel())]
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
        with autocast(self.cfg.amp_bf16, None, sample["net_input"]["src_tokens"].device):
            return super().inference_step(generator, models, sample, prefix_tokens, constraints)

    def state_dict(self):
        """fairseq's task state, and the fingerprints of the dictionaries the model is trained with
        (saved in its checkpoints: ``load_state_dict`` compares them with the data's)."""
        return {**super().state_dict(), DICTIONARIES: fingerprints(self.source_dictionary, self.target_dictionary)}

    def load_state_dict(self, state_dict):
        """A checkpoint's task state. One whose model was trained with other dictionaries than the
        data's (the same size in another order decodes garbage without a word) is refused."""
        check_trained_with(state_dict.get(DICTIONARIES), fingerprints(self.source_dictionary, self.target_dictionary),
                           self.cfg.data.split(os.pathsep)[0], self.cfg.source_lang, self.cfg.target_lang)
        super().load_state_dict(state_dict)

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        check_generation_options(args)
        warn_of_decoding_precision(run_precision(self.cfg))
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
