"""Turn raw parallel documents into fairseq-preprocess input plus a document index: see
memory_nmt_tools/prepare_documents.py (also installed as memory-nmt-prepare-documents)."""
from memory_nmt_tools.prepare_documents import main

if __name__ == "__main__":
    main()
