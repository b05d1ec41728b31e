"""Document-level systems side by side on the same documents: quality, context accuracy, speed, memory: see
memory_nmt_tools/compare_systems.py (also installed as memory-nmt-compare-systems)."""
from memory_nmt_tools.compare_systems import main

if __name__ == "__main__":
    main()
