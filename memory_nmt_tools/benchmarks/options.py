"""What both benchmarks' command lines refuse, in the plugin's own words: a value out of range is
refused while it is parsed, as fairseq-train refuses the plugin's options
(``benchmark_decoding.py: error: argument --beam: 0: give 1 or more``;
``memory_nmt/pipeline/option_ranges.py``), and an option the plugin declares keeps the range it
declares there; and the precisions they measure in (``add_precision``)."""
import argparse

import torch

from memory_nmt.pipeline.option_ranges import Range, ranges_of, refusing_outside


def at_least(low: int):
    """argparse's type for a whole number of ``low`` or more."""
    return refusing_outside(int, Range(low))


def as_declared(config_class, name: str):
    """argparse's type for the plugin's whole-number option ``name``: refused outside the range its
    field of ``config_class`` declares."""
    return refusing_outside(int, dict(ranges_of(config_class))[name])


def comma_separated(convert):
    """argparse's type for a comma-separated list, each item read by ``convert`` (an argparse type:
    an item it refuses is named, ``argument --lengths: 0: give 1 or more``)."""

    def convert_each(text):
        items = text.split(",")
        if not all(item.strip() for item in items):
            raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated values, none of them empty")
        return [convert(item) for item in items]

    convert_each.__name__ = f"comma-separated {convert.__name__}"  # argparse's "invalid ... value"
    return convert_each


def refuse_missing_cuda(parser, device: str):
    """Refuse ``--device cuda`` where torch finds no CUDA device."""
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch finds no CUDA device here; give --device cpu")


def add_precision(parser, amp_bf16_help: str):
    """One of --fp16 (float16, cuda only) and --amp-bf16 (bfloat16 under torch.autocast, cuda or cpu)."""
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--fp16", action="store_true", help="float16, as fairseq's --fp16 (cuda only)")
    precision.add_argument("--amp-bf16", action="store_true", help=amp_bf16_help)


def check_precision(parser, args):
    """Refuse --fp16 without --device cuda."""
    if args.fp16 and args.device != "cuda":
        parser.error("--fp16 needs --device cuda")


def precision_name(args) -> str:
    """The precision the command line measures in, for the header of its table."""
    return "fp16" if args.fp16 else "bfloat16 autocast" if args.amp_bf16 else "fp32"
