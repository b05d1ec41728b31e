"""A trained memory model's documents walked sentence by sentence, for the paper's analyses of
its attention: the Update and Output Attention maps (Figures 6-7,
``examples/learn_to_remember/memory_attention_maps.py``) and their information gain over a
random memory's (Figure 2, ``memory_information_gain.py`` there).

``load_model`` loads a ``transformer_recurrent_memory`` checkpoint (and refuses any other);
``teacher_forced_carries`` runs sentences of one document through the pipeline's teacher-forced
step (``pipeline/teacher_forcing.py``), the memory carried as in training, and keeps what each
sentence carries on: the memory it read and the states each memory layer recorded, from which
the analyses recompute the attention with its weights (``RecurrentMemory.write`` and
``read_weights``).
"""
import torch
from fairseq import checkpoint_utils

from ..pipeline.checkpoint_files import check_checkpoint_file
from ..pipeline.errors import InputError
from ..pipeline.teacher_forcing import teacher_forced_step


class AttentionMapError(InputError):
    """Bad request: the message names the checkpoint, document or layer and what to do."""


def load_model(path, data):
    """The model (eval mode, CPU) and task of a checkpoint, reading data from ``data``."""
    check_checkpoint_file(path)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(path)], arg_overrides={"data": str(data)}
    )
    model = models[0].eval()
    if not hasattr(model, "memory_units"):
        raise AttentionMapError(
            f"{path} holds a {type(model).__name__}, which has no memory; pass a "
            "transformer_recurrent_memory checkpoint"
        )
    return model, task


def teacher_forced_carries(model, dataset, indices):
    """The carry after each sentence: the memory it read and the states each layer recorded."""
    lanes = torch.tensor([0])
    carries, carry = [], None
    with torch.no_grad():
        for index in indices:
            sample = dataset.pairs.collater([dataset.pairs[index]])
            carry = teacher_forced_step(model, carry, lanes, sample["net_input"], sample["target"]).carry
            carries.append((sample, carry))
    return carries
