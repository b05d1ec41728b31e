"""A system's own command-line options, each declared once: a dataclass field with its type, default and help.

fairseq's own models declare their options so (``TransformerConfig``, which ``add_args`` reads into
the parser with fairseq's ``gen_parser_from_dataclass``). A system subclasses ``SystemOptions``
with one field per option, and

- its model's ``add_args`` calls ``add_to(parser)``: every field becomes ``--field-name``, its help
  followed by its default, and a numeric option refuses a value outside the range its field
  declares (``metadata={"range": Range(1)}``, ``pipeline/option_ranges.py``) as the command line
  is parsed;
- its architecture functions call ``apply(args)``, as fairseq's call ``base_architecture``: an
  option not given takes its field's default (a named architecture sets its own before), the
  ranges are checked again (a checkpoint's options and ``--model-overrides`` do not go through the
  parser; so are fairseq's --encoder-layers and --decoder-layers, which must be 1 or more),
  options whose default follows from others get it (``complete``), and ``check`` refuses
  what depends on several options with an ``OptionError`` that names the option and says what to
  give. fairseq runs the architecture function when it parses the command line and again when it
  builds the model (from a checkpoint too), so a bad value is refused before anything is read or
  trained.
"""
from dataclasses import dataclass, fields

from fairseq.dataclass import FairseqDataclass

from ..pipeline.option_ranges import OptionError, add_with_ranges, check_ranges, flag_of

LAYER_COUNTS = ("encoder_layers", "decoder_layers")  # fairseq's, which it takes at any value


@dataclass
class SystemOptions(FairseqDataclass):
    @classmethod
    def add_to(cls, parser):
        """Declare every option on fairseq's parser, without a parser default (``apply`` sets it)."""
        add_with_ranges(parser, cls(), delete_default=True)

    @classmethod
    def apply(cls, args):
        """Give the options not set in ``args`` their defaults, then check them all."""
        for option in fields(cls):
            if not option.name.startswith("_") and getattr(args, option.name, None) is None:
                setattr(args, option.name, option.default)
        check_ranges(args, cls)
        check_layer_counts(args)
        cls.complete(args)
        cls.check(args)

    @classmethod
    def complete(cls, args):
        """Set the options whose default follows from other options (none unless overridden)."""

    @classmethod
    def check(cls, args):
        """Refuse, with an ``OptionError`` naming the option, what depends on several options."""

    def _get_help(self, attribute_name):
        """The field's help, followed by its default where it has a value of its own."""
        help = super()._get_help(attribute_name)
        default = self._get_default(attribute_name)
        return help if default is None or isinstance(default, bool) else f"{help} (default: {default})"


def check_layer_counts(args):
    """Refuse an encoder or decoder of no layers, which fairseq builds without a word: every
    system reads its context in its layers (and its options count them)."""
    for name in LAYER_COUNTS:
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise OptionError(f"{flag_of(name)} {value}: give 1 or more (a document system reads its context "
                              "in its layers)")
