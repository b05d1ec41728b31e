"""How far back a trained ``transformer_recurrent_memory`` looks: gradient reach (paper section 5.2, Figure 4).

    python examples/learn_to_remember/gradient_reach.py --path checkpoint.pt --data data-bin --split test \\
        --bucket 10 --max-distance 100 --plot reach.png [--max-documents N] [--device cuda]

Each document of the split is walked sentence by sentence with the memory carried and NOT
detached, so a sentence's loss reaches every earlier sentence through the chain of memory
updates (the training-time truncation of ``truncation.py``, ``--gradient-reach``, does not
apply: this measures what the trained model uses). For a target sentence s and an earlier (or the same) sentence i:

- ``L_s`` is sentence s's reference loss, teacher forced: the sum of its tokens' NLL;
- ``e_i[p]`` is the embedding lookup of token p of sentence i (the output of ``embed_tokens``,
  before scaling and positions), on the source side (encoder input) and on the target side
  (decoder input: eos + the reference prefix, which writes the decoder's memory);
- ``G(s, i) = sum over the unique tokens w of sentence i of || sum_{p : x_i[p] = w} dL_s/de_i[p] ||_2``:
  the norm of the gradient that sentence i's occurrences send to embedding row w, summed
  over the rows (each token type counted once within the sentence, as in the paper);
- ``Score(bucket [b, b + B)) = mean of G(s, i)`` over every (document, s, i) with
  ``b <= s - i < b + B`` and ``s - i < --max-distance``; "pairs" counts them (the paper
  averages sums over the bucket's sentences; a mean per pair does not grow with the bucket).

The model runs in eval mode (no dropout) with its parameters frozen; only the embeddings'
gradients are computed.

Distance 0 is the sentence's own tokens; distances >= 1 reach sentence s only through the
memory (the Output Attention), so a model whose reads are zero scores exactly 0 there.
Printed: one row per bucket (distances, pairs, source score, target score); plotted: both
scores against the distance (log scale when all are positive).

Memory stays bounded for long documents: a no-grad pass records the (detached) carry before
every sentence; then targets are taken in blocks of ``--max-distance`` sentences, each block's
graph rebuilt from the earliest sentence its targets can reach (at most ``2 * max-distance - 1``
sentences kept), with one ``torch.autograd.grad`` per target over the embeddings in reach.
Gradients are exact: cutting the graph before the earliest sentence in reach changes none of
the gradients asked for.
"""
import argparse
import logging
import sys
from contextlib import contextmanager
from typing import Dict, List, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")
logging.getLogger("matplotlib").setLevel(logging.WARNING)  # importing fairseq sets the root logger to DEBUG
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from fairseq import checkpoint_utils, utils  # noqa: E402
from tqdm import tqdm  # noqa: E402

import memory_nmt  # noqa: E402,F401  (registers the plugin; lets fairseq load its checkpoints)
from memory_nmt.pipeline.checkpoint_files import check_checkpoint_file  # noqa: E402
from memory_nmt.pipeline.data import Document, DocumentDataset  # noqa: E402
from memory_nmt.pipeline.errors import InputError  # noqa: E402
from memory_nmt_tools.paths import check_paths  # noqa: E402

SIDES = ("source", "target")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--path", required=True, help="a transformer_recurrent_memory checkpoint")
    parser.add_argument("--data", required=True, help="the data-bin directory (with the split's .docids)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--bucket", type=int, default=10, help="sentences per distance bucket")
    parser.add_argument("--max-distance", type=int, default=100, help="measure distances k < N sentences")
    parser.add_argument("--max-documents", type=int, help="only the first N documents of the split")
    parser.add_argument("--plot", required=True, help="PNG file to write, in an existing folder")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    for name in ("bucket", "max_distance", "max_documents"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} {value}: give a positive number")
    check_paths(parser, inputs=[("--path", args.path, "file", "a transformer_recurrent_memory checkpoint"), ("--data", args.data, "directory", "the binarized data directory (fairseq-preprocess's --destdir, with the split's .docids)")],
                plots=[("--plot", args.plot)])
    return args


