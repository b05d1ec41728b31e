"""Contrastive accuracy in context of a document-level model, and of a sentence-level model beside it: see
memory_nmt_tools/contrastive_eval.py (also installed as memory-nmt-contrastive-eval)."""
from memory_nmt_tools.contrastive_eval import main

if __name__ == "__main__":
    main()
