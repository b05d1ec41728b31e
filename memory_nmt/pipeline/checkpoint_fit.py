"""How a checkpoint's parameters fit a document system: a transformer's loads, another system's is refused.

How a checkpoint's state dict fits a model is found once, in one pass over both
(``CheckpointFit``), and every check below reads it. A checkpoint of fairseq's plain
``transformer`` (``--finetune-from-model``) lacks the system's context parameters
(``context_parameters.py``): they keep their fresh initialisation, and the log says, by module,
which parameters come from the checkpoint and which are new. A checkpoint of the same system must
hold every context parameter this model has (other ``--memory-layers`` or ``--memory-sides``,
say, are refused, not filled in). A checkpoint that does not fit is refused with one line naming
the parameter: a tensor of another shape (other dimensions, layers or dictionary), different
tensors for parameters this model shares (a checkpoint trained without ``--share-all-embeddings``
or ``--share-decoder-input-output-embed`` loaded into a model with it), or parameters one side
lacks. A checkpoint trained with shared embeddings loads into a model without: each copy gets the
shared values.

A system's model mixes in ``FitsTransformerCheckpoints`` before fairseq's ``TransformerModel``:
its ``load_state_dict`` upgrades the checkpoint (fairseq's ``upgrade_state_dict``, which renames
old keys) and prunes it for LayerDrop (fairseq's ``prune_state_dict``), as fairseq's load does,
checks the fit of what it will load, then loads it through fairseq's.

Before fairseq-train loads a checkpoint, its model options are compared with this model's
(``check_options``): one that does not fit is refused naming the options it was built with
(``--encoder-normalize-before``, ``--layernorm-embedding``, ``--encoder-embed-dim 1024``: what
``memory-nmt-checkpoint-options`` prints), and one that fits but was built with other options that
shape no tensor (``--activation-fn``, the heads) is loaded with a warning naming them: the model
would compute otherwise than the checkpoint did.

A checkpoint of another system (its arch another model class than this model's) is checked
before fairseq-train loads it (``check_system``, which ``check_training_start`` calls as the document
task builds the model to train, outside the ``try`` in which fairseq's trainer turns any load error
into "please ensure that the architectures match"): a run never resumes from one, and its weights
start this model only where they fit as a plain transformer's would (a concatenation model's do).
A refusal names both systems and the first parameter that differs.
"""
import ast
import functools
import logging
import os
import re
from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Tuple

import torch
from fairseq.checkpoint_utils import prune_state_dict
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.models.bart import BARTModel
from fairseq.models.transformer import TransformerModel
from torch import Tensor, nn

from .checkpoint_files import config_value, mapped_checkpoint
from .checkpoint_languages import STARTING_CHECKPOINT, training_start
from .context_parameters import context_modules, is_context_parameter
from .errors import InputError
from .option_ranges import flag_of
from .task_config import from_the_run

logger = logging.getLogger(__name__)

LAYER = re.compile(r"(.*\.layers)\.(\d+)\.")
ARCHITECTURE_HINT = (
    "build the model with the checkpoint's architecture options (layers, embedding and feed-forward "
    "dimensions, heads, pre-norm layers, positions, embedding norm, embedding sharing) and binarize the "
    "data with its dictionary (a pretrained multilingual checkpoint's holds its language tokens too: give "
    "its --langs; memory-nmt-checkpoint-options prints both)"
)


# The model options a checkpoint's weights need to be loaded and to compute what they computed:
# those that shape tensors (compared with a checkpoint's where its tensors do not fit: check_options),
# those that shape no tensor but what the model computes (compared always), the embedding sharing
# (not compared: a checkpoint with shared embeddings loads into a model without, and the load
# names the other way) and the longest sentence (not compared: learned positions of another length
# are named as a tensor of another shape); memory-nmt-checkpoint-options prints them all.
SHAPING_TENSORS = (
    "encoder_layers", "decoder_layers", "encoder_embed_dim", "decoder_embed_dim", "encoder_ffn_embed_dim",
    "decoder_ffn_embed_dim", "encoder_normalize_before", "decoder_normalize_before", "encoder_learned_pos",
    "decoder_learned_pos", "layernorm_embedding", "no_token_positional_embeddings",
)
SHAPING_NO_TENSOR = ("encoder_attention_heads", "decoder_attention_heads", "activation_fn", "no_scale_embedding")
# fairseq-train's options that say which checkpoint it starts from, and whether it resumes from it
TRAINING_START = (*STARTING_CHECKPOINT, "reset_optimizer", "reset_dataloader")
MODEL_OPTIONS = (*SHAPING_TENSORS, *SHAPING_NO_TENSOR, "share_all_embeddings", "share_decoder_input_output_embed",
                 "max_source_positions", "max_target_positions")


