"""memory_nmt's command-line tools, and the code they share that needs no model.

The everyday commands are modules with ``main(argv=None)``, installed as console scripts
(``setup.py``: ``memory-nmt-prepare-documents`` ...) and run by the thin ``scripts/<name>.py``:
``prepare_documents`` (raw documents to fairseq-preprocess input and a document index),
``document_bleu`` (s-BLEU and d-BLEU of fairseq-generate output), ``contrastive_eval``,
``compare_systems``, ``benchmark_training``, ``benchmark_decoding`` and ``system_options`` (the
options of an ``--arch``, which fairseq-train's ``--help`` leaves out). Beside them is what they,
the quickstart and the paper's analyses (``examples/learn_to_remember/``) share: reading text
files strictly (``text_files.py``), document indexes (``document_index.py``, the one reader of
``.docids``) and fairseq-generate output (``generate_texts.py``), checking a command's paths
before it starts (``paths.py``) and the benchmarks' options as they are parsed
(``benchmark_options.py``), running fairseq's commands as logged, resumable steps
(``experiments.py``), and measuring how much of its context a checkpoint uses (CXMI,
``context_usage.py``, which ``compare_systems`` reports).

A package of its own beside the plugin: importing ``memory_nmt`` registers its systems with
fairseq, which imports fairseq (seconds, and fairseq's log lines on stderr). Importing this
package imports neither, nor do its modules that need no model (text files, document indexes,
BLEU, preparing documents, comparing systems, the experiments' steps), so those commands start
at once and print only their own lines; the others import the plugin themselves. The plugin
imports two of them, ``text_files.py`` and ``document_index.py`` (which import nothing else of
either package), so that its training reads a document index as the tools do
(``tests/pipeline/test_package_imports.py`` holds these rules).
"""
