"""fairseq's encoder and decoder passes, written around their own submodules, that hand each layer what a sentence reads besides its input.

fairseq's ``TransformerEncoderBase.forward`` and ``TransformerDecoderBase.extract_features`` embed the
tokens and call each layer with a fixed set of arguments; in incremental decoding the decoder embeds
only the last token, at the position the sequence's length gives. ``encoder_features`` and
``decoder_features`` run the same embedding, positions, masks, layers, final LayerNorm and
projection (``layer_blocks.py`` runs each layer), and take, as arguments:

- ``confinement`` (``packed_attention.Confinement``): packed rows, each token at its position within
  its sentence and each layer's attention confined to its own sentence;
- ``reads``: what the plugin's layers (``layer_blocks.ReadingEncoderLayer``/``ReadingDecoderLayer``)
  read, handed to each of them (a memory model's memory, the local+global model's previous sentence);
- ``recompute``: every layer's forward run again in the backward pass (PyTorch's non-reentrant
  checkpoint of the layer's call with these explicit inputs: ``--checkpoint-activations``);
- ``new`` (decoder): how many of the last tokens are new, where the concatenation model feeds a whole
  target prefix at a sentence's first step; with ``positions_count_real_tokens`` a new token's
  position counts its row's real tokens, as fairseq counts them for whole sequences, where fairseq's
  incremental decoding gives every row the sequence's length.

With none of them they compute what fairseq's encoder and decoder compute
(tests/pipeline/test_transformer_pass.py). Each also returns what each layer recorded (None for
fairseq's own layers). ``ReadingDecoder`` is fairseq's decoder forward for a decoder whose
``extract_features`` takes what it reads besides the encoder's output (``sentence_encoding.py``).
"""
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from .layer_blocks import decoder_layer_output, encoder_layer_output


def recomputed(run, recompute: bool):
    """``run``, whose activations, where ``recompute`` and a gradient is being recorded, are not kept
    but computed again in the backward pass from its inputs."""
    if not recompute:
        return run

    def recomputing(*args, **kwargs):
        if not torch.is_grad_enabled():
            return run(*args, **kwargs)
        return checkpoint(run, *args, use_reentrant=False, **kwargs)

    return recomputing


def encoder_features(encoder, src_tokens: Tensor, token_embeddings: Optional[Tensor] = None,
                     return_all_hiddens: bool = False, confinement=None, reads: Any = None,
                     recompute: bool = False) -> Tuple[Dict[str, List[Tensor]], List[Any]]:
    """fairseq's encoder output dict for ``src_tokens``, and each layer's record."""
    padding = src_tokens.eq(encoder.padding_idx)
    padded = bool(padding.any())
    if token_embeddings is None:
        token_embeddings = encoder.embed_tokens(src_tokens)
    x = embedding = encoder.embed_scale * token_embeddings
    if encoder.embed_positions is not None:
        x = embedding + (encoder.embed_positions(src_tokens) if confinement is None
                         else confinement.positions(encoder.embed_positions, "source", embedding))
    if encoder.layernorm_embedding is not None:
        x = encoder.layernorm_embedding(x)
    x = encoder.dropout_module(x)
    if encoder.quant_noise is not None:
        x = encoder.quant_noise(x)
    if padded:
        x = x * (1 - padding.unsqueeze(-1).type_as(x))
    x = x.transpose(0, 1)
    masks = None if confinement is None else confinement.encoder_masks(encoder.layers[0].self_attn.num_heads)
    run = recomputed(encoder_layer_output, recompute)
    states, records = [x] if return_all_hiddens else [], []
    for layer in encoder.layers:
        x, record = run(layer, x, padding if padded else None, masks, reads)
        records.append(record)
        states += [x] if return_all_hiddens else []
    if encoder.layer_norm is not None:
        x = encoder.layer_norm(x)
    lengths = src_tokens.ne(encoder.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1).contiguous()
    return {
        "encoder_out": [x],
        "encoder_padding_mask": [padding],
        "encoder_embedding": [embedding],
        "encoder_states": states,
        "fc_results": [None] * (len(states) - 1) if return_all_hiddens else [],
        "src_tokens": [],
        "src_lengths": [lengths],
    }, records