class CheckpointMismatchError(InputError):
    """The checkpoint's parameters do not fit the model; the message names them."""


class FitsTransformerCheckpoints:
    """Mixed into a system's model: ``load_state_dict`` fits the checkpoint as described above."""

    overridden_options: Tuple[str, ...] = ()  # what --model-overrides changed (``build_model``)

    @classmethod
    def build_model(cls, args, task):
        """The model, knowing the options the run's ``--model-overrides`` changes (where its
        checkpoint does not fit, they may be why)."""
        model = super().build_model(args, task)
        model.overridden_options = tuple(ast.literal_eval(from_the_run(task.cfg, "model_overrides") or "{}"))
        return model

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        """Load a checkpoint, upgraded and pruned for LayerDrop as fairseq loads one: its fit is
        checked once (``CheckpointFit.refuse``), the context parameters a plain transformer's lacks
        keep their initialisation, and one that does not fit is refused, naming the parameter (and
        the options --model-overrides changed, which may be why)."""
        if model_cfg is None and args is not None:
            model_cfg = convert_namespace_to_omegaconf(args).model
        self.upgrade_state_dict(state_dict)
        fit = CheckpointFit(self, prune_state_dict(state_dict, model_cfg))
        try:
            fit.refuse(complete=strict)
        except CheckpointMismatchError as error:
            if not self.overridden_options:
                raise
            raise CheckpointMismatchError(
                f"{error}; --model-overrides changed {', '.join(self.overridden_options)}: leave out of it "
                "what shapes the model's parameters, which the checkpoint's own options must build"
            ) from None
        # upgraded and pruned already: fairseq's load upgrades again (which changes nothing) and prunes
        # nothing without a model config
        return super().load_state_dict(fit.filled(), strict=False)


class CheckpointFit:
    """How a checkpoint's state dict fits a model, found in one pass over both: the checkpoint's
    keys the model holds in another shape or has no place for, the model's it lacks (``fresh``, the
    context parameters a plain transformer's lacks, aside: they keep their initialisation), and
    parameters the model shares that it holds different tensors for. Every check of a checkpoint
    reads it: before fairseq-train loads one (``check_system``, ``check_options``) and as a model
    loads one (``refuse``)."""

    def __init__(self, model: nn.Module, state_dict: Dict[str, Tensor]):
        self.state_dict = state_dict
        self.own = model.state_dict()
        self.modules = context_modules(model)
        self.reshaped = [key for key, value in state_dict.items()
                         if key in self.own and torch.is_tensor(value) and value.shape != self.own[key].shape]
        self.unplaced = [key for key in state_dict if key not in self.own]
        self.parameters = list(model.named_parameters(remove_duplicate=False))
        context = [key for key, parameter in self.parameters if is_context_parameter(parameter)]
        self.fresh = [] if any(key in state_dict for key in context) else context
        self.missing = [key for key in self.own if key not in state_dict and key not in self.fresh]
        self.loaded = [key for key, _ in self.parameters if key in state_dict]

    @functools.cached_property
    def unshared(self) -> Optional[Tuple[str, str]]:
        """The first two names of one parameter the model shares (one tensor, several names) for which
        the checkpoint holds different tensors; None where it holds equal ones. Only a load reads it:
        it compares the tensors, which a checkpoint mapped before fairseq-train's load would read whole."""
        names_of = defaultdict(list)
        for name, parameter in self.parameters:
            if name in self.state_dict:
                names_of[id(parameter)].append(name)
        for names in names_of.values():
            first = self.state_dict[names[0]]
            differing = [name for name in names[1:] if not torch.equal(self.state_dict[name], first)]
            if differing:
                return names[0], differing[0]
        return None

    def first_difference(self, fresh_aside: bool = True) -> Optional[str]:
        """The first parameter where the checkpoint does not fit, in its order: a tensor of another
        shape or that the model has no place for; else the first of the model's it lacks (with
        ``fresh_aside``, those that keep their initialisation aside). None where it fits."""
        differing = set(self.reshaped) | set(self.unplaced)
        key = next((key for key in self.state_dict if key in differing), None)
        if key is not None and key not in self.own:
            return f"the checkpoint's {key} of shape {tuple(self.state_dict[key].shape)} has no place in this model"
        if key is not None:
            return (f"the checkpoint's {key} has shape {tuple(self.state_dict[key].shape)}, "
                    f"this model's {tuple(self.own[key].shape)}")
        missing = self.missing if fresh_aside else [key for key in self.own if key not in self.state_dict]
        if not missing:
            return None
        return f"this model's {missing[0]} of shape {tuple(self.own[missing[0]].shape)} is not in the checkpoint"

    def refuse(self, complete: bool = True):
        """Refuse a checkpoint the model loads where a tensor has another shape than the model's
        (naming the first), where it holds different tensors for parameters the model shares, and
        (``complete``: a strict load) where it lacks parameters or has some the model has no place for."""
        if self.reshaped:
            key = self.reshaped[0]
            others = f" (and {len(self.reshaped) - 1} more tensors)" if len(self.reshaped) > 1 else ""
            raise CheckpointMismatchError(
                f"checkpoint parameter {key} has shape {tuple(self.state_dict[key].shape)}, but this "
                f"model's has shape {tuple(self.own[key].shape)}{others}: {ARCHITECTURE_HINT}"
            )
        if self.unshared:
            first, differing = self.unshared
            raise CheckpointMismatchError(
                f"this model shares {first} and {differing}, but the checkpoint has "
                "different tensors for them: it was trained without --share-all-embeddings "
                "(or --share-decoder-input-output-embed); leave that option out here too"
            )
        if complete and self.missing:
            raise CheckpointMismatchError(
                f"the checkpoint lacks {describe(self.missing, self.modules)}: {ARCHITECTURE_HINT}"
            )
        if complete and self.unplaced:
            raise CheckpointMismatchError(
                f"this model has no place for the checkpoint's {describe(self.unplaced, self.modules)}: "
                f"{ARCHITECTURE_HINT}"
            )

    def filled(self) -> Dict[str, Tensor]:
        """The state dict to load: the checkpoint's, with the fresh context parameters' initial values;
        the log says, by module, which parameters come from the checkpoint and which are new."""
        logger.info("parameters loaded from the checkpoint: %s", describe(self.loaded, self.modules))
        if self.fresh:
            logger.info("new parameters (not in the checkpoint), freshly initialised: %s",
                        describe(self.fresh, self.modules))
        return {**self.state_dict, **{key: self.own[key] for key in self.fresh}}


