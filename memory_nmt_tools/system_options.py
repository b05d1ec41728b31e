"""A system's command-line options, which ``fairseq-train --arch NAME --help`` does not list.

fairseq's parser prints ``--help`` before it adds the options of the ``--arch``, ``--task`` and
``--criterion`` given (it adds them in a second pass), so a model's own options appear in no help
text. This command declares them as fairseq-train would, on a parser of their own, and prints
its help: the architecture's options (a system's and the transformer's), then the task's and the
criterion's; the plugin's options with their defaults and the values they take (fairseq's
transformer options show none: a named architecture such as ``_small`` sets its own).

    python scripts/system_options.py --arch transformer_recurrent_memory
    python scripts/system_options.py --arch transformer_local_global --criterion label_smoothed_cross_entropy
"""
import argparse
import sys


def options_parser(arch: str, task: str, criterion: str) -> argparse.ArgumentParser:
    """A parser holding the options fairseq-train adds for ``arch``, ``task`` and ``criterion``."""
    import memory_nmt  # noqa: F401  (registers the plugin's systems, task and criterion)
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    parser = argparse.ArgumentParser(
        prog=f"fairseq-train DATA --user-dir memory_nmt --task {task} --arch {arch} --criterion {criterion}",
        add_help=False, allow_abbrev=False,
    )
    for kind, name, registry in (("--arch", arch, ARCH_MODEL_REGISTRY), ("--task", task, TASK_REGISTRY),
                                 ("--criterion", criterion, CRITERION_REGISTRY)):
        if name not in registry:
            raise SystemExit(f"system_options.py: error: {kind} {name}: not registered; give one of "
                             f"{', '.join(sorted(registry))}")
        registry[name].add_args(parser.add_argument_group(f"{kind} {name}"))
    return parser


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", required=True, help="the architecture, e.g. transformer_recurrent_memory")
    parser.add_argument("--task", default="document_translation")
    parser.add_argument("--criterion", default="document_label_smoothed_cross_entropy")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    options_parser(args.arch, args.task, args.criterion).print_help(sys.stdout)


if __name__ == "__main__":
    main()
