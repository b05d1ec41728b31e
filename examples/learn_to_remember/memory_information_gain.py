"""Information gain of a trained memory's attention over a random memory's (paper Figure 2).

The paper compares memory sizes by the information gain (IG) "between the random initialized
memory and well trained memory", from the attention maps of the Update and the Output Attention,
without a formula. Here, for a trained ``transformer_recurrent_memory`` checkpoint:

- the random memory is the same model with every memory unit initialised afresh (``--seed``),
  as finetuning from a sentence-level checkpoint starts it (``memory_size_sweep.py`` trains so);
  everything else is the trained model's;
- each of the two models walks every document of --split sentence by sentence, teacher forced,
  its own memory carried (``memory_nmt/evaluation/memory_attention.py``'s walk);
- Update Attention: each slot's attention over the tokens of every sentence that a later
  sentence reads (all but a document's last); Output Attention: each token's attention over the
  slots, for every sentence after a document's first; both averaged over heads;
- IG of a row = KL(trained || random) = sum_j p_j log(p_j / q_j), in nats: how far training moved
  that attention from where a random memory puts it (0 where they agree). Printed per memory
  layer: the mean over the rows, and how many rows; ``--json`` prints the same as one object,
  with "update" and "output", the means over the layers (what the sweep tabulates per size).

    python examples/learn_to_remember/memory_information_gain.py --path checkpoint.pt --data data-bin \\
        --split test [--max-documents 100] [--seed 1] [--json]
"""
import argparse
import copy
import json
import logging
import sys

import torch
import torch.nn.functional as F

from memory_nmt.evaluation.memory_attention import AttentionMapError, load_model, teacher_forced_carries
from memory_nmt.pipeline.data import DocumentDataError, DocumentDataset
from memory_nmt_tools.paths import check_paths


def with_random_memory(model, task, seed):
    """A copy of ``model`` whose memory units are as a freshly built model's (seeded)."""
    torch.manual_seed(seed)
    fresh_units = task.build_model(model.args).memory_units()
    random = copy.deepcopy(model)
    for name, unit in random.memory_units().items():
        unit.load_state_dict(fresh_units[name].state_dict())
    return random.eval()


def attention_rows(model, carries):
    """{layer: (Update Attention rows, Output Attention rows)} of one document's walk: each
    slot over the tokens of sentences 1..n-1, each token of sentences 2..n over the slots."""
    rows = {}
    with torch.no_grad():
        for name, unit in model.memory_units().items():
            update, output = [], []
            for t, (_, carry) in enumerate(carries):
                if t + 1 < len(carries):
                    _, weights = unit.write(
                        carry.memory[name], carry.states[name], carry.padding_mask[name], need_weights=True
                    )
                    update.append(weights[0])
                if t > 0:
                    output.append(unit.read_weights(carry.states[name], carry.memory[name])[0])
            rows[name] = (update, output)
    return rows


def kl_rows(trained, random):
    """KL(trained || random) of each row (distributions over the last axis)."""
    return F.kl_div(random.log(), trained, reduction="none").sum(-1)


def information_gain(model, task, split, seed=1, max_documents=None):
    """{"layers": {layer: {"update", "update_rows", "output", "output_rows"}}, "update",
    "output" (means over the layers), "documents", "sentences"} for ``split``."""
    task.load_dataset(split)
    dataset = task.dataset(split)
    if not isinstance(dataset, DocumentDataset):
        raise AttentionMapError(
            f"the checkpoint's task reads {split} as single sentences; pass a checkpoint trained "
            "with --task document_translation"
        )
    random = with_random_memory(model, task, seed)
    documents = dataset.documents[:max_documents]
    totals = {name: {"update": [0.0, 0], "output": [0.0, 0]} for name in model.memory_units()}
    for document in documents:
        indices = list(range(document.first, document.first + document.length))
        trained_rows = attention_rows(model, teacher_forced_carries(model, dataset, indices))
        random_rows = attention_rows(random, teacher_forced_carries(random, dataset, indices))
        for name, kinds in trained_rows.items():
            for kind, trained, untrained in zip(("update", "output"), kinds, random_rows[name]):
                for p, q in zip(trained, untrained):
                    divergences = kl_rows(p, q)
                    totals[name][kind][0] += float(divergences.sum())
                    totals[name][kind][1] += divergences.numel()
    if not any(rows for layer in totals.values() for _, rows in layer.values()):
        raise AttentionMapError(f"no document of {dataset.docids_path} has two sentences: nothing reads a memory")
    layers = {}
    for name, layer in totals.items():
        (update, update_rows), (output, output_rows) = layer["update"], layer["output"]
        layers[name] = {"update": update / update_rows, "update_rows": update_rows,
                        "output": output / output_rows, "output_rows": output_rows}
    return {
        "layers": layers,
        "update": sum(layer["update"] for layer in layers.values()) / len(layers),
        "output": sum(layer["output"] for layer in layers.values()) / len(layers),
        "documents": len(documents),
        "sentences": sum(document.length for document in documents),
    }


def format_table(gain, split):
    lines = [
        f"information gain of the trained memory over a random one, {split}: {gain['documents']} "
        f"documents, {gain['sentences']} sentences (KL(trained || random) per attention row, nats)",
        f"  {'layer':<12}{'Update Attention':>18}{'rows':>9}{'Output Attention':>18}{'rows':>9}",
    ]
    for name, layer in gain["layers"].items():
        lines.append(f"  {name:<12}{layer['update']:>18.4f}{layer['update_rows']:>9}"
                     f"{layer['output']:>18.4f}{layer['output_rows']:>9}")
    lines.append(f"  {'mean':<12}{gain['update']:>18.4f}{'':>9}{gain['output']:>18.4f}")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, help="transformer_recurrent_memory checkpoint")
    parser.add_argument("--data", required=True, help="binarized data directory (with docids)")
    parser.add_argument("--split", default="test", help="split whose documents are walked (default: test)")
    parser.add_argument("--max-documents", type=int, help="only the split's first N documents")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random memory (default: 1)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    check_paths(parser, inputs=[("--path", args.path, "file", "a transformer_recurrent_memory checkpoint"), ("--data", args.data, "directory", "the binarized data directory (fairseq-preprocess's --destdir, with the split's .docids)")])
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)  # importing fairseq leaves it at DEBUG
    try:
        model, task = load_model(args.path, args.data)
        gain = information_gain(model, task, args.split, args.seed, args.max_documents)
    except (AttentionMapError, DocumentDataError, OSError) as error:
        sys.exit(f"error: {error}")
    print(json.dumps(gain) if args.json else format_table(gain, args.split))
    return gain


if __name__ == "__main__":
    main()
