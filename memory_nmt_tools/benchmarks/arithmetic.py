"""The arithmetic a stretch of work does, for the benchmark commands: ``ArithmeticCounter``.

It counts the FLOPs of matrix products and attention kernels by torch's own formulas
(``torch.utils.flop_counter``), the work that dominates a transformer's time; element-wise
operations (dropout, layer norm, softmax) are not counted. Two models' counts on the same work
tell what one costs over the other by design, apart from how fast each is implemented.
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count, shape_wrapper


def cpu_attention_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def cpu_attention_backward_flops(grad_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    return sdpa_backward_flop_count(grad_shape, query_shape, key_shape, value_shape)


class ArithmeticCounter(TorchDispatchMode):
    """FLOPs of the matrix products and attention kernels run under it, by torch's own formulas
    (``torch.utils.flop_counter``; its CPU attention kernels get those of the GPU ones). Unlike
    torch's ``FlopCounterMode`` it tracks no modules: its hooks break ``torch.autograd.grad``,
    which the criterion's gradient to the previous sentence uses."""

    FORMULAS = {
        **flop_registry,
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: shape_wrapper(cpu_attention_flops),
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward:
            shape_wrapper(cpu_attention_backward_flops),
    }

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = self.FORMULAS.get(func._overloadpacket)
        if formula is not None:
            self.flops += formula(*args, **kwargs, out_val=out)
        return out
