"""Reading a fairseq checkpoint file with torch's safe unpickling, or refusing it on one line that names the file.

torch (>= 2.6) reads with ``weights_only=True``: it unpickles tensors, containers and numbers,
and refuses any other class, since unpickling a class can run code the file holds. fairseq's
checkpoints hold a few classes more: the options (``argparse.Namespace`` in older ones,
omegaconf's containers, their nodes and metadata in newer ones) and numpy's numbers and arrays:
``FAIRSEQ_CHECKPOINT_CLASSES``, which importing the plugin adds to torch's allow-list
(``memory_nmt/fairseq_changes.py``), so that every ``torch.load`` fairseq makes reads them.

``load_checkpoint_file`` (which the plugin reads a checkpoint with wherever it reads one itself)
refuses on one line naming the file: one that holds any other class (naming the classes;
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``, torch's own switch, loads a file you trust with full
unpickling, in fairseq's loads as in this one), one that is empty or cut short (a copy or a run
interrupted while writing it), and one that torch wrote but fairseq did not (without the model's
weights, its options or its optimizer history), where fairseq's loader fails with ``EOFError``,
``UnpicklingError``, ``OSError`` or ``KeyError: 'best_loss'`` from deep inside. The document task
reads the checkpoints a run loads this way when it is set up, before fairseq's loader does
(``checkpoint_languages.py``); the plugin's tools that load a checkpoint through fairseq without a
task check it first (``check_checkpoint_file``).
"""
import argparse
import collections
import os
import pickle
import re
import typing
import zipfile
from collections.abc import Mapping
from typing import List

import numpy
import omegaconf
import torch
from fairseq.distributed.utils import _TensorPlaceholder
from omegaconf import nodes

from .errors import InputError

TRUST_EVERY_CLASS = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"  # torch's switch to full unpickling
NUMPY_CORE = numpy._core if hasattr(numpy, "_core") else numpy.core  # numpy 2 renamed numpy.core
FAIRSEQ_CHECKPOINT_CLASSES = [  # what fairseq's checkpoints hold besides tensors, containers and numbers
    argparse.Namespace,  # the options of a checkpoint from before fairseq 0.10 (``args``)
    omegaconf.DictConfig, omegaconf.ListConfig, omegaconf.base.ContainerMetadata, omegaconf.base.Metadata,
    nodes.AnyNode, nodes.StringNode, nodes.IntegerNode, nodes.FloatNode, nodes.BooleanNode,
    dict, list, int, float, str, bool, typing.Any,  # omegaconf's metadata names the types of keys and values
    collections.defaultdict, collections.OrderedDict,
    _TensorPlaceholder,  # what fairseq's broadcast_object puts in place of a tensor it sends apart
    numpy.ndarray, numpy.dtype, NUMPY_CORE.multiarray.scalar, NUMPY_CORE.multiarray._reconstruct,
    # the same, pickled by numpy 1 (a checkpoint from an older environment)
    (NUMPY_CORE.multiarray.scalar, "numpy.core.multiarray.scalar"),
    (NUMPY_CORE.multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
    *(type(numpy.dtype(kind)) for kind in ("float64", "float32", "int64", "int32", "uint32", "bool")),
]
UNSUPPORTED_GLOBAL = re.compile(r"GLOBAL (\S+) was not an allowed global")
FAIRSEQ_KEYS = (  # what fairseq's loader reads of a checkpoint, each in one of its forms
    ("model", ("model",)),  # the weights
    ("cfg", ("cfg", "args")),  # the options that build the model (args: before fairseq 0.10)
    ("optimizer_history", ("optimizer_history", "best_loss")),  # best_loss: fairseq's oldest form
)


class CheckpointFileError(InputError):
    """A file given as a checkpoint is not a whole fairseq checkpoint, or not safe to read; the message names it."""


def load_checkpoint_file(f, *args, **kwargs):
    """``torch.load`` of a fairseq checkpoint (an open file or a path), with torch's safe unpickling
    and ``FAIRSEQ_CHECKPOINT_CLASSES`` (or full unpickling where ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` says)."""
    name = getattr(f, "name", f)
    try:
        state = torch.load(f, *args, **kwargs)
    except pickle.UnpicklingError as error:
        unsafe = unsafe_classes(f, error)
        if not unsafe:
            raise unreadable(name, error) from error
        raise CheckpointFileError(
            f"{name}: holds {', '.join(unsafe)}, which no fairseq checkpoint holds and torch's safe unpickling "
            "refuses (unpickling it could run code the file holds); if you trust the file, load it with full "
            f"unpickling: {TRUST_EVERY_CLASS}=1 in the environment"
        ) from None
    except (EOFError, OSError, RuntimeError) as error:
        raise unreadable(name, error) from error
    missing = [key for key, forms in FAIRSEQ_KEYS if not isinstance(state, dict) or not any(k in state for k in forms)]
    if missing:
        raise CheckpointFileError(
            f"{name}: torch can read it, but fairseq did not write it (it has no {', no '.join(map(repr, missing))}): "
            "give a checkpoint that fairseq-train wrote (checkpoint_best.pt, checkpoint_last.pt, ...)"
        )
    return state


def mapped_checkpoint(path) -> dict:
    """The checkpoint at ``path`` read by ``load_checkpoint_file`` with its tensors mapped, not read
    (what the plugin reads of a checkpoint before fairseq's loader reads it whole)."""
    return load_checkpoint_file(path, map_location="cpu", mmap=zipfile.is_zipfile(path))


def check_checkpoint_file(path):
    """Refuse ``path`` on one line where it is not a whole fairseq checkpoint, before fairseq's own
    loader reads it."""
    mapped_checkpoint(path)


def unreadable(name, error: Exception) -> CheckpointFileError:
    detail = str(error) or "the file ends before a checkpoint does"
    return CheckpointFileError(
        f"{name}: cannot be read as a checkpoint ({type(error).__name__}: {detail}); an empty or cut-short file "
        "(a copy, or a run stopped while writing it): copy or write it again"
    )


def unsafe_classes(f, error: pickle.UnpicklingError) -> List[str]:
    """The classes that kept torch's safe unpickling from reading ``f``: every one a file that torch
    writes holds, else the one the error names (none where the file is not a pickle at all)."""
    path = getattr(f, "name", f)
    if isinstance(path, (str, os.PathLike)) and zipfile.is_zipfile(path):
        allowed = {qualified_name(entry) for entry in torch.serialization.get_safe_globals()}
        unsafe = [name for name in torch.serialization.get_unsafe_globals_in_checkpoint(path) if name not in allowed]
        if unsafe:
            return unsafe
    return UNSUPPORTED_GLOBAL.findall(str(error))[:1]


def qualified_name(entry) -> str:
    """``module.name`` of an entry of torch's allow-list: a class, or (class, the name it is pickled as)."""
    if isinstance(entry, tuple):
        return entry[1]
    return f"{entry.__module__}.{entry.__qualname__}"


def config_value(config, name: str):
    """An option's value in a model or task config: fairseq's namespace (older checkpoints), dict or
    omegaconf config; None where it has none."""
    if isinstance(config, Mapping):
        return config.get(name)
    return getattr(config, name, None)
