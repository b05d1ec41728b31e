"""Sentence-level and document-level BLEU (s-BLEU, d-BLEU) of fairseq-generate output: see
memory_nmt_tools/document_bleu.py (also installed as memory-nmt-document-bleu)."""
from memory_nmt_tools.document_bleu import main

if __name__ == "__main__":
    main()
