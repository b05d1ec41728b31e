"""Update and Output Attention maps of one document (paper Figures 6 and 7).

Loads a trained ``transformer_recurrent_memory`` checkpoint, runs sentences 1..T+1 of one
document of a split through it with the memory carried as in training (teacher forcing: the
decoder reads the reference targets; ``memory_nmt/evaluation/memory_attention.py``), and draws,
for one memory layer (the top one of --side unless --layer names another):

- the Update Attention that writes sentence T into the memory: each memory slot's attention
  over the tokens of sentence T (``RecurrentMemory.write(..., need_weights=True)`` on the
  states the layer recorded for sentence T); each slot's row sums to 1 over the tokens;
- the Output Attention of sentence T+1: each token's attention over the memory slots
  (``unit.read_attn`` on the states the layer recorded for sentence T+1, with the memory
  sentence T+1 read as keys and values); each token's row sums to 1 over the slots.

Weights are averaged over heads. Tokens are dictionary strings (BPE pieces as they are):
the source sentence on the encoder side; on the decoder side (the default, as in the paper)
the decoder's input, ``</s>`` then the reference target, state i having read tokens up to i.
Writes PREFIX-update.png and PREFIX-output.png and prints, per token, the slot it weighs most.

    python examples/learn_to_remember/memory_attention_maps.py --path checkpoint.pt --data data-bin \
        --split test --document DOCID --sentence T --plot-prefix out/maps [--side decoder] [--layer decoder.5]
"""
import argparse
import logging
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from memory_nmt.evaluation.memory_attention import (  # noqa: E402
    AttentionMapError,
    load_model,
    teacher_forced_carries,
)
from memory_nmt.pipeline.data import DocumentDataError, DocumentDataset  # noqa: E402
from memory_nmt_tools.paths import check_paths  # noqa: E402

SIDES = ("decoder", "encoder")


def choose_layer(model, side, layer):
    """The memory layer to draw: ``layer`` if given, else the top memory layer of ``side``."""
    names = list(model.memory_units())
    if layer is not None:
        if layer not in names:
            raise AttentionMapError(f"--layer {layer}: the model's memory layers are {', '.join(names)}")
        return layer
    on_side = sorted((n for n in names if n.startswith(f"{side}.")), key=lambda n: int(n.split(".")[1]))
    if not on_side:
        raise AttentionMapError(
            f"the model has no memory layer on the {side} side (its memory layers: "
            f"{', '.join(names)}); choose --side accordingly"
        )
    return on_side[-1]


def document_sentences(task, split, docid, sentence):
    """Dataset indices of sentences 1..sentence+1 of document ``docid``."""
    task.load_dataset(split)
    dataset = task.dataset(split)
    if not isinstance(dataset, DocumentDataset):
        raise AttentionMapError(
            f"the checkpoint's task reads {split} as single sentences; pass a checkpoint trained "
            "with --task document_translation"
        )
    documents = {document.doc_id: document for document in dataset.documents}
    if docid not in documents:
        shown = ", ".join(list(documents)[:5])
        raise AttentionMapError(
            f"document {docid!r} is not in {dataset.docids_path} ({len(documents)} documents, "
            f"e.g. {shown}); pass one of its document ids"
        )
    document = documents[docid]
    if not 1 <= sentence < document.length:
        raise AttentionMapError(
            f"document {docid!r} of {dataset.docids_path} has {document.length} sentences; "
            f"--sentence {sentence} needs sentences {sentence} and {sentence + 1}: give "
            f"1 <= T <= {document.length - 1}"
        )
    return dataset, list(range(document.first, document.first + sentence + 1))


def sentence_tokens(task, sample, side):
    """The dictionary strings of the tokens whose states ``side`` records for the memory."""
    if side == "encoder":
        return [task.source_dictionary[t] for t in sample["net_input"]["src_tokens"][0].tolist()]
    return [task.target_dictionary[t] for t in sample["net_input"]["prev_output_tokens"][0].tolist()]


