"""Memory-size sweep (paper Figure 2): s-BLEU, d-BLEU and information gain against the memory size d_M.

For each size, finetunes a ``transformer_recurrent_memory`` from a sentence-level checkpoint
with fairseq-train (``--finetune-from-model``: the plugin's ``load_state_dict`` gives the
memory parameters their initialisation, everything else comes from the checkpoint), translates
the split with fairseq-generate, scores it with document_bleu.py's ``score_documents``, measures
the information gain of its Update and Output Attention over a random memory's on the split
(``memory_information_gain.py``, mean over the memory layers), and finally prints a table (size,
s-BLEU, d-BLEU, IG of each attention) and plots BLEU and IG against the size.

    python examples/learn_to_remember/memory_size_sweep.py --data data-bin --sentence-checkpoint sent.pt \
        --sizes 4,8,16,32 --workdir sweep --train-args "--lr 5e-4 --max-tokens 4096 ..." \
        [--gen-args "--beam 5 --max-tokens 4096"]

--train-args and --gen-args are passed to fairseq-train and fairseq-generate as they are
(the model's dimensions must be the sentence checkpoint's; --arch transformer_recurrent_memory
and --criterion document_label_smoothed_cross_entropy come first, so --train-args may change
them); the sweep sets the task, the memory size, the save directory and the checkpoint to
finetune from, and refuses them in --train-args / --gen-args. Everything of size N
goes to WORKDIR/size-N/: checkpoints/, train.log, generate.txt (+ .stderr),
information_gain.json (+ .stderr) and scores.json,
each written only once its step succeeded; a size whose scores.json exists is skipped, and a
rerun resumes an interrupted one (fairseq-train continues from checkpoint_last.pt).
"""
import argparse
import json
import shlex
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from memory_nmt_tools.document_bleu import read_docids, score_documents  # noqa: E402
from memory_nmt_tools.experiments import StepError, run_saving_stdout  # noqa: E402
from memory_nmt_tools.generate_texts import read_hypotheses, read_references  # noqa: E402
from memory_nmt_tools.paths import check_paths  # noqa: E402
from memory_nmt_tools.text_files import TextFileError  # noqa: E402

ANALYSES = Path(__file__).resolve().parent  # this folder: the paper's analyses
PLUGIN = ANALYSES.parents[1] / "memory_nmt"
SET_BY_SWEEP = ("--memory-size", "--save-dir", "--finetune-from-model", "--user-dir", "--task",
                "--path", "--gen-subset")
TRAIN_DEFAULTS = ["--arch", "transformer_recurrent_memory",
                  "--criterion", "document_label_smoothed_cross_entropy"]


class SweepError(RuntimeError):
    """An option is wrong or a file the sweep needs is missing; the message says which and what to do."""


def parse_sizes(spec):
    """"4,8,16" -> [4, 8, 16]: distinct positive memory sizes, in increasing order."""
    parts = [part.strip() for part in spec.split(",") if part.strip()]
    if not parts or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise SweepError(f"--sizes {spec!r}: give comma-separated positive memory sizes, e.g. 4,8,16")
    return sorted({int(part) for part in parts})


def passed_args(text, option):
    """``text`` split as a shell would, refusing the options the sweep sets itself."""
    args = shlex.split(text)
    taken = sorted({arg.split("=")[0] for arg in args} & set(SET_BY_SWEEP))
    if taken:
        raise SweepError(f"{option} sets {', '.join(taken)}, which the sweep sets itself; remove it")
    return args


def find_docids(data, split):
    found = sorted(Path(data).glob(f"{split}.*-*.docids"))
    if len(found) != 1:
        raise SweepError(
            f"{data}: expected one {split}.SRC-TGT.docids beside the binarized data, found "
            f"{len(found)}; pass --docids"
        )
    return found[0]


def train(args, size, directory):
    log = directory / "train.log"
    if log.exists():
        print(f"  training: {log} exists, skipped")
        return
    run_saving_stdout(f"training memory size {size}", [
        sys.executable, "-m", "fairseq_cli.train", str(args.data), "--user-dir", str(PLUGIN),
        "--task", "document_translation", *TRAIN_DEFAULTS, *passed_args(args.train_args, "--train-args"),
        "--memory-size", str(size), "--finetune-from-model", str(args.sentence_checkpoint),
        "--save-dir", str(directory / "checkpoints"),
    ], log)


def generate(args, size, directory):
    output = directory / "generate.txt"
    if output.exists():
        print(f"  translating: {output} exists, skipped")
        return output
    checkpoint = directory / "checkpoints" / args.checkpoint_name
    if not checkpoint.exists():
        raise SweepError(
            f"{checkpoint} does not exist after training memory size {size} (see "
            f"{directory / 'train.log'}); pass --checkpoint-name of a checkpoint fairseq-train saves"
        )
    run_saving_stdout(f"translating {args.split} with memory size {size}", [
        sys.executable, "-m", "fairseq_cli.generate", str(args.data), "--user-dir", str(PLUGIN),
        "--task", "document_translation", "--gen-subset", args.split, "--path", str(checkpoint),
        *passed_args(args.gen_args, "--gen-args"),
    ], output)
    return output


def measure_information_gain(args, size, directory):
    output = directory / "information_gain.json"
    if not output.exists():
        run_saving_stdout(f"information gain of memory size {size}", [
            sys.executable, str(ANALYSES / "memory_information_gain.py"), "--path",
            str(directory / "checkpoints" / args.checkpoint_name), "--data", str(args.data),
            "--split", args.split, "--json",
        ], output)
    return json.loads(output.read_text(encoding="utf-8"))


