"""fairseq's transformer-layer blocks, written around a layer's own submodules, for the plugin's layers that take more than fairseq's ``forward``.

A layer that hands out or takes in something between its blocks (the associated memory's encoder
layer, ``associated_memory/encoder.py``; the local+global decoder layer, ``local_global/decoder.py``)
runs its blocks itself; the feed-forward block is the same in both, and in fairseq's encoder and
decoder layers: ``feed_forward_block`` computes it as they do.
"""
from torch import Tensor


def feed_forward_block(layer, x: Tensor) -> Tensor:
    """The residual stream after ``layer``'s feed-forward block, its input ``x`` (after the block's
    LayerNorm in a post-norm layer; the LayerNorm first in a pre-norm one)."""
    residual = x
    if layer.normalize_before:
        x = layer.final_layer_norm(x)
    x = layer.fc2(layer.activation_dropout_module(layer.activation_fn(layer.fc1(x))))
    x = layer.residual_connection(layer.dropout_module(x), residual)
    return x if layer.normalize_before else layer.final_layer_norm(x)
