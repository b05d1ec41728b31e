"""A system's command-line options, which fairseq-train --arch NAME --help does not list: see
memory_nmt_tools/system_options.py (also installed as memory-nmt-system-options)."""
from memory_nmt_tools.system_options import main

if __name__ == "__main__":
    main()