def score(output, docids, hypothesis_lines):
    count = len(docids)
    hypotheses = read_hypotheses(output, count, hypothesis_lines)
    return score_documents(hypotheses, read_references(output, count), docids)


def sweep_size(args, size, docids):
    """The scores of one memory size, from WORKDIR/size-N/scores.json or by running it (a
    scores.json of a sweep older than the information gain gets it added)."""
    directory = args.workdir / f"size-{size}"
    scores_path = directory / "scores.json"
    print(f"memory size {size}:", flush=True)
    if scores_path.exists():
        print(f"  {scores_path} exists, skipped")
        scores = json.loads(scores_path.read_text(encoding="utf-8"))
        if "information_gain" in scores:
            return scores
    else:
        directory.mkdir(parents=True, exist_ok=True)
        train(args, size, directory)
        scores = {"memory_size": size, **score(generate(args, size, directory), docids, args.hypothesis_lines)}
    gain = measure_information_gain(args, size, directory)
    scores["information_gain"] = {"update": gain["update"], "output": gain["output"]}
    scores_path.write_text(json.dumps(scores, indent=1) + "\n", encoding="utf-8")
    return scores


def format_table(results):
    header = f"{'memory size':>11} {'s-BLEU':>7} {'d-BLEU':>7} {'IG update':>10} {'IG output':>10}"
    lines = [header, "-" * len(header)]
    for r in results:
        gain = r["information_gain"]
        lines.append(f"{r['memory_size']:>11} {r['s_bleu']:>7.2f} {r['d_bleu']:>7.2f} "
                     f"{gain['update']:>10.4f} {gain['output']:>10.4f}")
    lines.append("IG: KL(trained || random memory) of the attention rows, nats, mean over the memory layers")
    return "\n".join(lines)


def plot(results, path):
    sizes = [r["memory_size"] for r in results]
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(sizes, [r["s_bleu"] for r in results], marker="o", label="s-BLEU")
    axes.plot(sizes, [r["d_bleu"] for r in results], marker="s", label="d-BLEU")
    axes.set_xscale("log", base=2)
    axes.set_xticks(sizes, [str(size) for size in sizes])
    axes.set_xlabel("memory size (slots)")
    axes.set_ylabel("BLEU")
    gain_axes = axes.twinx()
    gain_axes.plot(sizes, [r["information_gain"]["update"] for r in results], "--", marker="^",
                   color="tab:green", label="IG, Update Attention")
    gain_axes.plot(sizes, [r["information_gain"]["output"] for r in results], "--", marker="v",
                   color="tab:red", label="IG, Output Attention")
    gain_axes.set_ylabel("information gain (nats)")
    handles, labels = axes.get_legend_handles_labels()
    gain_handles, gain_labels = gain_axes.get_legend_handles_labels()
    axes.legend(handles + gain_handles, labels + gain_labels, fontsize="small")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="binarized data directory")
    parser.add_argument("--sentence-checkpoint", type=Path, required=True,
                        help="sentence-level transformer checkpoint to finetune from")
    parser.add_argument("--sizes", default="4,8,16,32", help="memory sizes (default: 4,8,16,32)")
    parser.add_argument("--workdir", type=Path, required=True, help="directory of all runs")
    parser.add_argument("--train-args", default="", help="more fairseq-train options, one string")
    parser.add_argument("--gen-args", default="--beam 5 --max-tokens 4096",
                        help="more fairseq-generate options, one string (default: %(default)s)")
    parser.add_argument("--split", default="test", help="split to translate and score (default: test)")
    parser.add_argument("--docids", type=Path, help="docids of --split (default: DATA/SPLIT.*-*.docids)")
    parser.add_argument("--checkpoint-name", default="checkpoint_best.pt",
                        help="checkpoint of each run to translate with (default: %(default)s)")
    parser.add_argument("--hypothesis-lines", choices=["D", "H"], default="D",
                        help="D: detokenized hypotheses (default); H: the model's tokens")
    parser.add_argument("--plot", type=Path, help="PNG to write, in an existing folder (default: "
                        "WORKDIR/memory_size_sweep.png)")
    args = parser.parse_args(argv)
    args.plot = args.plot or args.workdir / "memory_size_sweep.png"
    check_paths(parser, inputs=[
        ("--data", args.data, "directory", "the binarized data directory (fairseq-preprocess's --destdir)"),
        ("--sentence-checkpoint", args.sentence_checkpoint, "file", "a sentence-level transformer checkpoint"),
        ("--docids", args.docids, "file", "the docids file of --split"),
    ], plots=[("--plot", args.plot)], workdirs=[("--workdir", args.workdir)])
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        sizes = parse_sizes(args.sizes)
        passed_args(args.train_args, "--train-args")
        passed_args(args.gen_args, "--gen-args")
        docids = read_docids(args.docids or find_docids(args.data, args.split))
        results = [sweep_size(args, size, docids) for size in sizes]
    except (SweepError, StepError, TextFileError) as error:
        sys.exit(f"error: {error}")
    print(format_table(results))
    print(f"signature: {results[0]['signature']}")
    plot(results, args.plot)
    print(f"plot: {args.plot}")
    return results


if __name__ == "__main__":
    main()
