"""The document task's checks of what a run gives it, beyond each option's range: where fairseq takes a value and fails on it with a traceback, or the task cannot honour it.

``task.py`` calls them as it is set up (the update frequency, the checkpoint paths, the
data-parallel backend), as it loads a split (whether the data holds it) and as it builds a
generator (the decoding options). Each refusal names the option or the file and what to give
instead (``errors.py``); an option's range alone is checked where it is declared
(``option_ranges.py``).
"""
import glob
import os
from typing import Optional

import torch
from fairseq import utils
from fairseq.data import indexed_dataset

from .data import DocumentDataError
from .errors import UnsupportedOptionError
from .option_ranges import OptionError

DDP_BACKENDS = ("legacy_ddp", "no_c10d")


def world_size(cfg) -> int:
    """The data-parallel workers of this run: the process group's, once fairseq has joined it
    (launched by torchrun, ``--distributed-world-size`` may be left out, and the task's config
    then still says 1), else ``--distributed-world-size``."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return max(cfg.distributed_world_size, torch.distributed.get_world_size())
    return cfg.distributed_world_size


def check_ddp_backend(backend: str, workers: int):
    """Refuse, for several workers, a DistributedDataParallel backend that reduces gradients while the
    backward pass runs."""
    if workers > 1 and backend not in DDP_BACKENDS:
        raise OptionError(
            f"--ddp-backend {backend}: document training runs a window's sentence "
            "steps through the model before it back-propagates them, which PyTorch's "
            "DistributedDataParallel cannot reduce; use --ddp-backend legacy_ddp"
        )


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


def check_generation_options(args):
    """Refuse decoding options (fairseq-generate's, fairseq-interactive's) that fairseq takes and fails on
    with a traceback, or that the document task cannot honour."""
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
