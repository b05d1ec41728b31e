"""The speed and memory measurements: the two benchmark commands, ``training.py``
(``memory-nmt-benchmark-training``, ``scripts/benchmark_training.py``) and ``decoding.py``
(``memory-nmt-benchmark-decoding``, ``scripts/benchmark_decoding.py``), their options as they are
parsed (``options.py``), and what they share with ``compare_systems`` and the paper's
``cost_vs_length.py`` (``examples/learn_to_remember/``): the arithmetic a stretch of work does
(``arithmetic.py``, FLOPs of matrix products and attention) and its peak memory, in this process
or in a fresh one (``peak_memory.py``). All of them import torch; the two commands and ``options.py``
import the plugin too.
"""
