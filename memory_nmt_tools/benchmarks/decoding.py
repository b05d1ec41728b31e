"""Decoding speed and memory of ``transformer_recurrent_memory`` against fairseq's ``transformer``.

Measures, in one run:

1. Speed, side by side. The same synthetic sentences (--documents documents of --sentences
   sentences) are decoded by fairseq's ``SequenceGenerator`` with a plain ``transformer`` and by
   ``memory_nmt``'s ``DocumentSequenceGenerator`` with a ``transformer_recurrent_memory`` of the
   same size, in the same batches (sentence t of --batch-documents documents, made by the
   plugin's own planner of decoding's lanes, ``DocumentLanes``), in document order so the memory is carried, with the same beam.
   After one warm-up pass each, the two are timed --repeats times, alternating (A B A B ...).
   Reports sentences/s (median pass) of each and the ratio memory/plain (target >= 0.95), and
   the arithmetic of one more pass of each (the FLOPs of matrix products and attention,
   ``arithmetic.py``) and its ratio: at equal FLOP rates the speed ratio cannot exceed its
   inverse, which tells what the memory costs by design from what its implementation costs.
2. Memory and time flat in document length. Single documents of --lengths sentences are decoded
   by the memory model sentence by sentence (one lane, memory carried), each in a fresh
   process (this command with the hidden --measure-peak N), after a 2-sentence warm-up document.
   Reports, per length, the peak memory above the level before the warm-up, the time per
   sentence (warm-up excluded), and their ratios to the shortest document (target ~1.0). The
   peak is measured as ``peak_memory.py`` says (cuda: tensor bytes; cpu: peak resident set).

The models are randomly initialised (--seed): speed does not depend on the weights. The memory
model loads the plain model's state_dict, so their shared weights are identical; its Output
Attention starts at zero, so it computes exactly what the plain model computes, and the script
checks that both choose the same hypotheses. Untrained models would emit garbage up to the
maximum length, at different lengths per sentence; instead every sentence is forced to the
length of the longest reference of the corpus, L (max_len_a=0, max_len_b=min_len=L: no eos
before L tokens, eos after), so both models run the same number of beam steps on every
sentence and do identical work, apart from the memory. The synthetic references have 8 tokens;
--output-length N forces N instead, as long as real translations are (TED's BPE sentences
average about 25 tokens), since the memory's cost is per sentence (its write, the encoder's
read) and the decoder's grows with the translation.

CPU (default model 256/1024, 4 heads, 3+3 layers; about 4 minutes on one thread):
    OMP_NUM_THREADS=1 python scripts/benchmark_decoding.py --repeats 1
GPU (default model transformer-base 512/2048, 8 heads, 6+6 layers):
    python scripts/benchmark_decoding.py --device cuda [--fp16 | --amp-bf16]
"""
import argparse
import statistics
import sys
import time
from argparse import Namespace
from contextlib import nullcontext

import fairseq
import torch
from fairseq import utils
from fairseq.data import Dictionary, LanguagePairDataset
from fairseq.models.transformer import TransformerModel
from fairseq.sequence_generator import SequenceGenerator

from memory_nmt.pipeline.data import Document as DocumentSpan
from memory_nmt.pipeline.data import DocumentDataset
from memory_nmt.pipeline.planners import DocumentLanes, EpochRequest
from memory_nmt.pipeline.generator import DocumentSequenceGenerator
from memory_nmt.pipeline.task import DocumentTranslationTask
from memory_nmt.pipeline.task_config import DocumentTranslationConfig
from memory_nmt.systems.recurrent_memory.model import RecurrentMemoryOptions, RecurrentMemoryTransformerModel

from ..synthetic_documents import generate_documents, generate_long_document
from .arithmetic import ArithmeticCounter
from .options import (add_precision, as_declared, at_least, check_precision, comma_separated, precision_name,
                      refuse_missing_cuda)
from .peak_memory import (
    MiB, measured_or_exit, peak_name, peak_since, print_figures, start_peak,
)