def check_training_start(model: nn.Module, model_cfg, finetune_from_model: Optional[str], restore_file: Optional[str],
                         save_dir: Optional[str], reset_optimizer: bool, reset_dataloader: bool,
                         checkpoint_suffix: str = "", continue_once: Optional[str] = None):
    """Refuse the checkpoint fairseq-train will start ``model`` from, as its options (``TRAINING_START``)
    say, where it is another system's (``check_system``) or was built with options that do not fit
    (``check_options``): fairseq's trainer loads it inside a ``try`` that turns any error into "please
    ensure that the architectures match". Its tensors are mapped, not read. Without a ``save_dir`` (a
    config built in Python, not a run's) there is nothing to start from.

    fairseq-train takes only the weights of a --finetune-from-model, and of a checkpoint it loads with
    --reset-optimizer and --reset-dataloader (fairseq's older idiom for it); it resumes from any other
    (with --reset-optimizer alone it goes on with the run's epoch and updates)."""
    start = None if save_dir is None else training_start(
        finetune_from_model, restore_file, save_dir, checkpoint_suffix, continue_once)
    if start is None or not os.path.isfile(start[0]):
        return
    path, option = start
    state = mapped_checkpoint(path)
    saved_with = (state.get("cfg") or {}).get("model") or state.get("args")
    resumed_from = None if option == "--finetune-from-model" or (reset_optimizer and reset_dataloader) else option
    fit = CheckpointFit(model, state["model"])
    check_system(path, saved_with, fit, model_cfg, resumed_from)
    check_options(path, saved_with, fit, model_cfg)


