"""Contrastive accuracy in context of a document-level model, and of a sentence-level model beside it.

For every test item, the item's preceding source sentences and their reference translations go
through the model first (its context carried as in training: the memory, or the previous
sentences a concatenation model reads), then every candidate translation
of the current sentence is scored (sum of token log-probabilities, end of sentence included);
an item is right when its correct candidate scores strictly best. Items are read by
``memory_nmt.evaluation.contrastive`` from one of these layouts (FILES in this order):

  contrapro      JSON CONTEXT_SRC TEXT_SRC CONTEXT_TGT TEXT_TGT   contrapro.json and the files
                 its json2text_and_context.pl writes (--context-size as given to it, default 1)
  bawden         PREV_SRC CURRENT_SRC PREV_TGT CURRENT_TGT       Bawden et al. 2018: correct and
                 contrastive candidate on consecutive lines
  context-files  CONTEXT_SRC SRC CONTEXT_TGT TGT                 one candidate a line, grouped by
                 --group-size or by equal source and context, correct first
  voita          JSON                                            Voita et al. 2019 consistency set
  voita-lines    SRC DST                                         its scoring_data files (" _eos "
                 joins context and current sentence), grouped like context-files

Prints accuracy overall and by distance (antecedent distance, or Voita's ctx_dist) for the
document-level model (--path, any system of the plugin) and, with --sentence-model, for a
sentence-level fairseq ``transformer`` scored on the same candidates without context, each
labelled by its checkpoint's architecture. ``--json`` prints the same as JSON. Text is fed
to the models as it is in the files unless it is segmented the way scripts/prepare_documents.py
segmented the training data: Moses tokenization (--moses) and/or BPE (--bpe-codes), or a
pretrained checkpoint's sentencepiece model on the raw text (--spm-model, alone). Text already in
subword pieces is refused with those options, which would segment it again; a checkpoint whose
dictionary is a sentencepiece model's is refused without --spm-model unless the text is in
sentencepiece pieces already: it would read raw words as <unk> (``subword_pieces.py`` tells both).

    python scripts/contrastive_eval.py --path checkpoints/memory/checkpoint_best.pt \\
        --data data-bin --sentence-model checkpoints/sentence/checkpoint_best.pt \\
        --format voita deixis_test.json --bpe-codes bpe.codes
"""
import argparse
import json
import sys
from types import SimpleNamespace

import torch
from fairseq import checkpoint_utils
from tqdm import tqdm

import memory_nmt  # noqa: F401  (registers the plugin; lets fairseq load checkpoints)
from memory_nmt.evaluation import contrastive
from memory_nmt.pipeline.checkpoint_files import check_checkpoint_file
from memory_nmt.pipeline.errors import InputError

from .paths import check_paths
from .prepare_documents import apply_bpe, apply_sentencepiece, load_sentencepiece, spm_model_refused_with, tokenize
from .subword_pieces import SEGMENTATIONS, dictionary_segmentation, segmentation_of
from .text_files import TextFileError

FILES = {
    "contrapro": ["JSON", "CONTEXT_SRC", "TEXT_SRC", "CONTEXT_TGT", "TEXT_TGT"],
    "bawden": ["PREV_SRC", "CURRENT_SRC", "PREV_TGT", "CURRENT_TGT"],
    "context-files": ["CONTEXT_SRC", "SRC", "CONTEXT_TGT", "TGT"],
    "voita": ["JSON"],
    "voita-lines": ["SRC", "DST"],
}


def read_items(args):
    files = args.files
    if args.format == "contrapro":
        sizes, distances = contrastive.contrapro_groups(files[0])
        return contrastive.read_context_files(*files[1:], context_size=args.context_size,
                                              group_sizes=sizes, distances=distances)
    if args.format in ("bawden", "context-files"):
        size = 2 if args.format == "bawden" else args.group_size
        return contrastive.read_context_files(*files, context_size=args.context_size, group_size=size)
    if args.format == "voita":
        return contrastive.read_voita_json(files[0])
    return contrastive.read_joined_lines(*files, group_size=args.group_size)


