"""The document-level systems, one package each, each implementing ``pipeline/system.py``.

Shared by them: their small named sizes (``sizes.py``), the parameters a system adds to the
transformer (``context_parameters.py``), loading a sentence-level checkpoint into a system
(``checkpoint_fit.py``) and the scheduler that trains the added parameters at their own rate
(``two_rate_schedule.py``).
"""
