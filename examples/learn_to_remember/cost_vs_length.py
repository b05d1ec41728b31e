"""Decoding time and peak memory against document length (paper Figure 8), three ways.

    OMP_NUM_THREADS=1 python examples/learn_to_remember/cost_vs_length.py --plot cost.png  # CPU, 2-4 minutes
    python examples/learn_to_remember/cost_vs_length.py --device cuda --lengths 100,300,1000,3000 --plot cost.png

A document of N tokens is N / --sentence-tokens sentences of random words (as in the paper:
random source tokens, the model decodes as many target tokens). It is decoded

- ``sentence``: by fairseq's ``transformer`` with ``SequenceGenerator``, sentence by sentence;
- ``memory``: by a ``transformer_recurrent_memory`` of the same size with the plugin's
  ``DocumentSequenceGenerator``, sentence by sentence, the memory carried;
- ``document``: by the same ``transformer`` given the whole document as one source sequence,
  decoding the whole target in one go (built with max source/target positions above the
  longest document).

The models are randomly initialised and share their weights (``build_models`` of the decoding
benchmark, ``memory_nmt_tools/benchmarks/decoding.py``, whose helpers this script imports); cost
does not depend on the weights. Every output is forced to the length of its input (the
sentence's, or the whole document's: no eos before, eos after), so all three do the same number
of beam steps per token. Each measurement runs in a fresh process of its own (this script again,
with the hidden --measure MODEL and --tokens N; ``memory_nmt_tools/benchmarks/peak_memory.py``),
so every one starts from the same state: a warm-up document of two sentences decoded the same way, then the
timed document. The peak is measured from just before the warm-up, above the level there: on cuda
``torch.cuda.max_memory_allocated``, on cpu the peak resident set ``VmHWM`` (as in
``benchmarks/decoding.py``). Printed: seconds and peak MiB per length and model, and the
ratios memory/sentence and document/sentence of this run; plotted: both against tokens.

Default CPU run: model 128/512, 4 heads, 3+3 layers, beam 2, 100-token sentences, lengths
100,300,1000,2000: about 2 minutes on a quiet 2-core machine with one thread (106 s measured,
the twelve fresh processes' start included), most of it in the whole-document model at 1000 and
2000 tokens.
On cuda the default model is transformer-base (512/2048, 8 heads, 6+6 layers), beam 5.
"""
import argparse
import logging
import random
import sys
import time

import matplotlib

matplotlib.use("Agg")
logging.getLogger("matplotlib").setLevel(logging.WARNING)  # importing fairseq sets the root logger to DEBUG
import matplotlib.pyplot as plt  # noqa: E402
import fairseq  # noqa: E402
import torch  # noqa: E402
from fairseq.models.transformer import TransformerModel  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402
from fairseq.tasks.translation import TranslationConfig, TranslationTask  # noqa: E402
# torch imports this module (and sympy, ~40 MB) the first time F.multi_head_attention_forward
# checks a key padding mask; here only the memory model's Update Attention passes one (single
# lanes have no padding elsewhere): importing it now keeps a one-time import out of its peak.
import torch.fx.experimental.symbolic_shapes  # noqa: E402,F401

from memory_nmt_tools.benchmarks.decoding import (  # noqa: E402
    build_models,
    decode,
    dictionary,
    document_dataset,
    generator,
    model_args,
    step_batches,
)
from memory_nmt.pipeline.generator import DocumentSequenceGenerator  # noqa: E402
from memory_nmt_tools.synthetic_documents import SyntheticDocument  # noqa: E402
from memory_nmt_tools.benchmarks.peak_memory import (  # noqa: E402
    MiB, measured_or_exit, peak_name, peak_since, print_figures, start_peak,
)
from memory_nmt_tools.benchmarks.options import add_precision, check_precision, precision_name  # noqa: E402
from memory_nmt_tools.paths import check_paths  # noqa: E402

