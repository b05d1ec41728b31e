"""The fairseq-train options that build a document system on a pretrained checkpoint: see
memory_nmt_tools/checkpoint_options.py (also installed as memory-nmt-checkpoint-options)."""
from memory_nmt_tools.checkpoint_options import main

if __name__ == "__main__":
    main()
