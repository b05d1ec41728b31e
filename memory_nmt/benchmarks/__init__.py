"""What the speed and memory measurements share: the arithmetic a stretch of work does
(``arithmetic.py``, FLOPs of matrix products and attention) and its peak memory
(``peak_memory.py``). The benchmark commands (``memory_nmt_tools/benchmark_training.py``,
``benchmark_decoding.py``), ``compare_systems.py`` and the paper's ``cost_vs_length.py``
(``examples/learn_to_remember/``) measure with them."""
