"""Evaluation tools, apart from the systems: contrastive scoring in context (``contrastive.py``) and
synthetic documents whose translation needs context (``synthetic.py``)."""
