"""Synthetic parallel documents whose translation needs earlier sentences, written for fairseq-preprocess:
see memory_nmt_tools/synthetic_documents.py (also installed as memory-nmt-synthetic-documents)."""
from memory_nmt_tools.synthetic_documents import main

if __name__ == "__main__":
    main()