def attention_maps(model, task, split, docid, sentence, side="decoder", layer=None):
    """Update Attention of sentence ``sentence`` (slots x tokens) and Output Attention of the
    next sentence (tokens x slots) in memory layer ``layer``, with their tokens."""
    name = choose_layer(model, side, layer)
    side = name.split(".")[0]
    dataset, indices = document_sentences(task, split, docid, sentence)
    (written_sample, written), (reading_sample, reading) = teacher_forced_carries(model, dataset, indices)[-2:]
    unit = model.memory_units()[name]
    with torch.no_grad():
        new_memory, update = unit.write(
            written.memory[name], written.states[name], written.padding_mask[name], need_weights=True
        )
        output = unit.read_weights(reading.states[name], reading.memory[name])
    return {
        "layer": name,
        "update": update[0],
        "update_tokens": sentence_tokens(task, written_sample, side),
        "output": output[0],
        "output_tokens": sentence_tokens(task, reading_sample, side),
        "written_memory": new_memory,
        "read_memory": reading.memory[name],
    }


def heat_map(weights, row_labels, column_labels, title, xlabel, ylabel, path):
    height, width = weights.shape
    figure, axes = plt.subplots(figsize=(max(5, 0.35 * width + 2), max(3.5, 0.3 * height + 2)))
    image = axes.imshow(weights.numpy(), aspect="auto", cmap="viridis", vmin=0)
    axes.set_xticks(range(width), column_labels, rotation=90)
    axes.set_yticks(range(height), row_labels)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize="medium")
    figure.colorbar(image, ax=axes)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def argmax_lines(title, tokens, weights_by_token):
    """One line per token: the slot it weighs most (1-based) and that weight."""
    lines = [title, f"{'token':>4} {'text':<20} {'slot':>4} {'weight':>6}"]
    for position, (token, weights) in enumerate(zip(tokens, weights_by_token), 1):
        slot = int(weights.argmax())
        lines.append(f"{position:>4} {token:<20} {slot + 1:>4} {float(weights[slot]):>6.3f}")
    return "\n".join(lines)


def draw(maps, docid, sentence, prefix):
    """Both heat maps; returns their paths. Slots are numbered from 1, as in the paper."""
    slots = [str(slot + 1) for slot in range(maps["update"].size(0))]
    where = f"\n{maps['layer']}, document {docid}"
    paths = (Path(f"{prefix}-update.png"), Path(f"{prefix}-output.png"))
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    heat_map(maps["update"], slots, maps["update_tokens"],
             f"Update Attention, sentence {sentence}{where}",
             f"tokens of sentence {sentence}", "memory slot", paths[0])
    heat_map(maps["output"], maps["output_tokens"], slots,
             f"Output Attention, sentence {sentence + 1}{where}",
             "memory slot", f"tokens of sentence {sentence + 1}", paths[1])
    return paths


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, help="transformer_recurrent_memory checkpoint")
    parser.add_argument("--data", required=True, help="binarized data directory (with docids)")
    parser.add_argument("--split", default="test", help="split holding the document (default: test)")
    parser.add_argument("--document", required=True, help="document id, as in the split's docids file")
    parser.add_argument("--sentence", type=int, required=True,
                        help="T: draw sentence T's Update and sentence T+1's Output Attention (1-based)")
    parser.add_argument("--side", choices=SIDES, default="decoder",
                        help="the memory layer's side, decoder (target tokens, default) or encoder")
    parser.add_argument("--layer", help="memory layer name, e.g. decoder.5 (default: the top one of --side)")
    parser.add_argument("--plot-prefix", required=True,
                        help="writes PREFIX-update.png and PREFIX-output.png (creates PREFIX's folder)")
    args = parser.parse_args(argv)
    check_paths(parser, inputs=[("--path", args.path, "file", "a transformer_recurrent_memory checkpoint"), ("--data", args.data, "directory", "the binarized data directory (fairseq-preprocess's --destdir, with the split's .docids)")],
                plots=[("--plot-prefix", f"{args.plot_prefix}-{name}.png") for name in ("update", "output")],
                workdirs=[("--plot-prefix", Path(args.plot_prefix).parent)])
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # importing fairseq leaves it at DEBUG
    try:
        model, task = load_model(args.path, args.data)
        maps = attention_maps(model, task, args.split, args.document, args.sentence, args.side, args.layer)
    except (AttentionMapError, DocumentDataError, OSError) as error:
        sys.exit(f"error: {error}")
    T = args.sentence
    print(argmax_lines(f"Update Attention, sentence {T} ({maps['layer']}): slot per token",
                       maps["update_tokens"], maps["update"].t()))
    print(argmax_lines(f"Output Attention, sentence {T + 1} ({maps['layer']}): slot per token",
                       maps["output_tokens"], maps["output"]))
    for path in draw(maps, args.document, T, args.plot_prefix):
        print(f"plot: {path}")
    return maps


if __name__ == "__main__":
    main()
