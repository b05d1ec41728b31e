"""How much of its context a system uses: conditional cross-mutual information (CXMI; Fernandes et al., 2021).

CXMI(C -> Y | X) = H(Y | X) - H(Y | X, C): the model's cross-entropy on the reference without its
context minus with it, per target token, in bits (base 2, as fairseq reports its losses). It is
measured the same way for every system, with no code of any system's own:

- on a split (``split_cxmi``): the same checkpoint scores the split's references teacher-forced
  twice, as fairseq-validate scores a split (``--task document_translation``, the training
  criterion's summed nll, the context carried from step to step as in validation): once with the
  split's document index, once with every sentence its own document, in a copy of the data
  directory whose split's ``.docids`` has one id per line and whose other files are links
  (``without_context_data``): no previous sentences, a fresh initial memory, one-sentence chunks;
- on a contrastive set (``contrastive_context_use``): the correct candidate's log-probability per
  token (its tokens and end of sentence) with its item's context minus without (the context
  sentences dropped), summed over the items and divided by their tokens, overall and by
  antecedent distance (``memory_nmt/evaluation/contrastive.py`` scores both).

A sentence-level model, or any system whose context is removed on both sides, has a CXMI of 0 (up
to the order of float sums: the two scorings batch the sentences differently); a system that
uses its context to predict the reference has a positive one.
"""
import math
import os
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from fairseq import checkpoint_utils, options, tasks, utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from memory_nmt.evaluation import contrastive
from memory_nmt.pipeline.checkpoint_files import check_checkpoint_file


BITS = 1 / math.log(2)
PLUGIN = Path(__file__).resolve().parents[1] / "memory_nmt"


def shown_bits(value) -> str:
    """A CXMI to 4 decimals, the float noise around 0 (the two scorings batch differently) shown as 0.0000."""
    return f"{round(value, 4) + 0.0:.4f}"


def without_context_data(data, subset, directory) -> Path:
    """``directory`` (created) as a copy of the data directory ``data`` whose ``subset`` makes every
    sentence its own document: its ``SUBSET.*.docids`` rewritten with one id per line, every other
    file a link to ``data``'s."""
    data, directory = Path(data).resolve(), Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for path in sorted(data.iterdir()):
        target = directory / path.name
        if target.is_symlink() or target.exists():
            target.unlink()
        if path.name.startswith(f"{subset}.") and path.name.endswith(".docids"):
            with open(path, encoding="utf-8") as lines:
                count = sum(1 for _ in lines)
            target.write_text("".join(f"sentence-{line}\n" for line in range(count)), encoding="utf-8")
        else:
            os.symlink(path, target)
    return directory


def split_cross_entropy(path, data, subset, max_tokens=None, batch_size=None, use_cuda=False,
                        model_overrides=None):
    """(summed nll in nats, target tokens) of the checkpoint at ``path`` on ``subset`` of ``data``,
    teacher-forced document by document as fairseq-validate scores it, with the language tokens of
    the task it was trained in (the document task takes them from the checkpoint: ``checkpoint_languages.py``)."""
    check_checkpoint_file(str(path))
    state = checkpoint_utils.load_checkpoint_to_cpu(str(path), arg_overrides=model_overrides)
    command = [str(data), "--user-dir", str(PLUGIN), "--task", "document_translation", "--path", str(path),
               "--criterion", "document_label_smoothed_cross_entropy", "--valid-subset", subset]
    command += ["--max-tokens", str(max_tokens)] if max_tokens is not None else []
    command += ["--batch-size", str(batch_size)] if batch_size is not None else []
    command += [] if use_cuda else ["--cpu"]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_validation_parser(), command))
    utils.import_user_module(cfg.common)
    task = tasks.setup_task(cfg.task)
    (model,), _ = checkpoint_utils.load_model_ensemble([str(path)], task=task, state=state)  # overridden above
    model = model.cuda() if use_cuda else model
    criterion = task.build_criterion(cfg.criterion)
    task.load_dataset(subset)
    batches = task.get_batch_iterator(
        task.dataset(subset), max_tokens=cfg.dataset.max_tokens, max_sentences=cfg.dataset.batch_size,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
    ).next_epoch_itr(shuffle=False)
    nll, tokens = 0.0, 0
    for sample in batches:
        sample = utils.move_to_cuda(sample) if use_cuda else sample
        _, _, logged = task.valid_step(sample, model, criterion)
        nll += float(logged["nll_loss"])
        tokens += int(logged["ntokens"])
    return nll, tokens


def split_cxmi(path, data, subset, workdir, **scoring):
    """CXMI of the checkpoint at ``path`` on ``subset``: its bits per token without context minus with
    it, and both scorings (``scoring``: ``split_cross_entropy``'s batch and device options). The
    data without context goes to ``workdir``/no-context-data."""
    alone = without_context_data(data, subset, Path(workdir) / "no-context-data")
    with_context = split_cross_entropy(path, data, subset, **scoring)
    without_context = split_cross_entropy(path, alone, subset, **scoring)
    (with_nll, tokens), (without_nll, _) = with_context, without_context  # the same references
    return {
        "bits_per_token": (without_nll - with_nll) / tokens * BITS,
        "with_context_bits_per_token": with_nll / tokens * BITS,
        "without_context_bits_per_token": without_nll / tokens * BITS,
        "tokens": tokens,
    }


def contrastive_context_use(model, task, items, max_tokens=4096, progress=lambda batches: batches):
    """(scores of every candidate in context, CXMI by key): the items scored with their context and
    without it; for "all" and each antecedent distance, the correct candidates' log-probability
    with context minus without, in bits per token, and the items and tokens counted."""
    with_context = contrastive.score_items(model, task, items, max_tokens, progress)
    alone = [replace(item, context_source=[], context_target=[]) for item in items]
    without_context = contrastive.score_items(model, task, alone, max_tokens, progress)
    gained, tokens, counted = defaultdict(float), defaultdict(int), defaultdict(int)
    for item, with_scores, without_scores in zip(items, with_context, without_context):
        length = contrastive.encoded_target(task, item.candidates[item.correct]).numel()
        for key in ["all"] + ([str(item.distance)] if item.distance is not None else []):
            gained[key] += with_scores[item.correct] - without_scores[item.correct]
            tokens[key] += length
            counted[key] += 1
    cxmi = {key: {"bits_per_token": gained[key] / tokens[key] * BITS, "tokens": tokens[key], "items": counted[key]}
            for key in gained}
    return with_context, cxmi