DEFAULT_DIMS = {  # embed_dim, ffn_dim, heads, layers (each side)
    "cpu": (256, 1024, 4, 3),
    "cuda": (512, 2048, 8, 6),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    add_precision(parser, "bfloat16 under torch.autocast, as the document task's --amp-bf16 decodes (cuda or cpu)")
    parser.add_argument("--beam", type=at_least(1), default=5)
    parser.add_argument("--batch-documents", type=at_least(1), default=32)
    parser.add_argument("--documents", type=at_least(1), default=64)
    parser.add_argument("--sentences", type=at_least(1), default=8, help="sentences per document")
    parser.add_argument("--lengths", type=comma_separated(at_least(1)), default="10,100,1000",
                        help="long-document lengths")
    parser.add_argument("--embed-dim", type=at_least(1))
    parser.add_argument("--ffn-dim", type=at_least(1))
    parser.add_argument("--heads", type=at_least(1))
    parser.add_argument("--layers", type=at_least(1), help="encoder layers = decoder layers")
    parser.add_argument("--memory-size", type=as_declared(RecurrentMemoryOptions, "memory_size"), default=16)
    parser.add_argument("--output-length", type=at_least(1),
                        help="tokens every translation is forced to (default: the longest reference, 8)")
    parser.add_argument("--repeats", type=at_least(1), default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--measure-peak", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    refuse_missing_cuda(parser, args.device)
    check_precision(parser, args)
    for name, default in zip(("embed_dim", "ffn_dim", "heads", "layers"), DEFAULT_DIMS[args.device]):
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.embed_dim % args.heads:
        parser.error(f"--embed-dim {args.embed_dim} and --heads {args.heads}: each head takes an equal share "
                     "of the embedding; give an --embed-dim that --heads divides")
    return args


def corpus(args):
    """Speed documents, long documents by length, and a 2-sentence warm-up document."""
    speed = generate_documents(args.documents, args.seed, args.sentences, args.sentences)
    long = {n: generate_long_document(n, args.seed + n) for n in args.lengths}
    return speed, long, generate_long_document(2, args.seed - 1)


def dictionary(sentences):
    d = Dictionary()
    for sentence in sentences:
        for word in sentence.split():
            d.add_symbol(word)
    d.finalize(padding_factor=8)
    return d


def encode(d, sentences):
    return [d.encode_line(sentence, add_if_not_exist=False).long() for sentence in sentences]


def document_dataset(documents, src_dict, tgt_dict, stream):
    """The documents as the plugin's ``DocumentDataset`` over a fairseq ``LanguagePairDataset``."""
    src = encode(src_dict, [s for doc in documents for s in doc.source])
    tgt = encode(tgt_dict, [s for doc in documents for s in doc.target])
    pairs = LanguagePairDataset(src, [len(t) for t in src], src_dict, tgt, [len(t) for t in tgt], tgt_dict)
    spans, first = [], 0
    for i, doc in enumerate(documents):
        spans.append(DocumentSpan(f"doc{i}", first, len(doc.source)))
        first += len(doc.source)
    return DocumentDataset(pairs, spans, stream=stream, docids_path="(synthetic)")


def step_batches(dataset, batch_documents, device):
    """Batches in decoding order: step t of each group holds sentence t of its documents."""
    items = DocumentLanes().plan(dataset, EpochRequest(None, batch_documents)).items
    return [utils.apply_to_sample(lambda t: t.to(device), items.collater([items[i]]))
            for i in range(len(items))]


def model_args(args):
    """The dims; ``build_model`` fills in the rest from ``base_architecture`` (and, for the memory
    model, ``recurrent_memory_base``, as the ``transformer_recurrent_memory`` architecture does)."""
    e, f, h, n = args.embed_dim, args.ffn_dim, args.heads, args.layers
    return Namespace(
        encoder_embed_dim=e, decoder_embed_dim=e, encoder_ffn_embed_dim=f, decoder_ffn_embed_dim=f,
        encoder_attention_heads=h, decoder_attention_heads=h, encoder_layers=n, decoder_layers=n,
        memory_size=args.memory_size,
    )


def build_models(args, src_dict, tgt_dict):
    """A plain transformer and a memory transformer of the same size, shared weights identical."""
    task = DocumentTranslationTask(
        DocumentTranslationConfig(distributed_world_size=1, ddp_backend="legacy_ddp"), src_dict, tgt_dict
    )
    torch.manual_seed(args.seed)
    plain = TransformerModel.build_model(model_args(args), task)
    memory = RecurrentMemoryTransformerModel.build_model(model_args(args), task)
    memory.load_state_dict(plain.state_dict())
    for model in (plain, memory):
        model.eval().to(args.device)
        if args.fp16:
            model.half()
    return plain, memory


def setup(args):
    """Everything both modes need: documents, dictionaries, models, forced output length."""
    speed, long, warmup = corpus(args)
    everything = speed + list(long.values()) + [warmup]
    src_dict = dictionary(s for doc in everything for s in doc.source)
    tgt_dict = dictionary(s for doc in everything for s in doc.target)
    length = args.output_length or max(len(s.split()) for doc in speed for s in doc.target)
    plain, memory = build_models(args, src_dict, tgt_dict)
    return speed, long, warmup, src_dict, tgt_dict, length, plain, memory


def generator(cls, model, tgt_dict, args, length):
    return cls([model], tgt_dict, beam_size=args.beam, max_len_a=0, max_len_b=length, min_len=length)


def synchronize(args):
    if args.device == "cuda":
        torch.cuda.synchronize()


def decode(gen, batches, args, keep=False):
    """Seconds to decode ``batches`` in order, and (if ``keep``) each sentence's best tokens."""
    best = []
    start = time.perf_counter()
    for batch in batches:
        with torch.autocast(args.device, dtype=torch.bfloat16) if args.amp_bf16 else nullcontext():
            hypotheses = gen.generate(None, batch)
        if keep:
            best.extend(sentence[0]["tokens"].tolist() for sentence in hypotheses)
    synchronize(args)
    return time.perf_counter() - start, best


def benchmark_speed(args, plain_gen, memory_gen, batches):
    """Median sentences/s of each generator over alternating timed passes, after a warm-up."""
    _, plain_best = decode(plain_gen, batches, args, keep=True)
    _, memory_best = decode(memory_gen, batches, args, keep=True)
    seconds = {"plain": [], "memory": []}
    for _ in range(args.repeats):
        seconds["plain"].append(decode(plain_gen, batches, args)[0])
        seconds["memory"].append(decode(memory_gen, batches, args)[0])
    sentences = len(plain_best)
    rates = {name: sentences / statistics.median(s) for name, s in seconds.items()}
    flops = {}
    for name, gen in (("plain", plain_gen), ("memory", memory_gen)):
        with ArithmeticCounter() as counter:
            decode(gen, batches, args)
        flops[name] = counter.flops / sentences
    return sentences, rates, flops, plain_best == memory_best


def measure_peak(args):
    """(Subprocess mode.) Decode one long document; print its peak memory and s/sentence as JSON."""
    _, long, warmup, src_dict, tgt_dict, length, _, memory = setup(args)
    n = args.measure_peak
    gen = generator(DocumentSequenceGenerator, memory, tgt_dict, args, length)
    warmup_batches = step_batches(document_dataset([warmup], src_dict, tgt_dict, "warmup"), 1, args.device)
    batches = step_batches(document_dataset([long[n]], src_dict, tgt_dict, "long"), 1, args.device)
    before = start_peak(args.device)
    decode(gen, warmup_batches, args)
    seconds, _ = decode(gen, batches, args)
    print_figures({"peak_bytes": peak_since(args.device, before), "seconds_per_sentence": seconds / n})


def peak_in_subprocess(args, n):
    """``measure_peak``'s figures for the ``n``-sentence document, measured in a fresh process; the
    command ends with its message if that process fails."""
    return measured_or_exit(
        [sys.executable, "-m", "memory_nmt_tools.benchmarks.decoding", *args.argv, "--measure-peak", str(n)]
    )


def main(argv=None):
    args = parse_args(argv)
    if args.measure_peak:
        return measure_peak(args)
    speed, _, _, src_dict, tgt_dict, length, plain, memory = setup(args)
    batches = step_batches(document_dataset(speed, src_dict, tgt_dict, "speed"), args.batch_documents, args.device)
    plain_gen = generator(SequenceGenerator, plain, tgt_dict, args, length)
    memory_gen = generator(DocumentSequenceGenerator, memory, tgt_dict, args, length)
    sentences, rates, flops, identical = benchmark_speed(args, plain_gen, memory_gen, batches)
    peaks = {n: peak_in_subprocess(args, n) for n in args.lengths}

    threads = f", {torch.get_num_threads()} threads" if args.device == "cpu" else ""
    gpu = f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""
    print(f"device {args.device}{gpu}{threads}, {precision_name(args)}; "
          f"torch {torch.__version__}, fairseq {fairseq.__version__}")
    print(f"model {args.embed_dim}/{args.ffn_dim}, {args.heads} heads, {args.layers}+{args.layers} layers; "
          f"memory {args.memory_size} slots in {', '.join(memory.memory_units())}; "
          f"beam {args.beam}; every sentence forced to {length} tokens + eos")
    print(f"\nspeed: {args.documents} documents x {args.sentences} sentences = {sentences} sentences, "
          f"batches of {args.batch_documents} documents, median of {args.repeats} alternating passes")
    print(f"  transformer, SequenceGenerator                         {rates['plain']:8.1f} sentences/s")
    print(f"  transformer_recurrent_memory, DocumentSequenceGenerator {rates['memory']:8.1f} sentences/s")
    print(f"  ratio memory/plain {rates['memory'] / rates['plain']:.3f} (target >= 0.95); "
          f"identical hypotheses: {'yes' if identical else 'NO'}")
    arithmetic = flops["memory"] / flops["plain"]
    print(f"  arithmetic per sentence: {flops['plain'] / 1e6:.1f} and {flops['memory'] / 1e6:.1f} MFLOP, "
          f"ratio memory/plain {arithmetic:.3f}, so at equal FLOP rates sentences/s {1 / arithmetic:.3f} at most")
    measure = peak_name(args.device) + " above the level before decoding"
    print(f"\nlong documents, memory model, one lane, one fresh process each; peak = {measure}")
    print(f"  {'sentences':>9} {'peak MiB':>9} {'peak ratio':>10} {'ms/sentence':>11} {'time ratio':>10}")
    first = peaks[args.lengths[0]]

    def ratio(p, key):
        return p[key] / first[key] if first[key] else float("nan")

    for n, p in peaks.items():
        print(f"  {n:>9} {p['peak_bytes'] / MiB:>9.2f} {ratio(p, 'peak_bytes'):>10.3f} "
              f"{1000 * p['seconds_per_sentence']:>11.2f} {ratio(p, 'seconds_per_sentence'):>10.3f}")


if __name__ == "__main__":
    main()
