"""Evaluation tools that need a model, apart from the systems: contrastive scoring in context
(``contrastive.py``), and a trained memory model's documents walked sentence by sentence for the
paper's attention analyses (``memory_attention.py``, ``cue_probe.py``), what each context word's
answer is told from (``phenomenon_probe.py``) and what a queue memory pushes (``queue_pushes.py``).
The command lines over them and the synthetic documents whose translation needs context are in
``memory_nmt_tools/``, the paper's analyses in ``examples/learn_to_remember/``."""
