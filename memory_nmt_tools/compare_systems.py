"""Document-level systems side by side on the same documents: quality, context accuracy, speed, memory.

For every ``--system NAME=CHECKPOINT`` (any system of the plugin, or fairseq's plain
``transformer``, which the document task runs sentence by sentence), on the same binarized data:

1. translates ``--gen-subset`` with fairseq-generate (``--task document_translation``, the same
   ``--beam`` for every system, and by default the same batches: ``--batch-size`` documents
   each; ``--max-tokens`` instead counts the previous sentences a system reads with each
   sentence, so a concatenation model's batches then hold fewer documents), keeps its output
   and log in WORKDIR/generate-NAME.{txt,log}, scores s-BLEU and d-BLEU with sacrebleu
   (``document_bleu.py``), and reads fairseq's own speed: sentences/s over its inference steps;
2. measures how much of its context it uses, CXMI (``context_usage.py``): its cross-entropy on
   the split's references, teacher-forced, without its context (every sentence its own
   document) minus with it, in bits per token;
3. with ``--contrastive FORMAT FILE...``, scores contrastive items in context
   (``contrastive_eval.py``): accuracy overall and by antecedent distance, and the correct
   candidate's log-probability per token with its context minus without, in bits (CXMI on the
   items), overall and by distance; their text segmented as the training data was
   (``prepare_documents.py``): Moses tokenization (``--moses``) and/or BPE (``--bpe-codes``),
   or a pretrained checkpoint's sentencepiece model on the raw text (``--spm-model``, alone);
4. decodes single documents of ``--lengths`` sentences (the split's source sentences in corpus
   order, repeated as needed), each in a fresh process, and measures the peak memory while
   decoding (``peak_memory.py``) and the time per sentence.

Every system is loaded and the split batched for it as fairseq-generate will, before anything
is translated (``not_measurable``): what would stop it (a checkpoint that does not load, a sentence
wider than ``--max-tokens``, random context on a split of one document) stops the run there,
naming the system. Each figure goes to ``--json`` as it comes (``complete`` false until the
last); a failed step prints the table so far, '-' where nothing was measured, before its error.

An associated memory whose data chooses its context (``--context-choice next`` or ``random``,
``memory_nmt/pipeline/chosen_context.py``) is measured where it can be and reads n/a elsewhere,
the reason under the table: no contrastive scores, since an item holds neither its next
sentences nor other documents' (the scorer refuses it); with ``random``, no CXMI on the split,
whose copy without context still gives it random sentences. Its documents of ``--lengths`` draw
their random context from the split's sentences, as its translation does. Skipped, not refused:
these models are compared as the paper's Table 4 compares them, beside the previous-sentence
model in one table, and no option would give them the figure.

``--model-overrides NAME=DICT`` decodes system NAME with options other than its checkpoint's, as
fairseq's ``--model-overrides`` does: the same checkpoint twice under two names shows, say, how the
local+global model's cost grows with its chunks (``--system lg=CKPT --system lg-5=CKPT
--model-overrides "lg-5={'chunk_sentences': 5}"``).

Prints one table, a row per system (and, with contrastive items, a second one of CXMI by
distance); ``--json FILE`` writes every figure, ``--plot FILE`` draws them. Times are comparable
within one run on one machine only.

    python scripts/compare_systems.py --data quickstart/data-bin \\
        --system sentence=quickstart/checkpoints/sentence/checkpoint_best.pt \\
        --system concat=quickstart/checkpoints/concat/checkpoint_best.pt \\
        --system memory=quickstart/checkpoints/memory/checkpoint_best.pt \\
        --system amn=quickstart/checkpoints/amn/checkpoint_best.pt \\
        --system local_global=quickstart/checkpoints/local_global/checkpoint_best.pt \\
        --contrastive voita quickstart/contrastive.json --cpu --plot compare.png
"""
import argparse
import ast
import os
from pathlib import Path

from .paths import check_paths
from .prepare_documents import spm_model_refused_with


