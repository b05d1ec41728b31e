"""The local+global model (Zheng et al., 2020, "Towards Making the Most of Context in Neural Machine
Translation"): each sentence of a chunk of its document encoded on its own, then one global layer over
the whole chunk; a decoder that also reads the previous target sentence.

``global_context.py`` the global layer (segment-level relative attention, gated fusion);
``previous_sentence.py`` the decoder's self-attention over the previous sentence, Transformer-XL
style; ``model.py`` ``transformer_local_global``, its encoder, decoder and architectures;
``carry.py`` what a lane carries from one sentence of its chunk to the next.
"""
