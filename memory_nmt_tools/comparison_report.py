"""What ``compare_systems`` prints and writes of its figures: a table with a row per system (and,
with contrastive items, one of their CXMI by distance) under a legend (``tables``), every figure
as JSON (``write_json``), and a plot of them (``plot``). A figure not measured (yet) shows as '-',
one that cannot be measured as n/a, the legend saying why (``UNMEASURED``).
"""
import json
import logging
import os

logging.getLogger("matplotlib").setLevel(logging.WARNING)  # importing fairseq leaves the root logger at DEBUG
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .benchmarks.peak_memory import MiB  # noqa: E402
from .context_usage import shown_bits  # noqa: E402
from .contrastive_eval import distance_order  # noqa: E402

CONTRASTIVE_CXMI = "; on the items: the correct candidate, context sentences dropped"
UNMEASURED = {"cxmi": "CXMI on the split", "contrastive": "contrastive scores"}  # comparison_steps.not_measurable's reasons


def shown(value, form):
    """A figure, or '-' for one not measured (yet)."""
    return "-" if value is None else format(value, form)


def cxmi_cell(figures):
    if "cxmi" in figures["not_measured"]:
        return "n/a"
    return shown_bits(figures["cxmi"]["bits_per_token"]) if figures.get("cxmi") else "-"


def contrastive_keys(results, figure, args):
    """"all" (with ``--contrastive``, even if no system could be scored) and the distances of ``figure``."""
    keys = {key for r in results.values() for key in (r.get(figure) or {})} | ({"all"} if args.contrastive else set())
    keys = sorted(keys, key=distance_order)
    return keys[-1:] + keys[:-1]


def table_rows(results, args):
    """The columns (title, width, alignment) of ``table`` and the cells of each system's row."""
    distances, lengths = contrastive_keys(results, "contrastive", args), args.lengths
    columns = [("system", 12, "<"), ("s-BLEU", 7, ">"), ("d-BLEU", 7, ">"), ("CXMI", 7, ">")]
    columns += [("ctx " + key if key == "all" else f"d={key}", 7, ">") for key in distances]
    columns += [("sent/s", 8, ">")] + [(f"MiB@{n}", 9, ">") for n in lengths] + [(f"ms/sent@{lengths[-1]}", 14, ">")]
    rows = []
    for name, r in results.items():
        cells = [name, f"{r['s_bleu']:.2f}", f"{r['d_bleu']:.2f}", cxmi_cell(r)]
        accuracy, skipped = r.get("contrastive") or {}, "contrastive" in r["not_measured"]
        for key in distances:
            right, total = accuracy.get(key, (0, 0))
            cells.append("n/a" if skipped else f"{100 * right / total:.1f}" if total else "-")
        cells.append(f"{r['sentences_per_second']:.1f}")
        measured = r.get("long_documents", {})
        cells += [shown(measured[n]["peak_bytes"] / MiB if n in measured else None, ".1f") for n in lengths]
        longest = measured.get(lengths[-1])
        cells.append(shown(1000 * longest["seconds_per_sentence"] if longest else None, ".1f"))
        rows.append(cells)
    return columns, rows


def contrastive_cxmi_rows(results, args):
    """The columns of ``contrastive_cxmi_table`` and the cells of each system's row."""
    keys = contrastive_keys(results, "contrastive_cxmi", args)
    columns = [("system", 12, "<")] + [("CXMI " + key if key == "all" else f"d={key}", 9, ">") for key in keys]
    rows = []
    for name, r in results.items():
        cxmi = r.get("contrastive_cxmi") or {}
        skipped = "contrastive" in r["not_measured"]
        rows.append([name] + ["n/a" if skipped else shown_bits(cxmi[key]["bits_per_token"]) if key in cxmi else "-"
                              for key in keys])
    return columns, rows


def formatted(columns, rows):
    lines = [" ".join(f"{title:{align}{width}}" for title, width, align in columns)]
    lines.append("-" * len(lines[0]))
    lines += [" ".join(f"{cell:{align}{width}}" for cell, (_, width, align) in zip(cells, columns)) for cells in rows]
    return "\n".join(lines)


def table(results, args):
    """One row per system: BLEU, CXMI, contrastive accuracy, speed and peak memory; '-' where a
    figure is not measured (a run stopped by an error), n/a where it cannot be (the legend says why)."""
    return formatted(*table_rows(results, args))


def contrastive_cxmi_table(results, args):
    """One row per system: the contrastive items' CXMI overall and by distance (bits per token)."""
    return formatted(*contrastive_cxmi_rows(results, args))


def unmeasured_cells(results, args) -> bool:
    """Whether a system's row of the tables shows '-', a figure not measured."""
    rows = table_rows(results, args)[1] + (contrastive_cxmi_rows(results, args)[1] if args.contrastive else [])
    return any("-" in cells[1:] for cells in rows)