def parse_system(spec):
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{spec!r}: give NAME=CHECKPOINT, e.g. memory=checkpoints/checkpoint_best.pt")
    if "/" in name or os.sep in name or name in (".", ".."):
        raise argparse.ArgumentTypeError(
            f"{spec!r}: the name {name} names files in WORKDIR (generate-{name}.txt); give a name without '/'"
        )
    if not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"{spec!r}: no checkpoint file {path}")
    return name, path


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", required=True, help="the binarized data (fairseq-preprocess output with .docids)")
    parser.add_argument("--system", dest="systems", type=parse_system, action="append", required=True,
                        metavar="NAME=CHECKPOINT", help="a system to compare (repeat); NAME labels its row")
    parser.add_argument("--gen-subset", default="test", help="the split to translate (default: test)")
    parser.add_argument("--beam", type=positive, default=5)
    parser.add_argument("--batch-size", type=positive, help="documents per batch, the same batches for "
                        "every system (default: 32 unless --max-tokens)")
    parser.add_argument("--max-tokens", type=positive, help="tokens per sentence step, counting the "
                        "context each system reads")
    parser.add_argument("--generate-args", default="", help="more fairseq-generate options for every "
                        "system, e.g. \"--post-process subword_nmt --tokenizer moses\"")
    parser.add_argument("--reference", help="raw reference of the split, one sentence a line, to "
                        "score against instead of the T- lines (e.g. the untokenized text)")
    parser.add_argument("--docids", help="document index of the split (default: DATA/SPLIT.*.docids)")
    parser.add_argument("--contrastive", nargs="+", metavar="FORMAT FILE",
                        help="a contrastive test set: its format (contrapro, bawden, context-files, "
                        "voita, voita-lines; see contrastive_eval.py) and its files")
    parser.add_argument("--context-size", type=int, default=1, help="context lines per candidate "
                        "line of the contrastive context files (default 1)")
    parser.add_argument("--group-size", type=int, help="candidates per contrastive item "
                        "(context-files, voita-lines)")
    parser.add_argument("--moses", action="store_true", help="Moses-tokenize the contrastive text first")
    parser.add_argument("--bpe-codes", help="apply these BPE codes to the contrastive text first")
    parser.add_argument("--spm-model", metavar="MODEL",
                        help="segment the raw contrastive text with this sentencepiece model instead, as "
                        "prepare_documents.py --spm-model segmented the data (a pretrained checkpoint's)")
    parser.add_argument("--lengths", type=parse_lengths, default="10,100,1000",
                        help="sentences of the documents whose decoding peak memory is measured, "
                        "separated by commas, measured shortest first (default: 10,100,1000)")
    parser.add_argument("--cpu", action="store_true", help="decode on the CPU even if there is a GPU")
    parser.add_argument("--fp16", action="store_true", help="decode in half precision (GPU)")
    parser.add_argument("--workdir", type=Path, help="keep the generate outputs and logs here, created if "
                        "missing (default: a temporary directory, deleted at the end unless a step failed)")
    parser.add_argument("--json", type=Path, help="write every figure to this file (its folder must exist)")
    parser.add_argument("--plot", type=Path, help="draw the comparison to this image file (its folder must exist)")
    parser.add_argument("--model-overrides", dest="overrides", type=parse_overrides, action="append", default=[],
                        metavar="NAME=DICT", help="decode system NAME with these options instead of its "
                        "checkpoint's, a Python dict as fairseq's --model-overrides takes (repeat)")
    args = parser.parse_args(argv)
    if args.max_tokens is None and args.batch_size is None:
        args.batch_size = 32
    if args.spm_model and (args.moses or args.bpe_codes):
        parser.error(spm_model_refused_with("--moses and --bpe-codes"))
    names = [name for name, _ in args.systems]
    if len(set(names)) != len(names):
        parser.error(f"--system names must differ: {', '.join(names)}")
    unknown = [name for name, _ in args.overrides if name not in names]
    if unknown:
        parser.error(f"--model-overrides {unknown[0]}=...: no --system is named {unknown[0]}")
    args.overrides = dict(args.overrides)
    check_paths(
        parser,
        inputs=[("--data", args.data, "directory", "the binarized data (fairseq-preprocess's --destdir)"),
                ("--reference", args.reference, "file", "the raw reference of the split"),
                ("--docids", args.docids, "file", "the docids file of the split"),
                ("--bpe-codes", args.bpe_codes, "file", "the BPE codes of the training data")],
        outputs=[("--json", args.json)], plots=[("--plot", args.plot)], workdirs=[("--workdir", args.workdir)],
    )
    return args


def positive(text):
    """A whole number of 1 or more (``--beam``, ``--batch-size``, ``--max-tokens``)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, 1 or more")
    return number


def parse_lengths(text):
    """``--lengths``: "10,100,1000" -> [10, 100, 1000], shortest first (the last column times the longest)."""
    try:
        lengths = [int(n) for n in text.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1 or len(set(lengths)) < len(lengths):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give numbers of sentences (1 or more, each once) separated by commas, e.g. 10,100,1000"
        )
    return sorted(lengths)


def parse_overrides(spec):
    """``NAME=DICT`` -> (NAME, the dict), checked as fairseq will read it."""
    name, sep, text = spec.partition("=")
    try:
        overrides = ast.literal_eval(text) if sep and name else None
    except (ValueError, SyntaxError):
        overrides = None
    if not isinstance(overrides, dict):
        raise argparse.ArgumentTypeError(
            f"{spec!r}: give NAME=DICT, e.g. \"lg-5={{'chunk_sentences': 5}}\" (a Python dict of model options)"
        )
    return name, overrides


def main(argv=None):
    args = parse_args(argv)
    # imports fairseq and the plugin (seconds, and their log lines): only once the command line is accepted
    from .comparison_steps import compare_and_report

    compare_and_report(args)


if __name__ == "__main__":
    main()
