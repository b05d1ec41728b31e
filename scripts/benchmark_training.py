"""Training speed and memory of transformer_recurrent_memory against fairseq's transformer: see
memory_nmt_tools/benchmarks/training.py (also installed as memory-nmt-benchmark-training)."""
from memory_nmt_tools.benchmarks.training import main

if __name__ == "__main__":
    main()
