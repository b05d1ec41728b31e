"""The recurrent memory model (Feng et al., 2022): a memory of d_M vectors in chosen layers, written
after each sentence by an Update Attention and read by the next sentence's Output Attention.

``memory.py`` the memory unit; ``layers.py`` the layers that read and record it; ``model.py``
``transformer_recurrent_memory`` and its architectures; ``carry.py`` what a lane carries. The
memory units' parameters are its context parameters (``pipeline/context_parameters.py``): a
sentence-level checkpoint starts the model without them, and ``two_rate_inverse_sqrt`` gives them
their own learning rate.
"""
