"""The context parameters: what a document system adds to fairseq's transformer to read its context.

The recurrent memory model's memory units, the Associated Memory Network's context encoder and
gate: each system tags the parameters of the modules it adds with fairseq's ``param_group``
attribute (``tag_context_parameters``), the tag fairseq's ``--optimizer composite`` also groups
by. Two things follow from the tag alone, for every system:

- a checkpoint of fairseq's plain ``transformer`` lacks exactly the tagged parameters, which keep
  their fresh initialisation when it starts the system (``checkpoint_fit.py``);
- ``--lr-scheduler two_rate_inverse_sqrt`` trains them with their own peak learning rate and
  warm-up, apart from the pretrained parameters (``systems/two_rate_schedule.py``).
"""
from typing import List

from torch import nn

CONTEXT_PARAM_GROUP = "memory"  # the value is what --optimizer composite configurations name


def tag_context_parameters(module: nn.Module):
    """Mark every parameter of ``module`` as a context parameter."""
    for parameter in module.parameters():
        parameter.param_group = CONTEXT_PARAM_GROUP


def is_context_parameter(parameter) -> bool:
    return getattr(parameter, "param_group", None) == CONTEXT_PARAM_GROUP


def context_modules(model: nn.Module) -> List[str]:
    """The names of the outermost modules whose parameters are all context parameters
    (``encoder.layers.5.memory``), the units a log line names."""
    names = []
    for name, module in model.named_modules():
        parameters = list(module.parameters())
        if name and parameters and all(is_context_parameter(p) for p in parameters):
            if not any(name.startswith(outer + ".") for outer in names):
                names.append(name)
    return names
