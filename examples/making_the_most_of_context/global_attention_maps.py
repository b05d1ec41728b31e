"""The global layer's sentence-to-sentence attention over one chunk of a document (paper Figure 4).

Loads a trained ``transformer_local_global`` checkpoint, encodes one chunk of one document of a
split as the model reads it (its sentences through the local layers, then the global layer), and
draws the weight each sentence k of the chunk gives each sentence kappa, the paper's
``alpha_{k kappa} = 1/|x_k| sum_i sum_j alpha^{kappa,j}_{k,i}``: the global layer's attention
weights of sentence k's words on sentence kappa's words, summed over kappa's words, averaged over
k's words and over the heads (the paper does not say how its heads are combined);
``LocalGlobalEncoder.sentence_attention`` computes it. Each row sums to 1. Rows and columns are
numbered by the sentences' places in the document (1-based). Prints the matrix and, per sentence,
the other sentence it weighs most; writes the heat map to --plot.

    python examples/making_the_most_of_context/global_attention_maps.py --path checkpoint.pt \
        --data data-bin --split test --document DOCID [--chunk 1] --plot maps/DOCID.png
"""
import argparse
import logging
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from fairseq import checkpoint_utils  # noqa: E402
from fairseq.data import data_utils  # noqa: E402

from memory_nmt.evaluation.memory_attention import AttentionMapError  # noqa: E402
from memory_nmt.pipeline.checkpoint_files import check_checkpoint_file  # noqa: E402
from memory_nmt.pipeline.chunks import cut_into_chunks  # noqa: E402
from memory_nmt.pipeline.errors import InputError  # noqa: E402
from memory_nmt.systems.local_global.model import LocalGlobalTransformerModel  # noqa: E402
from memory_nmt_tools.paths import check_paths  # noqa: E402


def load_model(path, data):
    """The local+global model (eval mode, CPU) and task of a checkpoint, reading data from ``data``."""
    check_checkpoint_file(str(path))
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task([str(path)], arg_overrides={"data": str(data)})
    if not isinstance(model, LocalGlobalTransformerModel):
        raise AttentionMapError(
            f"{path} holds a {type(model).__name__}, which has no global layer; pass a "
            "transformer_local_global checkpoint"
        )
    return model.eval(), task


def chunk_of(task, split, docid, chunk, chunk_sentences):
    """The dataset indices of chunk ``chunk`` (1-based) of document ``docid``, as the model cuts it."""
    task.load_dataset(split)
    dataset = task.dataset(split)
    documents = {document.doc_id: document for document in dataset.documents}
    if docid not in documents:
        shown = ", ".join(list(documents)[:5])
        raise AttentionMapError(
            f"document {docid!r} is not in {dataset.docids_path} ({len(documents)} documents, e.g. {shown}); "
            "pass one of its document ids"
        )
    chunks = cut_into_chunks([documents[docid]], chunk_sentences)
    if not 1 <= chunk <= len(chunks):
        raise AttentionMapError(
            f"document {docid!r} has {documents[docid].length} sentences, {len(chunks)} chunks of at most "
            f"{chunk_sentences}: give --chunk 1 to {len(chunks)}"
        )
    first = chunks[chunk - 1]
    return dataset, list(range(first.first, first.first + first.length)), first.first - documents[docid].first


def sentence_attention(model, task, split, docid, chunk=1):
    """(weights (N, N), the chunk's sentence numbers in the document, 1-based)."""
    dataset, indices, before = chunk_of(task, split, docid, chunk, model.args.chunk_sentences)
    sources = [dataset.pairs[index]["source"] for index in indices]
    src_tokens = data_utils.collate_tokens(sources, task.source_dictionary.pad(), left_pad=True)
    with torch.no_grad():
        weights = model.encoder.sentence_attention(src_tokens)
    return weights, [before + n + 1 for n in range(len(indices))]


def lines(weights, numbers):
    """The matrix, a row per sentence, and the other sentence each weighs most."""
    out = ["sentence " + "".join(f"{n:>7}" for n in numbers) + "   most weighed other sentence"]
    for row, number in zip(weights, numbers):
        others = [(float(w), n) for w, n in zip(row, numbers) if n != number]
        most = f"{max(others)[1]:>5} ({max(others)[0]:.3f})" if others else "    -"
        out.append(f"{number:>8} " + "".join(f"{float(w):7.3f}" for w in row) + f"   {most}")
    return "\n".join(out)


def draw(weights, numbers, docid, path):
    figure, axes = plt.subplots(figsize=(max(4, 0.4 * len(numbers) + 2), max(3.5, 0.4 * len(numbers) + 1.5)))
    image = axes.imshow(weights.numpy(), cmap="viridis", vmin=0)
    labels = [str(n) for n in numbers]
    axes.set_xticks(range(len(numbers)), labels)
    axes.set_yticks(range(len(numbers)), labels)
    axes.set_xlabel("sentence attended to (kappa)")
    axes.set_ylabel("sentence attending (k)")
    axes.set_title(f"global layer's sentence attention, document {docid}", fontsize="medium")
    figure.colorbar(image, ax=axes)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, help="transformer_local_global checkpoint")
    parser.add_argument("--data", required=True, help="binarized data directory (with docids)")
    parser.add_argument("--split", default="test", help="split holding the document (default: test)")
    parser.add_argument("--document", required=True, help="document id, as in the split's docids file")
    parser.add_argument("--chunk", type=int, default=1,
                        help="which chunk of the document, 1-based, as the model cuts it (default: 1)")
    parser.add_argument("--plot", required=True, help="the heat map's image file (its folder must exist)")
    args = parser.parse_args(argv)
    check_paths(parser, inputs=[("--path", args.path, "file", "a transformer_local_global checkpoint"),
                                ("--data", args.data, "directory",
                                 "the binarized data directory (with the split's .docids)")],
                plots=[("--plot", args.plot)])
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # importing fairseq leaves it at DEBUG
    try:
        model, task = load_model(args.path, args.data)
        weights, numbers = sentence_attention(model, task, args.split, args.document, args.chunk)
    except (InputError, OSError) as error:  # the checkpoint, the data, the document or chunk asked for
        sys.exit(f"error: {error}")
    print(lines(weights, numbers))
    draw(weights, numbers, args.document, args.plot)
    print(f"plot: {args.plot}")
    return weights


if __name__ == "__main__":
    main()