MODELS = ("sentence", "memory", "document")
LABELS = {
    "sentence": "sentence-level transformer",
    "memory": "recurrent memory (memory carried)",
    "document": "transformer on the whole document",
}
DEFAULTS = {  # embed_dim, ffn_dim, heads, layers (each side), beam
    "cpu": (128, 512, 4, 3, 2),
    "cuda": (512, 2048, 8, 6, 5),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    add_precision(parser, "bfloat16 under torch.autocast, as the document task's --amp-bf16 decodes (cuda or cpu)")
    parser.add_argument("--lengths", default="100,300,1000,2000", help="document lengths in tokens")
    parser.add_argument("--sentence-tokens", type=int, default=100, help="tokens per sentence")
    parser.add_argument("--beam", type=int)
    parser.add_argument("--embed-dim", type=int)
    parser.add_argument("--ffn-dim", type=int)
    parser.add_argument("--heads", type=int)
    parser.add_argument("--layers", type=int, help="encoder layers = decoder layers")
    parser.add_argument("--memory-size", type=int, default=16)
    parser.add_argument("--vocabulary", type=int, default=1000, help="distinct random words")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plot", required=True, help="PNG file to write, in an existing folder")
    parser.add_argument("--measure", choices=MODELS, help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    check_precision(parser, args)
    for name, default in zip(("embed_dim", "ffn_dim", "heads", "layers", "beam"), DEFAULTS[args.device]):
        if getattr(args, name) is None:
            setattr(args, name, default)
    try:
        args.lengths = [int(n) for n in args.lengths.split(",")]
    except ValueError:
        parser.error(f"--lengths {args.lengths!r}: give comma-separated token counts, e.g. 100,300,1000")
    if args.sentence_tokens < 1:
        parser.error(f"--sentence-tokens {args.sentence_tokens}: give a positive number")
    uneven = [n for n in args.lengths if n < 1 or n % args.sentence_tokens]
    if uneven:
        parser.error(f"--lengths {uneven}: each length must be a positive multiple of "
                     f"--sentence-tokens {args.sentence_tokens}")
    check_paths(parser, plots=[("--plot", args.plot)])
    return args


def random_document(tokens: int, sentence_tokens: int, vocabulary: int, seed: int) -> SyntheticDocument:
    """``tokens`` random words in sentences of ``sentence_tokens``; the target is another draw."""
    rng = random.Random(seed)

    def sentences():
        words = [f"w{rng.randrange(vocabulary)}" for _ in range(tokens)]
        return [" ".join(words[i:i + sentence_tokens]) for i in range(0, tokens, sentence_tokens)]

    return SyntheticDocument(source=sentences(), target=sentences())


def document_model(args, plain, vocabulary):
    """The plain transformer again, with positions for the longest document as one sequence."""
    positions = max(args.lengths) + 2
    task = TranslationTask(TranslationConfig(), vocabulary, vocabulary)
    model = TransformerModel.build_model(
        argparse.Namespace(**vars(model_args(args)), max_source_positions=positions,
                           max_target_positions=positions),
        task,
    )
    model.load_state_dict(plain.state_dict())
    model.eval().to(args.device)
    return model.half() if args.fp16 else model


def decoding(name, model, document, vocabulary, args, stream):
    """(generator, batches) that decode ``document`` the way model ``name`` does, every output
    forced to the length of its input sentence (for ``document``, the whole document)."""
    if name == "document":
        document = SyntheticDocument(source=[" ".join(document.source)], target=[" ".join(document.target)])
    cls = DocumentSequenceGenerator if name == "memory" else SequenceGenerator
    batches = step_batches(document_dataset([document], vocabulary, vocabulary, stream), 1, args.device)
    return generator(cls, model, vocabulary, args, len(document.source[0].split())), batches


def measure(args, name, tokens):
    """(In the measuring process.) Print the seconds and peak bytes of decoding a ``tokens`` document
    with ``name``: the peak covers a two-sentence warm-up and the document, the time the document only."""
    vocabulary = dictionary([" ".join(f"w{i}" for i in range(args.vocabulary))])
    plain, memory = build_models(args, vocabulary, vocabulary)
    models = {"sentence": plain, "memory": memory}
    model = models[name] if name in models else document_model(args, plain, vocabulary)
    warmup = random_document(2 * args.sentence_tokens, args.sentence_tokens, args.vocabulary, args.seed - 1)
    measured = random_document(tokens, args.sentence_tokens, args.vocabulary, args.seed + tokens)
    warmup_decoding = decoding(name, model, warmup, vocabulary, args, "warmup")
    measured_decoding = decoding(name, model, measured, vocabulary, args, "measured")
    before = start_peak(args.device)
    decode(*warmup_decoding, args)
    seconds, _ = decode(*measured_decoding, args)
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else None
    print_figures({"seconds": seconds, "peak_bytes": peak_since(args.device, before), "gpu": gpu})


def measure_in_fresh_process(args, name, tokens):
    """``measure``'s figures, measured in a process of its own (its failure ends this one)."""
    return measured_or_exit(
        [sys.executable, __file__, *args.argv, "--measure", name, "--tokens", str(tokens)]
    )


def format_table(args, results):
    header = (f"{'tokens':>7} {'sents':>5} | {'seconds':^26} | {'peak MiB':^26} | "
              f"{'time ratio':^15} | {'peak ratio':^15}")
    names = " ".join(f"{name:>8}" for name in MODELS)
    lines = [header, f"{'':>7} {'':>5} | {names} | {names} | {'mem/sen':>7} {'doc/sen':>7} | "
                     f"{'mem/sen':>7} {'doc/sen':>7}"]

    def ratio(a, b):
        return a / b if b > 0 else float("nan")

    for n in args.lengths:
        row = results[n]
        seconds = [row[name]["seconds"] for name in MODELS]
        peaks = [row[name]["peak_bytes"] / MiB for name in MODELS]
        lines.append(
            f"{n:>7} {n // args.sentence_tokens:>5} | " + " ".join(f"{s:>8.3f}" for s in seconds)
            + " | " + " ".join(f"{p:>8.2f}" for p in peaks)
            + f" | {ratio(seconds[1], seconds[0]):>7.2f} {ratio(seconds[2], seconds[0]):>7.2f}"
            + f" | {ratio(peaks[1], peaks[0]):>7.2f} {ratio(peaks[2], peaks[0]):>7.2f}"
        )
    return "\n".join(lines)


def plot(args, results, path):
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(11, 4))
    for name in MODELS:
        time_axes.plot(args.lengths, [results[n][name]["seconds"] for n in args.lengths], marker="o", label=LABELS[name])
        memory_axes.plot(args.lengths, [results[n][name]["peak_bytes"] / MiB for n in args.lengths],
                         marker="o", label=LABELS[name])
    time_axes.set_ylabel("decoding time (s)")
    memory_axes.set_ylabel("peak memory while decoding (MiB)")
    for axes in (time_axes, memory_axes):
        axes.set_xlabel("document length (tokens)")
        axes.legend()
    figure.suptitle(f"decoding cost against document length ({args.device}, beam {args.beam})")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main(argv=None):
    args = parse_args(argv)
    if args.measure:
        return measure(args, args.measure, args.tokens)
    start = time.perf_counter()
    results = {n: {name: measure_in_fresh_process(args, name, n) for name in MODELS} for n in args.lengths}
    gpu = results[args.lengths[0]][MODELS[0]]["gpu"]
    threads = f" ({gpu})" if gpu else f", {torch.get_num_threads()} threads"
    peak = peak_name(args.device)
    print(f"device {args.device}{threads}, {precision_name(args)}; "
          f"torch {torch.__version__}, fairseq {fairseq.__version__}")
    print(f"model {args.embed_dim}/{args.ffn_dim}, {args.heads} heads, {args.layers}+{args.layers} layers, "
          f"memory {args.memory_size} slots; vocabulary {args.vocabulary} random words; beam {args.beam}; "
          f"sentences of {args.sentence_tokens} tokens; every output forced to its input's length")
    print(f"time = decoding the whole document; peak = {peak} above the level before decoding; "
          f"one fresh process per measurement ({time.perf_counter() - start:.0f} s in all)")
    print(format_table(args, results))
    plot(args, results, args.plot)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