def load(path: str, data: str, split: str, device: str) -> Tuple[torch.nn.Module, DocumentDataset]:
    """The checkpoint's model (eval mode, parameters frozen) and the split's documents."""
    check_checkpoint_file(str(path))
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": data})
    model = models[0]
    if not hasattr(model, "read_memory"):
        sys.exit(f"{path}: a {type(model).__name__} has no memory to measure; "
                 "give a transformer_recurrent_memory checkpoint")
    task.load_dataset(split)
    dataset = task.dataset(split)
    if not isinstance(dataset, DocumentDataset):
        sys.exit(f"{path}: its task ({type(task).__name__}) has no documents; "
                 "give a checkpoint trained with --task document_translation")
    dataset.check_positions(model.max_positions())
    model.eval().requires_grad_(False).to(device)
    return model, dataset


@contextmanager
def embedding_leaves(model):
    """While open, every embedding lookup of ``model`` becomes a fresh leaf that collects its
    gradient; yields {side: leaf of the latest lookup}, "source" (encoder) and "target" (decoder).
    (Shared embeddings are one module for both sides; the side is that of the running call.)"""
    leaves: Dict[str, torch.Tensor] = {}
    side = [None]

    def entering(name):
        return lambda module, inputs: side.__setitem__(0, name)

    def leaf(module, inputs, output):
        leaves[side[0]] = output.detach().requires_grad_()
        return leaves[side[0]]

    lookups = {id(m): m for m in (model.encoder.embed_tokens, model.decoder.embed_tokens)}
    handles = [model.encoder.register_forward_pre_hook(entering("source")),
               model.decoder.register_forward_pre_hook(entering("target"))]
    handles += [module.register_forward_hook(leaf) for module in lookups.values()]
    try:
        yield leaves
    finally:
        for handle in handles:
            handle.remove()


def sentence_samples(dataset: DocumentDataset, document: Document, device: str) -> List[dict]:
    """The document's sentences, one batch of one sentence each, in order."""
    return [
        utils.move_to_cuda(batch) if device == "cuda" else batch
        for batch in (dataset.pairs.collater([dataset.pairs[document.first + t]]) for t in range(document.length))
    ]


def sentence_step(model, sample: dict, carry):
    """One sentence reading the memory of ``carry``: (its loss, the carry after it)."""
    memory = model.read_memory(carry, 1)
    logits, extra = model(**sample["net_input"], memory=memory)
    lanes = torch.zeros(1, dtype=torch.long, device=logits.device)
    carry = model.carry_after(lanes, memory, extra["encoding"], extra)
    lprobs = model.get_normalized_probs((logits, extra), log_probs=True)
    target = sample["target"]
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return nll.masked_fill(target.eq(model.decoder.padding_idx), 0.0).sum(), carry


def carries_before(model, samples: Sequence[dict]) -> list:
    """The carry each sentence reads (None for the first), from a pass without gradients."""
    carries, carry = [], None
    with torch.no_grad():
        for sample in samples:
            carries.append(carry)
            _, carry = sentence_step(model, sample, carry)
    return carries


def unique_token_attribution(tokens: torch.Tensor, gradient, padding_idx: int) -> float:
    """``G``: per unique token, the norm of the summed gradient of its occurrences; summed.
    ``tokens`` (T,) and ``gradient`` (1, T, C) are one sentence's; None (unused) counts 0."""
    if gradient is None:
        return 0.0
    gradient = gradient.reshape(-1, gradient.size(-1))
    keep = tokens.ne(padding_idx)
    types, which = tokens[keep].unique(return_inverse=True)
    rows = gradient.new_zeros(len(types), gradient.size(-1)).index_add_(0, which, gradient[keep])
    return rows.norm(dim=-1).sum().item()


