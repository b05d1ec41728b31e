#!/usr/bin/env bash
# Installs memory_nmt and everything it needs into the current Python environment.
# torch is installed first, pinned, unless one is already there: that keeps a CPU-only
# machine on the local CPU build, and leaves a user's own (CUDA) torch untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --upgrade pip >/dev/null
if ! python -c "import torch" 2>/dev/null; then
    python -m pip install "torch==2.13.0"
fi
python -m pip install -e ".[test]"
