"""Decoding speed and memory of transformer_recurrent_memory against fairseq's transformer: see
memory_nmt_tools/benchmarks/decoding.py (also installed as memory-nmt-benchmark-decoding)."""
from memory_nmt_tools.benchmarks.decoding import main

if __name__ == "__main__":
    main()
