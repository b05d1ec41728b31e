"""memory_nmt's command-line tools, the synthetic documents and the benchmarks, beside the plugin.

The everyday commands are modules with ``main(argv=None)``, installed as console scripts
(``setup.py``: ``memory-nmt-prepare-documents`` ...) and run by the thin ``scripts/<name>.py``:
``prepare_documents`` (raw documents to fairseq-preprocess input and a document index),
``document_bleu`` (s-BLEU and d-BLEU of fairseq-generate output), ``contrastive_eval``,
``compare_systems`` (its steps in ``comparison_steps.py``, its table and plot in
``comparison_report.py``, its long documents decoded by ``long_document_cost.py``),
``synthetic_documents`` (documents whose translation needs context, which the quickstart, the
tests and the paper's analyses generate), ``system_options`` (the options of an ``--arch``, which
fairseq-train's ``--help`` leaves out), and the training and decoding benchmarks with what
measuring speed and memory shares (``benchmarks/``). Beside them is what they, the quickstart and
the paper's analyses (``examples/learn_to_remember/``) share: reading text files strictly
(``text_files.py``), document indexes (``document_index.py``, the one reader of ``.docids``) and
fairseq-generate output (``generate_texts.py``), text and dictionaries in subword pieces
(``subword_pieces.py``), checking a command's paths before it starts
(``paths.py``), running fairseq's commands as logged, resumable steps (``experiments.py``), and
measuring how much of its context a checkpoint uses (CXMI, ``context_usage.py``).

A package of its own beside the plugin: importing ``memory_nmt`` registers its systems with
fairseq, which imports fairseq (seconds, and fairseq's log lines on stderr). The rule: importing
this package imports neither, nor do its modules that need no model (text files, document
indexes, fairseq-generate output, BLEU, preparing documents, synthetic documents, paths, the
experiments' steps), so those commands start at once and print only their own lines. The modules
that need a model (``contrastive_eval``, ``context_usage``, the comparison's steps and
``long_document_cost``, the benchmarks) import the plugin or torch at their top; the two commands
that need one but answer ``--help`` and refuse their options at once, ``compare_systems`` and
``system_options``, import it in one place each, once their command line is accepted. The
plugin imports two of this package's modules, ``text_files.py`` and ``document_index.py`` (which
import nothing else of either package), so that its training reads a document index as the tools
do (``tests/pipeline/test_package_imports.py`` holds these rules).
"""
