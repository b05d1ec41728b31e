"""How a checkpoint's parameters fit the memory model, for ``RecurrentMemoryTransformerModel.load_state_dict``.

A checkpoint of fairseq's plain ``transformer`` (``--finetune-from-model``) lacks the memory
parameters (``*.memory.*``): ``fit_checkpoint`` gives them their fresh initialisation and logs,
by module, which parameters come from the checkpoint and which are new. A checkpoint of a memory
model must hold every memory layer this model has (other ``--memory-layers`` or
``--memory-sides`` are refused by ``check_complete``, not filled in). A checkpoint that does
not fit is refused with one line naming the parameter: a tensor of another shape (other
dimensions, layers or dictionary), different tensors for parameters this model shares (a
checkpoint trained without ``--share-all-embeddings`` or ``--share-decoder-input-output-embed``
loaded into a model with it), or parameters one side lacks (``check_complete``). A checkpoint
trained with shared embeddings loads into a model without: each copy gets the shared values.
"""
import logging
import re
from collections import defaultdict
from typing import Dict, Iterable, List

import torch
from torch import Tensor, nn

logger = logging.getLogger(__name__)

MEMORY = ".memory."
LAYER = re.compile(r"(.*\.layers)\.(\d+)\.")
ARCHITECTURE_HINT = (
    "build the model with the checkpoint's architecture options (embedding and feed-forward "
    "dimensions, layers, heads, embedding sharing) and binarize the data with its dictionary"
)


class CheckpointMismatchError(ValueError):
    """The checkpoint's parameters do not fit the model; the message names them."""


def is_memory_key(key: str) -> bool:
    return MEMORY in key


def fit_checkpoint(model: nn.Module, state_dict: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """The state dict to load into ``model``: ``state_dict`` plus fresh memory parameters it lacks."""
    own = model.state_dict()
    check_shapes(own, state_dict)
    check_shared(model, state_dict)
    plain_transformer = not any(is_memory_key(key) for key in state_dict)
    new = [key for key in own if plain_transformer and is_memory_key(key)]
    parameters = dict(model.named_parameters(remove_duplicate=False))
    loaded = [key for key in parameters if key in state_dict]
    logger.info("parameters loaded from the checkpoint: %s", describe(loaded))
    if new:
        logger.info("new parameters (not in the checkpoint), freshly initialised: %s",
                    describe([key for key in new if key in parameters]))
    return {**state_dict, **{key: own[key] for key in new}}


def check_shapes(own: Dict[str, Tensor], state_dict: Dict[str, Tensor]):
    mismatched = [
        key for key, value in state_dict.items()
        if key in own and torch.is_tensor(value) and value.shape != own[key].shape
    ]
    if mismatched:
        key = mismatched[0]
        others = f" (and {len(mismatched) - 1} more tensors)" if len(mismatched) > 1 else ""
        raise CheckpointMismatchError(
            f"checkpoint parameter {key} has shape {tuple(state_dict[key].shape)}, but this "
            f"model's has shape {tuple(own[key].shape)}{others}: {ARCHITECTURE_HINT}"
        )


def check_shared(model: nn.Module, state_dict: Dict[str, Tensor]):
    """Parameters the model shares (one tensor, several names) need equal checkpoint tensors."""
    names_of = defaultdict(list)
    for name, parameter in model.named_parameters(remove_duplicate=False):
        if name in state_dict:
            names_of[id(parameter)].append(name)
    for names in names_of.values():
        first = state_dict[names[0]]
        differing = [name for name in names[1:] if not torch.equal(state_dict[name], first)]
        if differing:
            raise CheckpointMismatchError(
                f"this model shares {names[0]} and {differing[0]}, but the checkpoint has "
                "different tensors for them: it was trained without --share-all-embeddings "
                "(or --share-decoder-input-output-embed); leave that option out here too"
            )


def check_complete(missing_keys: List[str], unexpected_keys: List[str]):
    """After a non-strict load: refuse parameters the checkpoint lacks or the model has no place for."""
    if missing_keys:
        raise CheckpointMismatchError(
            f"the checkpoint lacks {describe(missing_keys)}: {ARCHITECTURE_HINT}"
        )
    if unexpected_keys:
        raise CheckpointMismatchError(
            f"this model has no place for the checkpoint's {describe(unexpected_keys)}: {ARCHITECTURE_HINT}"
        )


def describe(keys: Iterable[str]) -> str:
    """``N tensors: module, module, ...``, the layers of a stack as index ranges (``encoder.layers.0-5``)."""
    keys = list(keys)
    layers, modules = defaultdict(list), {}
    for key in keys:
        layer = LAYER.match(key)
        if is_memory_key(key):
            modules[key.split(MEMORY)[0] + MEMORY.rstrip(".")] = None
        elif layer:
            modules.setdefault(layer.group(1), None)
            layers[layer.group(1)].append(int(layer.group(2)))
        else:
            modules[key.rsplit(".", 1)[0]] = None
    names = [f"{module}.{index_ranges(layers[module])}" if module in layers else module for module in modules]
    return f"{len(keys)} tensors: {', '.join(names)}"


def index_ranges(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    ranges: List[List[int]] = []
    for index in sorted(set(indices)):
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
