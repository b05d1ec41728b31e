"""Which trained models use each of the plugin's training options, declared beside the option, and the refusal of one a model would ignore.

An option that shapes training only in some regimes (``regime.py``) says so in its dataclass
field's metadata (the task's, the criterion's): ``field(default=..., metadata={"help": ...,
"used": "lanes"})``, one of ``USES``:

- ``"lanes"``: training in lanes (``--optimization-window``, ``--lane-rows``, ``--passes-per-step``);
- ``"states"``: training in lanes a system whose carry holds states that a later sentence's loss
  back-propagates into (``SystemHooks.carries_states``: the recurrent memory model's memory and
  sentence states; ``--gradient-reach``, ``--gradient-across-windows``, ``--max-graph-tokens``);
- ``"unchunked"``: a system that does not read whole chunks (``--training-batches``: one that
  does trains on its whole chunks either way).

When fairseq-train trains a model, ``check_used`` refuses a value other than the option's
default given for a model that does not use it, on one line naming the option, what the model
trains on and what to do: fairseq would take it and train exactly as without it.
"""
from dataclasses import fields

from .option_ranges import OptionError, flag_of

USES = ("lanes", "states", "unchunked")


def check_used(values, config_class, regime):
    """Refuse the options of ``values`` (a config of ``config_class``) that differ from their defaults
    where the model trained in ``regime`` does not use them."""
    for option in fields(config_class):
        use = option.metadata.get("used")
        if use is None or str(getattr(values, option.name)) == str(option.default) or used(use, regime):
            continue
        raise OptionError(f"{flag_of(option.name)} {getattr(values, option.name)}: {unused_because(use, regime)}; "
                          f"leave {flag_of(option.name)} out")


def used(use: str, regime) -> bool:
    """Whether a model trained in ``regime`` uses an option of ``use`` (one of ``USES``)."""
    if use == "unchunked":
        return regime.chunk_sentences is None
    return regime.unit == "lanes" and (use == "lanes" or regime.carries_states)


def unused_because(use: str, regime) -> str:
    trained = f"this model trains on {regime.training.describe()}"
    if use == "unchunked":
        return f"{trained}, in lanes too"
    if regime.unit != "lanes":
        lanes = "" if regime.unit == "chunks" else " (--training-batches lanes trains it in lanes)"
        return f"only training in lanes uses it, and {trained}{lanes}"
    return ("only a system whose carry holds states that a later sentence's loss back-propagates into (the "
            "recurrent memory model) uses it, and this model's carries none")
