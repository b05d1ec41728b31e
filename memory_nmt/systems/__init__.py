"""The document-level systems, one package each, each implementing ``pipeline/system.py``
(``docs/adding-a-system.md`` adds one, step by step).

Shared by them: declaring a system's options once (``options.py``), their small named sizes
(``sizes.py``), the carry of systems whose context is earlier sentences' tokens
(``previous_sentences.py``) and the scheduler that trains the parameters a system adds to the
transformer at their own rate (``two_rate_schedule.py``). A system tags those parameters and fits a
checkpoint through the pipeline (``pipeline/context_parameters.py``,
``pipeline/checkpoint_fit.py``); its layers that read more than fairseq's take it as an argument,
through the pipeline's passes over fairseq's layers (``pipeline/transformer_pass.py``,
``pipeline/layer_blocks.py``).
"""