def segmenter(args):
    """How the items' text is segmented, as prepare_documents.py segmented the models' data: a
    function (sentences, language) -> the sentences segmented, or None for the text as it is. The
    sentencepiece model of --spm-model is loaded here, once, before the items are read."""
    if args.spm_model:
        model = load_sentencepiece(args.spm_model)
        return lambda sentences, language: apply_sentencepiece(sentences, model)
    if not args.moses and not args.bpe_codes:
        return None

    def segment(sentences, language):
        if args.moses:
            sentences = tokenize(sentences, language,
                                 SimpleNamespace(moses_no_dash_splits=False, moses_no_escape=False))
        if args.bpe_codes:
            sentences = apply_bpe(sentences, args.bpe_codes)
        return sentences

    return segment


def first_in_pieces(items):
    """(item, segmentation) of the first item with a sentence in subword pieces
    (``subword_pieces.segmentation_of``), or None."""
    for item in items:
        for sentence in (*item.context_source, item.source, *item.context_target, *item.candidates):
            segmentation = segmentation_of(sentence)
            if segmentation:
                return item, segmentation
    return None


def check_unsegmented(items, segment):
    """Items to be segmented by ``segment`` (``segmenter``; None: none) must not be in pieces already."""
    found = first_in_pieces(items) if segment is not None else None
    if found:
        item, segmentation = found
        raise contrastive.ContrastiveDataError(
            f"{item.where}: the item is in {SEGMENTATIONS[segmentation]} pieces already, which --moses, "
            "--bpe-codes and --spm-model would segment again: leave them out, or give the raw text"
        )


def check_model_reads(path, task, items, spm_model):
    """The checkpoint at ``path`` (its task loaded) must read the items as its data was segmented:
    one whose dictionary is a sentencepiece model's is refused without ``spm_model`` unless the
    items are in sentencepiece pieces already."""
    if spm_model:
        return
    if "sentencepiece" not in map(dictionary_segmentation, (task.source_dictionary, task.target_dictionary)):
        return
    found = first_in_pieces(items)
    if found is None or found[1] != "sentencepiece":
        raise contrastive.ContrastiveDataError(
            f"{path}: its dictionary holds sentencepiece pieces but the items are not in them ({items[0].where}), so "
            "it would read their words as <unk>: give --spm-model, the sentencepiece model its data was segmented with"
        )


def preprocessed(items, segment, source_lang, target_lang):
    """The items with their text segmented by ``segment`` (``segmenter``; None: as they are)."""
    if segment is None:
        return items

    def process(sentences, lang):
        unique = sorted(set(sentences))
        return dict(zip(unique, segment(unique, lang)))

    sources = process([s for i in items for s in (*i.context_source, i.source)], source_lang)
    targets = process([t for i in items for t in (*i.context_target, *i.candidates)], target_lang)
    return [item.mapped(sources.__getitem__, targets.__getitem__) for item in items]


def load(path, data, use_cuda, model_overrides=None):
    """The checkpoint's model, its task, and its architecture's name (which labels its results);
    ``model_overrides`` replaces options the checkpoint was trained with, as fairseq's --model-overrides."""
    overrides = {**(model_overrides or {}), **({"data": str(data)} if data else {})}
    check_checkpoint_file(path)
    (model,), cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(path)], arg_overrides=overrides)
    return (model.cuda() if use_cuda else model), task, cfg.model._name


def evaluate(path, data, items, segment, args, use_cuda, model_overrides=None):
    """(architecture, accuracy) of the checkpoint at ``path`` on ``items``, their text segmented
    by ``segment`` (``segmenter``)."""
    model, task, architecture = load(path, data, use_cuda, model_overrides)
    check_model_reads(path, task, items, args.spm_model)
    model_items = preprocessed(items, segment, task.cfg.source_lang, task.cfg.target_lang)
    scores = contrastive.score_items(
        model, task, model_items, max_tokens=args.max_tokens,
        progress=lambda batches: tqdm(batches, desc=f"scoring with {path}", disable=None, file=sys.stderr),
    )
    return architecture, contrastive.accuracy(items, scores)


def distance_order(key):
    """Sorts the keys of ``contrastive.accuracy``: the distances by number, then other keys, "all" last."""
    return (key == "all", int(key) if key.lstrip("-").isdigit() else float("inf"), key)