def legend(results, args, device):
    first = next(iter(results.values()))
    items = ""
    if args.contrastive:
        scored = [r["contrastive"] for r in results.values() if r.get("contrastive")]
        counted = f"{scored[0]['all'][1]} items of " if scored else ""
        items = (f"; contrastive: {counted}{' '.join(args.contrastive[1:])}, % right "
                 "overall (ctx all) and by antecedent distance (d=N)")
    batch = f"--max-tokens {args.max_tokens}" if args.max_tokens else f"--batch-size {args.batch_size}"
    return (f"{args.gen_subset}: {first['sentences']} sentences in {first['documents']} documents; "
            f"beam {args.beam}, {batch}, {device}{' fp16' if args.fp16 else ''}{items}.\n"
            f"CXMI: cross-entropy on the references without context (every sentence its own document) minus "
            f"with it, bits per token{CONTRASTIVE_CXMI if items else ''}.\n"
            f"sent/s: fairseq-generate's sentences per second; MiB@N: peak memory decoding one N-sentence "
            f"document (fresh process each); ms/sent: time per sentence of the longest.\n"
            + "".join(f"{name}: --model-overrides {overrides!r}\n" for name, overrides in args.overrides.items())
            + "".join(f"{name}: no {UNMEASURED[key]}: {reason}\n"
                      for name, r in results.items() for key, reason in r["not_measured"].items())
            + f"sacrebleu: {first['signature']}")


def tables(results, args, device):
    """The table (and the contrastive items' CXMI table) with their legend."""
    shown_tables = table(results, args)
    if args.contrastive:
        shown_tables += f"\n\n{contrastive_cxmi_table(results, args)}"
    return f"{shown_tables}\n\n{legend(results, args, device)}"


def write_json(args, device, results, complete=False, error=None):
    """Every figure so far to ``--json`` (if given), replaced whole; ``complete`` once every system
    is measured, ``error`` the message of the failure that stopped the comparison."""
    if args.json is None:
        return
    figures = {"device": device, "complete": complete, "systems": results}
    if error is not None:
        figures["error"] = error
    written = args.json.with_name(args.json.name + ".partial")
    written.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    os.replace(written, args.json)


def plot(results, lengths, path):
    names = list(results)
    figure, ((bleu, context, cxmi), (speed, memory, context_cxmi)) = plt.subplots(2, 3, figsize=(16, 8))
    positions = range(len(names))
    bleu.bar([p - 0.2 for p in positions], [results[n]["s_bleu"] for n in names], 0.4, label="s-BLEU")
    bleu.bar([p + 0.2 for p in positions], [results[n]["d_bleu"] for n in names], 0.4, label="d-BLEU")
    bleu.set_xticks(list(positions), names)
    bleu.set_title("BLEU")
    bleu.legend()
    for name in names:
        accuracy = results[name]["contrastive"]
        if accuracy:
            keys = sorted((k for k in accuracy if k != "all"), key=distance_order)
            context.plot([int(k) for k in keys], [100 * accuracy[k][0] / accuracy[k][1] for k in keys],
                         marker="o", label=f"{name} (all {100 * accuracy['all'][0] / accuracy['all'][1]:.1f}%)")
        items = results[name]["contrastive_cxmi"]
        if items:
            keys = sorted((k for k in items if k != "all"), key=distance_order)
            context_cxmi.plot([int(k) for k in keys], [items[k]["bits_per_token"] for k in keys], marker="o",
                              label=f"{name} (all {items['all']['bits_per_token']:.3f})")
    context.set_title("contrastive accuracy by antecedent distance")
    context.set_xlabel("sentences back")
    context.set_ylabel("% right")
    context_cxmi.set_title("CXMI of the correct candidates by antecedent distance")
    context_cxmi.set_xlabel("sentences back")
    context_cxmi.set_ylabel("bits per token")
    if any(results[n]["contrastive"] for n in names):
        context.legend()
        context_cxmi.legend()
    cxmi.bar(list(positions), [results[n]["cxmi"]["bits_per_token"] if results[n]["cxmi"] else float("nan")
                               for n in names])
    cxmi.set_xticks(list(positions), names)
    cxmi.set_title("CXMI on the split (bits per token)")
    speed.bar(list(positions), [results[n]["sentences_per_second"] for n in names])
    speed.set_xticks(list(positions), names)
    speed.set_title("decoding speed (sentences/s)")
    for name in names:
        memory.plot(lengths, [results[name]["long_documents"][n]["peak_bytes"] / MiB for n in lengths], marker="o", label=name)
    memory.set_xscale("log")
    memory.set_ylim(bottom=0)
    memory.set_title("peak memory decoding one document")
    memory.set_xlabel("sentences in the document")
    memory.set_ylabel("MiB")
    memory.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
