"""A decoder's pass over fairseq's decoder layers that hands each layer what it reads besides its input, as an argument.

fairseq's ``TransformerDecoderBase.extract_features`` embeds the tokens and calls each layer with a
fixed set of arguments, and in incremental decoding embeds only the last token, at the position the
sequence's length gives. A system whose layers read more than fairseq's (the local+global model's
previous sentence: ``reads``) or whose new tokens are not one a step (the concatenation model's target
prefix, fed at a sentence's first step) runs ``decoder_features`` instead, written around the
decoder's own submodules: the same embedding, positions, masks, layers, final LayerNorm and
projection, so that with nothing more to read it computes what fairseq's decoder computes
(tests/systems/test_decoder_pass.py). With ``positions_count_real_tokens`` a new token's position
counts its row's real tokens, as fairseq counts them for whole sequences, where fairseq's incremental
decoding gives every row the sequence's length (the concatenation model's prefixes differ in length
from row to row).
"""
from typing import Any, Dict, List, Optional

from torch import Tensor


def decoder_features(decoder, tokens: Tensor, new: int, encoder_out: Optional[Dict[str, List[Tensor]]],
                     incremental_state=None, reads: Any = None, positions_count_real_tokens: bool = False,
                     full_context_alignment: bool = False, alignment_layer: Optional[int] = None,
                     alignment_heads: Optional[int] = None):
    """``decoder``'s features (B, new, C) and ``extra`` (``attn``, ``inner_states``) of the last ``new``
    of ``tokens`` (B, T), whose earlier tokens the layers keep in ``incremental_state`` (and keep the new
    ones' there too); the new tokens attend to their row's earlier ones and, without an incremental
    state or where they are several, not to the later ones (unless ``full_context_alignment``).
    ``reads``, where given, goes to every layer as its ``reads`` argument."""
    positions = None
    if decoder.embed_positions is not None:
        state = None if positions_count_real_tokens else incremental_state
        positions = decoder.embed_positions(tokens, incremental_state=state)[:, -new:]
    tokens = tokens[:, -new:].contiguous()
    x = decoder.embed_scale * decoder.embed_tokens(tokens)
    if decoder.quant_noise is not None:
        x = decoder.quant_noise(x)
    if decoder.project_in_dim is not None:
        x = decoder.project_in_dim(x)
    if positions is not None:
        x += positions
    if decoder.layernorm_embedding is not None:
        x = decoder.layernorm_embedding(x)
    x = decoder.dropout_module(x).transpose(0, 1)
    padded = decoder.cross_self_attention or bool(tokens.eq(decoder.padding_idx).any())
    padding = tokens.eq(decoder.padding_idx) if padded else None
    causal = (incremental_state is None or new > 1) and not full_context_alignment
    future = decoder.buffered_future_mask(x) if causal else None
    encoded = encoder_out["encoder_out"][0] if encoder_out and encoder_out["encoder_out"] else None
    encoded_padding = (encoder_out["encoder_padding_mask"][0]
                       if encoder_out and encoder_out["encoder_padding_mask"] else None)
    alignment_layer = decoder.num_layers - 1 if alignment_layer is None else alignment_layer
    more = {} if reads is None else {"reads": reads}
    attention, inner_states = None, [x]
    for index, layer in enumerate(decoder.layers):
        x, layer_attention, _ = layer(
            x, encoded, encoded_padding, incremental_state, self_attn_mask=future, self_attn_padding_mask=padding,
            need_attn=index == alignment_layer, need_head_weights=index == alignment_layer, **more,
        )
        inner_states.append(x)
        if layer_attention is not None and index == alignment_layer:
            attention = layer_attention.float().to(x)
    if attention is not None:
        attention = (attention[:alignment_heads] if alignment_heads is not None else attention).mean(dim=0)
    if decoder.layer_norm is not None:
        x = decoder.layer_norm(x)
    x = x.transpose(0, 1)
    if decoder.project_out_dim is not None:
        x = decoder.project_out_dim(x)
    return x, {"attn": [attention], "inner_states": inner_states}
