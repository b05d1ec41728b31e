"""The document-level systems, one package each, each implementing ``pipeline/system.py``
(``docs/adding-a-system.md`` adds one, step by step).

Shared by them: declaring a system's options once (``options.py``), their small named sizes
(``sizes.py``), the carry of systems whose context is earlier sentences' tokens
(``previous_sentences.py``), the parameters a system adds to the transformer
(``context_parameters.py``), loading a sentence-level checkpoint into a system
(``checkpoint_fit.py``) and the scheduler that trains the added parameters at their own rate
(``two_rate_schedule.py``).
"""
