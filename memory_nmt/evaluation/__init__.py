"""Evaluation tools, apart from the systems: contrastive scoring in context (``contrastive.py``),
synthetic documents whose translation needs context (``synthetic.py``), and a trained memory
model's documents walked sentence by sentence for the paper's attention analyses
(``memory_attention.py``). The command lines over them are in ``memory_nmt_tools/``, the paper's
analyses in ``examples/learn_to_remember/``."""
