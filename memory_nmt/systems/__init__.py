"""The document-level systems, one package each, each implementing ``pipeline/system.py``
(``docs/adding-a-system.md`` adds one, step by step).

Shared by them: declaring a system's options once (``options.py``), their small named sizes
(``sizes.py``), the carry of systems whose context is earlier sentences' tokens
(``previous_sentences.py``), a decoder's pass over fairseq's layers that hands them what they read
besides their input (``decoder_pass.py``), fairseq's layer blocks for the layers that run them
themselves (``layer_blocks.py``) and the scheduler that trains the parameters a system adds to the
transformer at their own rate (``two_rate_schedule.py``). A system tags those parameters and fits a
checkpoint through the pipeline (``pipeline/context_parameters.py``,
``pipeline/checkpoint_fit.py``).
"""
