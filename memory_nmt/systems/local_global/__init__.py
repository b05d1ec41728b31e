"""The local+global model (Zheng et al., 2020, "Towards Making the Most of Context in Neural Machine
Translation"): each sentence of a chunk of its document encoded on its own by the local layers, then
the global layer over the whole chunk; a decoder that also reads the previous target sentence. The
ablations of the paper's Table 3 are options of the model.

``global_context.py`` the global layer (segment-level relative attention, gated fusion) and the
sentence-to-sentence weights of its attention (the paper's Figure 4);
``target_context.py`` the decoder's self-attention over the previous sentence, Transformer-XL
style; ``encoder.py`` the encoder (local layers, then the global layer) and ``decoder.py`` the
decoder; ``options.py`` the model's options; ``model.py`` ``transformer_local_global``, which builds
them, and its architectures; ``carry.py`` what a lane carries from one sentence of its chunk to the next.
"""