def document_reach(model, samples: Sequence[dict], max_distance: int):
    """Yield (s, i, {side: G(s, i)}) for every target s and every i with 0 <= s - i < max_distance."""
    carries = carries_before(model, samples)
    tokens = [{"source": sample["net_input"]["src_tokens"][0], "target": sample["net_input"]["prev_output_tokens"][0]}
              for sample in samples]
    pad = model.decoder.padding_idx
    for block in range(0, len(samples), max_distance):
        first = max(0, block - max_distance + 1)
        losses, leaves, carry = {}, {}, carries[first]
        with embedding_leaves(model) as latest:
            for i in range(first, min(len(samples), block + max_distance)):
                losses[i], carry = sentence_step(model, samples[i], carry)
                leaves[i] = dict(latest)
        for s in range(block, min(len(samples), block + max_distance)):
            reach = range(max(first, s - max_distance + 1), s + 1)
            wrt = [leaves[i][side] for i in reach for side in SIDES]
            grads = torch.autograd.grad(losses[s], wrt, retain_graph=True, allow_unused=True)
            for n, i in enumerate(reach):
                yield s, i, {
                    side: unique_token_attribution(tokens[i][side], grads[2 * n + j], pad)
                    for j, side in enumerate(SIDES)
                }


def bucket_table(pairs, bucket: int, max_distance: int) -> List[dict]:
    """Rows (first, last distance, pairs, mean score per side) for the buckets up to max_distance."""
    rows = []
    for start in range(0, max_distance, bucket):
        end = min(start + bucket, max_distance) - 1
        scores = [score for distance, score in pairs if start <= distance <= end]
        rows.append({
            "first": start, "last": end, "pairs": len(scores),
            **{side: sum(s[side] for s in scores) / len(scores) if scores else float("nan") for side in SIDES},
        })
    return rows


def gradient_reach(model, dataset: DocumentDataset, bucket: int, max_distance: int,
                   max_documents=None, device: str = "cpu") -> List[dict]:
    """The bucketed scores over the first ``max_documents`` documents of ``dataset``."""
    documents = dataset.documents[:max_documents]
    pairs = []
    for document in tqdm(documents, desc="documents", file=sys.stderr):
        samples = sentence_samples(dataset, document, device)
        pairs.extend((s - i, scores) for s, i, scores in document_reach(model, samples, max_distance))
    return bucket_table(pairs, bucket, max_distance)


def format_table(rows: List[dict]) -> str:
    lines = [f"{'distance':>9} {'pairs':>8} {'source score':>13} {'target score':>13}"]
    for row in rows:
        span = f"{row['first']}" if row["first"] == row["last"] else f"{row['first']}-{row['last']}"
        lines.append(f"{span:>9} {row['pairs']:>8} {row['source']:>13.4e} {row['target']:>13.4e}")
    return "\n".join(lines)


def plot(rows: List[dict], path: str, title: str):
    measured = [row for row in rows if row["pairs"]]
    x = [(row["first"] + row["last"]) / 2 for row in measured]
    figure, axes = plt.subplots(figsize=(6, 4))
    for side in SIDES:
        axes.plot(x, [row[side] for row in measured], marker="o", label=f"{side} embeddings")
    if all(row[side] > 0 for row in measured for side in SIDES):
        axes.set_yscale("log")
    axes.set_xlabel("distance k = s - i (sentences), bucket centre")
    axes.set_ylabel("mean G(s, i)")
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main(argv=None):
    args = parse_args(argv)
    try:
        model, dataset = load(args.path, args.data, args.split, args.device)
    except InputError as error:  # a file that is not a checkpoint, data that is not documents
        sys.exit(f"error: {error}")
    rows = gradient_reach(model, dataset, args.bucket, args.max_distance, args.max_documents, args.device)
    documents = dataset.documents[:args.max_documents]
    print(f"gradient reach of {args.path} on {args.split}: {len(documents)} documents, "
          f"{sum(d.length for d in documents)} sentences; distances < {args.max_distance} "
          f"in buckets of {args.bucket}; memory carried without truncation")
    print(format_table(rows))
    plot(rows, args.plot, f"gradient reach, {args.split} ({len(documents)} documents)")
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
