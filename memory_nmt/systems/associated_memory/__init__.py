"""The Associated Memory Network (Jiang et al.): a Contextual Associated Memory Network over context
source sentences, whose gated output is the encoder output the decoder reads.

``context_network.py`` the CAMN (context encoder, inter-sentence attention, context gate);
``encoder.py`` the encoder that runs it on its top layer's self-attention block output;
``model.py`` ``transformer_associated_memory`` and its named architectures. A lane
carries its document's previous source sentences (``systems/previous_sentences.py``); with
``--context-choice next`` or ``random`` the batches bring the sentences instead
(``pipeline/chosen_context.py``). The
CAMN's parameters are its context parameters (``pipeline/context_parameters.py``): a
sentence-level checkpoint starts the model without them, and ``two_rate_inverse_sqrt`` gives
them their own learning rate.
"""