def check_system(path: str, checkpoint_cfg, fit: CheckpointFit, model_cfg, resumed_from: Optional[str] = None):
    """Refuse ``path``, a checkpoint of another system than the model's (their model configs name the
    systems; ``fit``: how its weights fit the model): always when a run resumes from it
    (``resumed_from``: the option that gave it, ``--save-dir``, ``--restore-file`` or
    ``--continue-once``); when only its weights start this model, where they do not fit it. The weights of fairseq's transformer family (``transformer``,
    mBART's) are left to the model (``FitsTransformerCheckpoints``)."""
    theirs, own = arch(checkpoint_cfg), arch(model_cfg)
    system = ARCH_MODEL_REGISTRY.get(theirs)
    if theirs is None or theirs == own or (system is not None and system is ARCH_MODEL_REGISTRY.get(own)):
        return
    if resumed_from is None and transformer_family(system):
        return
    unfit = fit.first_difference()
    if resumed_from is None:
        if unfit:
            raise CheckpointMismatchError(
                f"{path} is a {theirs} checkpoint, which does not fit this {own} model: {unfit}; give "
                f"--arch {theirs} to train that system from it, or start this model from a plain transformer's "
                "checkpoint or its own system's"
            )
        return
    difference = fit.first_difference(fresh_aside=False)
    if unfit:
        advice = f"give another {resumed_from}, or --arch {theirs} to resume its run"
    elif resumed_from == "--save-dir":
        advice = (f"give another --save-dir, with --finetune-from-model {path} to start from its weights, "
                  f"or --arch {theirs} to resume its run")
    else:
        advice = (f"give --finetune-from-model {path} instead of {resumed_from} to start from its weights, "
                  f"or --arch {theirs} to resume its run")
    raise CheckpointMismatchError(
        f"{path} is a {theirs} checkpoint, which fairseq-train resumes from ({resumed_from}), but this model "
        f"is a {own}{f' ({difference})' if difference else ''}: {advice}"
    )


def transformer_family(system) -> bool:
    """Whether ``system`` (a model class) is fairseq's transformer or BART's (mBART's), whose weights
    start a document system as a plain transformer's do (fairseq's other subclasses of the
    transformer, non-autoregressive ones among them, are other systems)."""
    return system is TransformerModel or (isinstance(system, type) and issubclass(system, BARTModel))


def check_options(path: str, checkpoint_cfg, fit: CheckpointFit, model_cfg):
    """Refuse ``path`` where its tensors do not fit the model (``fit``) and it was built with other options that
    shape tensors than ``model_cfg``'s, naming those (and the others it differs in); warn where it was
    built with other options that shape no tensor but what the model computes."""
    if checkpoint_cfg is None:
        return
    shaping = other_options(checkpoint_cfg, model_cfg, SHAPING_TENSORS)
    computing = other_options(checkpoint_cfg, model_cfg, SHAPING_NO_TENSOR)
    fix = f"give the checkpoint's (memory-nmt-checkpoint-options {path} prints them)"
    if shaping and fit.first_difference():
        raise CheckpointMismatchError(
            f"{path} does not fit this model: it was built with {', '.join(shaping + computing)}; {fix}"
        )
    if computing:
        logger.warning("%s was built with %s: this model takes its weights but computes otherwise than it did; "
                       "to start from what it computes, %s", path, ", ".join(computing), fix)


def other_options(checkpoint_cfg, model_cfg, names: Iterable[str]) -> List[str]:
    """Of ``names``, the options ``checkpoint_cfg`` has where ``model_cfg``'s differ, as a command line gives
    them: ``--layernorm-embedding``, ``no --encoder-learned-pos``, ``--encoder-embed-dim 1024 (this model's:
    512)``. A flag one config lacks is off; a value one config lacks is not compared (a checkpoint from
    before fairseq had the option)."""
    differing = []
    for name in names:
        theirs, own = config_value(checkpoint_cfg, name), config_value(model_cfg, name)
        if isinstance(theirs, bool) or isinstance(own, bool):
            if bool(theirs) != bool(own):
                differing.append(flag_of(name) if theirs else f"no {flag_of(name)}")
        elif None not in (theirs, own) and str(theirs) != str(own):
            differing.append(f"{flag_of(name)} {theirs} (this model's: {own})")
    return differing


def arch(model_cfg) -> Optional[str]:
    """The architecture a model config (fairseq's namespace or dict) names, as fairseq's ``build_model`` reads it."""
    return config_value(model_cfg, "_name") or config_value(model_cfg, "arch")


def describe(keys: Iterable[str], modules: Iterable[str] = ()) -> str:
    """``N tensors: module, module, ...``: a key inside one of ``modules`` (context modules) by that
    module, the layers of a stack as index ranges (``encoder.layers.0-5``), others by their module."""
    keys, modules = list(keys), list(modules)
    layers, names = defaultdict(list), {}
    for key in keys:
        owner = next((module for module in modules if key.startswith(module + ".")), None)
        layer = LAYER.match(key)
        if owner is not None:
            names[owner] = None
        elif layer:
            names.setdefault(layer.group(1), None)
            layers[layer.group(1)].append(int(layer.group(2)))
        else:
            names[key.rsplit(".", 1)[0]] = None
    described = [f"{name}.{index_ranges(layers[name])}" if name in layers else name for name in names]
    return f"{len(keys)} tensors: {', '.join(described)}"


def index_ranges(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    ranges: List[List[int]] = []
    for index in sorted(set(indices)):
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
