"""Installs memory_nmt, a fairseq --user-dir plugin for document-level translation systems.

Python 3.11 and 3.12 get ``ve-fairseq`` (wheels of fairseq's main branch, imported as ``fairseq``);
older Pythons keep the official ``fairseq==0.12.2``, which does not import on 3.11.
Install ``torch`` first (``scripts/install.sh`` does) to choose its build: on a machine without
a GPU, ``pip install torch==2.13.0`` takes a CPU build instead of several GB of CUDA packages.
"""
from setuptools import find_packages, setup

setup(
    name="memory_nmt",
    version="0.1.0",
    description="Document-level NMT as a fairseq plugin: a recurrent memory (Feng et al., 2022) and the systems it is compared with",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["memory_nmt", "memory_nmt.*", "memory_nmt_tools", "memory_nmt_tools.*"]),
    entry_points={
        "console_scripts": [
            "memory-nmt-prepare-documents = memory_nmt_tools.prepare_documents:main",
            "memory-nmt-document-bleu = memory_nmt_tools.document_bleu:main",
            "memory-nmt-contrastive-eval = memory_nmt_tools.contrastive_eval:main",
            "memory-nmt-compare-systems = memory_nmt_tools.compare_systems:main",
            "memory-nmt-benchmark-training = memory_nmt_tools.benchmarks.training:main",
            "memory-nmt-benchmark-decoding = memory_nmt_tools.benchmarks.decoding:main",
            "memory-nmt-synthetic-documents = memory_nmt_tools.synthetic_documents:main",
            "memory-nmt-system-options = memory_nmt_tools.system_options:main",
            "memory-nmt-checkpoint-options = memory_nmt_tools.checkpoint_options:main",
        ],
    },
    python_requires=">=3.9",  # str.removeprefix, str.removesuffix
    install_requires=[
        "torch>=2.4",  # torch.serialization.add_safe_globals (fairseq_changes.py)
        "fairseq==0.12.2; python_version < '3.11'",
        "ve-fairseq==0.12.3; python_version >= '3.11'",
        "sacrebleu>=2.0",
        "sacremoses",
        "subword-nmt",
        "sentencepiece",  # prepare_documents.py --spm-model: a pretrained checkpoint's pieces
        "tqdm",
        "matplotlib",
    ],
    extras_require={"test": ["pytest", "pytest-xdist", "filelock"]},  # filelock: tests/conftest.py's shared fixtures
)