def table(results):
    """results: model name -> accuracy dict. A column per model, as wide as its name or its
    widest cell and two spaces apart from the one before, its cells right-aligned under the name."""
    keys = sorted({k for accuracy in results.values() for k in accuracy}, key=distance_order)
    columns = {}  # model name -> its cells, by distance
    for name, accuracy in results.items():
        right_total = {key: accuracy.get(key, (0, 0)) for key in keys}
        columns[name] = [f"{100 * r / t:.1f}% ({r}/{t})" if t else "-" for r, t in right_total.values()]
    widths = [max(len(name), *map(len, cells)) + 2 for name, cells in columns.items()]
    first = max(len("distance"), *map(len, keys))
    header = f"{'distance':<{first}}" + "".join(f"{name:>{width}}" for name, width in zip(columns, widths))
    lines = [header, "-" * len(header)]
    for row, key in enumerate(keys):
        lines.append(f"{key:<{first}}" + "".join(
            f"{cells[row]:>{width}}" for cells, width in zip(columns.values(), widths)))
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--path", required=True, help="checkpoint of a document-level model")
    parser.add_argument("--data", help="data-bin directory with its dictionaries (default: the checkpoint's)")
    parser.add_argument("--sentence-model", help="checkpoint of a sentence-level model to score beside it")
    parser.add_argument("--sentence-data", help="the sentence model's data-bin (default: --data)")
    parser.add_argument("--format", required=True, choices=sorted(FILES))
    parser.add_argument("files", nargs="+", metavar="FILE", help="the test set's files, see below")
    parser.add_argument("--context-size", type=int, default=1,
                        help="context lines per candidate line in the context files (default 1)")
    parser.add_argument("--group-size", type=int,
                        help="candidates per item (context-files, voita-lines); default: "
                        "consecutive lines with equal source and context")
    parser.add_argument("--moses", action="store_true",
                        help="Moses-tokenize the text first (sacremoses, fairseq's defaults)")
    parser.add_argument("--bpe-codes", help="apply these subword-nmt BPE codes to the text first")
    parser.add_argument("--spm-model", metavar="MODEL",
                        help="segment the raw text with this sentencepiece model instead, as "
                        "prepare_documents.py --spm-model segmented the models' data (a pretrained "
                        "checkpoint's, e.g. mBART-50's sentence.bpe.model)")
    parser.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per batch")
    parser.add_argument("--cpu", action="store_true", help="do not use a GPU even if there is one")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if len(args.files) != len(FILES[args.format]):
        parser.error(f"--format {args.format} takes {len(FILES[args.format])} files: "
                     + " ".join(FILES[args.format]))
    if args.group_size is not None and args.format not in ("context-files", "voita-lines"):
        parser.error("--group-size applies to --format context-files and voita-lines")
    if args.group_size is not None and args.group_size < 2 or args.context_size < 1:
        parser.error("--group-size must be at least 2 and --context-size at least 1")
    if args.spm_model and (args.moses or args.bpe_codes):
        parser.error(spm_model_refused_with("--moses and --bpe-codes"))
    data = "a data-bin directory with the model's dictionaries"
    check_paths(parser, inputs=[  # before the first model scores every item
        ("--path", args.path, "file", "the document-level model's checkpoint"),
        ("--sentence-model", args.sentence_model, "file", "the sentence-level model's checkpoint"),
        ("--data", args.data, "directory", data), ("--sentence-data", args.sentence_data, "directory", data),
        ("--bpe-codes", args.bpe_codes, "file", "the subword-nmt codes the models' data was segmented with"),
        *((f"--format {args.format} {name}", path, "file", f"the test set's {name} file")
          for name, path in zip(FILES[args.format], args.files)),
    ])
    return args


def main(argv=None):
    args = parse_args(argv)
    use_cuda = torch.cuda.is_available() and not args.cpu
    try:
        segment = segmenter(args)
        items = read_items(args)
        if not items:
            raise contrastive.ContrastiveDataError(f"{args.files[0]}: no test items")
        check_unsegmented(items, segment)
        architecture, accuracy = evaluate(args.path, args.data, items, segment, args, use_cuda)
        results = {architecture: accuracy}
        if args.sentence_model:
            architecture, accuracy = evaluate(
                args.sentence_model, args.sentence_data or args.data, items, segment, args, use_cuda
            )
            results[f"{architecture} (--sentence-model)" if architecture in results else architecture] = accuracy
    except (InputError, TextFileError) as error:
        sys.exit(f"error: {error}")
    if args.json:
        print(json.dumps({
            name: {key: {"right": r, "total": t, "accuracy": r / t} for key, (r, t) in accuracy.items()}
            for name, accuracy in results.items()
        }, indent=2, sort_keys=True))
    else:
        print(f"{len(items)} items ({args.format}: {' '.join(args.files)}); an item is right when "
              "its correct candidate has the highest summed log-probability")
        print(table(results))


if __name__ == "__main__":
    main()
