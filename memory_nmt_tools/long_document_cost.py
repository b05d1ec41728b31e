"""Peak memory and time per sentence of decoding one long document, as fairseq-generate decodes a split.

``compare_systems`` runs it in a fresh process for every system and document length
(``benchmarks/peak_memory.py``), with the system's fairseq-generate command line::

    python -m memory_nmt_tools.long_document_cost LENGTH DATA --user-dir ... --path CHECKPOINT ...

The document is the split's (``--gen-subset``) source sentences in corpus order, repeated as
needed up to LENGTH, decoded after a two-sentence warm-up document; the peak is measured from
before the warm-up, the time over the document alone. Prints the figures as JSON.
"""
import ast
import sys
import time

import torch
from fairseq import checkpoint_utils, options, tasks, utils
from fairseq.data import LanguagePairDataset
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from memory_nmt.pipeline.data import Document, DocumentDataset

from .benchmarks.peak_memory import peak_since, print_figures, start_peak


def load_for_decoding(generate_command):
    """(cfg, task, model) of the system that fairseq-generate loads with ``generate_command`` (its
    data directory and options)."""
    given = options.parse_args_and_arch(options.get_generation_parser(), generate_command)
    cfg = convert_namespace_to_omegaconf(given)
    utils.import_user_module(cfg.common)
    task = tasks.setup_task(cfg.task)
    overrides = ast.literal_eval(cfg.common_eval.model_overrides)
    (model,), _ = checkpoint_utils.load_model_ensemble([cfg.common_eval.path], arg_overrides=overrides, task=task)
    return cfg, task, model


def document_to_decode(sentences, length, split_sentences, stream):
    """A dataset of one document, ``stream``: the first ``length`` of ``sentences``, which end with
    the split's own, ``split_sentences`` of them. Only the document is decoded; a system that reads
    random sentences of other documents (``--context-choice random``) draws them from the split's,
    as when it translates the split (a dataset of one document has none to draw from)."""

    class OneDocument(DocumentDataset):
        def choosing(self, choice, seed, epoch):
            split = Document("(the split's sentences)", length, split_sentences)
            with_split = DocumentDataset(self.pairs, [*self.documents, split], self.stream, self.docids_path)
            chosen = with_split.choosing(choice, seed, epoch).chosen
            return DocumentDataset(self.pairs, self.documents, self.stream, self.docids_path, chosen)

    return OneDocument(sentences, [Document(stream, 0, length)], stream, "(repeated source sentences)")


def measure(length, generate_command):
    """Print the peak memory and seconds per sentence of decoding one document of ``length``
    sentences as fairseq-generate decodes with ``generate_command``, after a two-sentence warm-up
    document."""
    cfg, task, model = load_for_decoding(generate_command)
    device = "cuda" if torch.cuda.is_available() and not cfg.common.cpu else "cpu"
    model = model.half() if cfg.common.fp16 else model
    model.eval().to(device)
    generator = task.build_generator([model], cfg.generation)
    subset = cfg.dataset.gen_subset
    task.load_dataset(subset)
    sources = task.dataset(subset).pairs.src
    split_sentences = [sources[i] for i in range(len(sources))]  # read before the peak is measured
    max_positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())

    def decode(length, stream):
        sentences = [sources[i % len(sources)] for i in range(length)] + split_sentences
        pairs = LanguagePairDataset(sentences, [s.numel() for s in sentences], task.source_dictionary)
        dataset = document_to_decode(pairs, length, len(split_sentences), stream)
        batches = task.get_batch_iterator(
            dataset, max_tokens=cfg.dataset.max_tokens, max_sentences=cfg.dataset.batch_size,
            max_positions=max_positions,
        ).next_epoch_itr(shuffle=False)
        for sample in batches:
            task.inference_step(generator, [model], utils.move_to_cuda(sample) if device == "cuda" else sample)

    before = start_peak(device)
    decode(2, "warm-up")
    start = time.perf_counter()
    decode(length, "document")
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print_figures({"peak_bytes": peak_since(device, before), "seconds_per_sentence": seconds / length})


def main(argv=None):
    length, *generate_command = sys.argv[1:] if argv is None else argv
    measure(int(length), generate_command)


if __name__ == "__main__":
    main()
