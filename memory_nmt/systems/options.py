"""A system's own command-line options, each declared once: a dataclass field with its type, default and help.

fairseq's own models declare their options so (``TransformerConfig``, which ``add_args`` reads into
the parser with fairseq's ``gen_parser_from_dataclass``). A system subclasses ``SystemOptions``
with one field per option, and

- its model's ``add_args`` calls ``add_to(parser)``: every field becomes ``--field-name``, its help
  followed by its default;
- its architecture functions call ``apply(args)``, as fairseq's call ``base_architecture``: an
  option not given takes its field's default (a named architecture sets its own before), options
  whose default follows from others get it (``complete``), and ``check`` refuses a value the system
  cannot use with a message that names the option and says what to give. fairseq runs the
  architecture function when it parses the command line and again when it builds the model (from
  a checkpoint too), so a bad value is refused before anything is read or trained.
"""
from dataclasses import dataclass, fields

from fairseq.dataclass import FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass


@dataclass
class SystemOptions(FairseqDataclass):
    @classmethod
    def add_to(cls, parser):
        """Declare every option on fairseq's parser, without a parser default (``apply`` sets it)."""
        gen_parser_from_dataclass(parser, cls(), delete_default=True)

    @classmethod
    def apply(cls, args):
        """Give the options not set in ``args`` their defaults, then ``check`` them all."""
        for option in fields(cls):
            if not option.name.startswith("_") and getattr(args, option.name, None) is None:
                setattr(args, option.name, option.default)
        cls.complete(args)
        cls.check(args)

    @classmethod
    def complete(cls, args):
        """Set the options whose default follows from other options (none unless overridden)."""

    @classmethod
    def check(cls, args):
        """Refuse, with a ``ValueError`` naming the option, a value the system cannot use."""

    def _get_help(self, attribute_name):
        """The field's help, followed by its default where it has a value of its own."""
        help = super()._get_help(attribute_name)
        default = self._get_default(attribute_name)
        return help if default is None or isinstance(default, bool) else f"{help} (default: {default})"