def decoder_features(decoder, tokens: Tensor, new: int, encoder_out: Optional[Dict[str, List[Tensor]]],
                     incremental_state=None, reads: Any = None, positions_count_real_tokens: bool = False,
                     full_context_alignment: bool = False, alignment_layer: Optional[int] = None,
                     alignment_heads: Optional[int] = None, confinement=None, recompute: bool = False):
    """``decoder``'s features (B, new, C), ``extra`` (``attn``, ``inner_states``) and each layer's record,
    of the last ``new`` of ``tokens`` (B, T), whose earlier tokens the layers keep in
    ``incremental_state`` (and keep the new ones' there too); the new tokens attend to their row's
    earlier ones and, without an incremental state or where they are several, not to the later ones
    (unless ``full_context_alignment``)."""
    if confinement is not None and (incremental_state is not None or new != tokens.size(1)):
        raise ValueError("packed rows are whole sentences: decode them one a row")
    positions = None
    if decoder.embed_positions is not None and confinement is None:
        state = None if positions_count_real_tokens else incremental_state
        positions = decoder.embed_positions(tokens, incremental_state=state)[:, -new:]
    tokens = tokens[:, -new:].contiguous()
    x = decoder.embed_scale * decoder.embed_tokens(tokens)
    if decoder.embed_positions is not None and confinement is not None:
        positions = confinement.positions(decoder.embed_positions, "target", x)
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
    causal = (incremental_state is None or new > 1) and not full_context_alignment and confinement is None
    future = decoder.buffered_future_mask(x) if causal else None
    masks = None
    if confinement is not None:
        first = decoder.layers[0]
        masks = confinement.decoder_masks(first.self_attn.num_heads,
                                          first.encoder_attn.num_heads if first.encoder_attn is not None else None)
    encoded = encoder_out["encoder_out"][0] if encoder_out and encoder_out["encoder_out"] else None
    encoded_padding = (encoder_out["encoder_padding_mask"][0]
                       if encoder_out and encoder_out["encoder_padding_mask"] else None)
    alignment_layer = decoder.num_layers - 1 if alignment_layer is None else alignment_layer
    run = recomputed(decoder_layer_output, recompute)
    attention, inner_states, records = None, [x], []
    for index, layer in enumerate(decoder.layers):
        x, layer_attention, record = run(
            layer, x, encoded, encoded_padding, incremental_state, self_attn_mask=future, self_attn_padding_mask=padding,
            need_attn=index == alignment_layer, need_head_weights=index == alignment_layer, masks=masks, reads=reads,
        )
        records.append(record)
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
    return x, {"attn": [attention], "inner_states": inner_states}, records


class ReadingDecoder:
    """Mixed into a fairseq ``TransformerDecoderBase`` whose ``extract_features`` takes ``reads``, what
    the decoder reads of its sentences' context besides the encoder's output (``sentence_encoding.
    DecoderReads``; None: no context, as at a document's first sentence): fairseq's decoder forward,
    features then the output projection, with ``reads`` handed to ``extract_features``."""

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, features_only: bool = False,
                full_context_alignment: bool = False, alignment_layer: Optional[int] = None,
                alignment_heads: Optional[int] = None, src_lengths=None, return_all_hiddens: bool = False,
                *, reads: Any = None):
        features, extra = self.extract_features(
            prev_output_tokens, encoder_out, incremental_state, full_context_alignment=full_context_alignment,
            alignment_layer=alignment_layer, alignment_heads=alignment_heads, reads=reads,
        )
        return (features if features_only else self.output_layer(features)), extra
