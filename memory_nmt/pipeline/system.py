"""The one interface between the document pipeline and a system: what a lane carries in and out.

The pipeline (task, criterion, generator, interactive mode, hub, contrastive scoring) walks the
documents sentence step by sentence step, in lanes (``data.py``). At every step, each row's
sentence either starts its document or continues it; the pipeline gives the system one carry of
every row, in row order (``carry_of_rows``): for a row that continues, what its lane carried out
of the document's previous sentence; for a row that starts, what the system says a document
starts from. So no system handles the two kinds of rows apart, and a row translates alike
whichever rows share its batch (fairseq-interactive mixes them; fairseq-generate does not).

A system is a fairseq encoder-decoder model that mixes in ``DocumentSystem`` and keeps
everything about itself in its own package under ``systems/``. The hooks (``SystemHooks``):

- it must implement ``starting_carry`` (what a row starts its document from), ``sentence_context``
  (from every row's carry, the extra keyword inputs of the model's forward pass for this
  sentence: a memory to read, previous sentences to prepend, ...; a system that reads whole
  chunks of its documents finds their source in ``net_input``, ``chunks.py``, and one whose
  context sentences the data chooses finds them there, ``chosen_context.py``) and ``carry_out``
  (once the sentence is done, teacher-forced on the reference in training and decoded in
  generation, what the lanes carry on to their documents' next sentences: a ``Carry``,
  ``carry.py``); a ``SentenceContext`` may also carry a training ``cost`` of the context it made,
  which the criterion adds to the loss;
- it may implement, where the defaults do not fit it: ``context_sentences``,
  ``chunk_sentences``, ``context_choice`` and ``training_unit`` (what its batches hold),
  ``carry_of_previous_sentences`` (if it trains on 'sentences'), ``carries_states`` (if its carry
  holds states a later sentence's loss back-propagates into), ``packs_rows`` (if its
  forward pass takes sentences packed several to a row), and ``hypothesis_records`` with
  ``decoder_extra_of`` (if ``carry_out`` needs the decoder's states of the chosen hypothesis);
- it need not implement, and takes from ``DocumentSystem``: ``forward`` (``encode`` then
  ``decode``), ``encode`` (the context goes to the encoder; a system overrides it where its decoder
  reads some of the context or its encoder records what ``carry_out`` needs: ``SentenceEncoding``,
  ``sentence_encoding.py``), ``decode`` (the decoder reads the encoding), ``build_model`` (the
  document task only) and ``from_pretrained`` (the document hub).

Any other fairseq encoder-decoder model (fairseq's ``transformer``) runs in the pipeline as
``SentenceLevel``: no context in, nothing carried out, every sentence translated alone in the
same batches as the document systems.
"""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from fairseq.models import FairseqEncoderDecoderModel
from torch import Tensor

from .carry import Carry
from .chosen_context import ContextChoice
from .document_task import TranslatesDocuments
from .errors import InputError
from .hub import DocumentHubInterface, check_pretrained_paths
from .sentence_encoding import SentenceEncoding


TRAINING_UNITS = ("lanes", "chunks", "sentences")


class DocumentSystemError(InputError):
    pass


@dataclass
class SentenceContext:
    """What one sentence step reads: ``inputs`` go to the model's forward pass as keyword
    arguments; ``kept`` is whatever the system needs again in ``carry_out``; ``cost``, a scalar
    in training that the criterion adds to the step's loss (in its units: token losses summed),
    is what the system charges for the context it made (a memory's writes, say)."""

    inputs: Dict[str, Any] = field(default_factory=dict)
    kept: Any = None
    cost: Optional[Tensor] = None


class SystemHooks:
    """What the pipeline asks of a system at its sentence steps, with the defaults of the hooks a
    system may leave alone (the module's docstring says which it must implement)."""

    reads_context = True  # False for a model run as ``SentenceLevel`` only
    # Whether its carry holds states that a later sentence's loss back-propagates into (``Carry``'s
    # ``differentiable_states``): training in lanes then takes --gradient-reach, --gradient-across-windows
    # and --max-graph-tokens (``truncation.py``), which a system that carries none is refused.
    carries_states = False
    # Whether its training steps in lanes may hold sentences several to a row (``packing.py``): its
    # ``forward`` then takes ``packed_rows`` (where each sentence lies) and reads and carries each
    # sentence's own context, as in rows of one sentence.
    packs_rows = False

    def starting_carry(self, lanes: Tensor, rows: Tensor, net_input: Dict[str, Tensor]) -> Carry:
        """What rows ``rows`` (indices into the step's batch, whose lanes are ``lanes``) carry in as
        their sentences start their documents: a carry that ``sentence_context`` reads as it reads
        a carried one (an empty history, the initial memory, ...). ``net_input`` is the step's
        whole batch (a chunk's source sentences, for a system that reads them, are there)."""
        raise NotImplementedError

    def sentence_context(self, carry: Carry, net_input: Dict[str, Tensor], target_room: int) -> SentenceContext:
        """The context of one sentence step, from ``carry``: every row's, in row order (its
        ``lanes``), what its lane carried out of the document's previous sentence or, where the
        row starts its document, ``starting_carry``'s. ``target_room`` is the most tokens the
        current translation may take (the reference's width in training, the generator's length
        limit in decoding)."""
        raise NotImplementedError

    def carry_out(
        self,
        context: SentenceContext,
        lanes: Tensor,
        net_input: Dict[str, Tensor],
        target: Tensor,
        encoding: Optional[SentenceEncoding],
        decoder_extra: Optional[Dict[str, Any]] = None,
    ) -> Carry:
        """What ``lanes`` carry on after a sentence that read ``context``: ``target`` is its
        translation as fairseq targets are (right-padded, ending with eos: the reference in
        training, the chosen hypothesis in decoding), ``encoding`` its ``encode``'s and
        ``decoder_extra`` the decoder's extra output of a teacher-forced pass over ``target``
        (training), or its equivalent recorded during beam search (``decoder_extra_of``); None
        when there is neither, and a system that needs it runs that pass itself."""
        raise NotImplementedError

    def carried_gradient(self) -> str:
        """For a system that ``carries_states``: how far back, in training with --gradient-reach
        window, the states it passes on connect a sentence's loss, in words for the training log."""
        return "the states passed on connect it to"

    def context_sentences(self) -> Tuple[int, int]:
        """How many previous (source, target) sentences a sentence's input holds besides its own,
        so that batches stay within --max-tokens (``data.py``)."""
        return 0, 0

    def chunk_sentences(self) -> Optional[int]:
        """For a system that reads the whole source of a chunk of its document, later sentences
        included: the most sentences a chunk holds (``chunks.py``). None: no chunks."""
        return None

    def context_choice(self) -> Optional[ContextChoice]:
        """For a system whose sentences read source sentences the data chooses for them (its
        document's next ones, random ones of other documents), which (``chosen_context.py``):
        every batch brings them in ``net_input``. None (the default): no such sentences."""
        return None

    def training_unit(self) -> str:
        """What the system's training batches hold, as its paper trains it (``TRAINING_UNITS``):
        'lanes' (the default: documents walked sentence step by sentence step in lanes that
        refill, what a lane carries passed on: ``refilled_lanes.py``), 'chunks' (whole chunks,
        for a system that reads them), or 'sentences' (shuffled sentences, each bringing the
        previous sentences its carry is made of: ``carry_of_previous_sentences``)."""
        return "chunks" if self.chunk_sentences() is not None else "lanes"

    def carry_of_previous_sentences(
        self, lanes: Tensor, previous: List[Tuple[Tuple[Tensor, ...], Tuple[Tensor, ...]]]
    ) -> Carry:
        """For a system that trains on 'sentences': the carry of rows ``lanes`` whose documents'
        previous sentences are ``previous`` (per row: source and target sentences, oldest
        first, as many as ``context_sentences()`` gives, fewer at a document's start)."""
        raise NotImplementedError

    def hypothesis_records(self, incremental_state, rows: Tensor) -> Optional[List[Any]]:
        """Decoding: what the decoder recorded during beam search for the hypotheses that end at
        the beam rows ``rows`` (one record each, taken when they end), or None (the default)
        when it records nothing."""
        return None

    def decoder_extra_of(self, records: List[Any]) -> Dict[str, Any]:
        """The ``decoder_extra`` of ``carry_out`` from the records (``hypothesis_records``) of
        each row's chosen hypothesis: what a teacher-forced pass over them would have given."""
        raise NotImplementedError


class DocumentSystem(SystemHooks):
    """Mixed into a fairseq encoder-decoder model that translates documents in lanes."""

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        **context,
    ):
        """fairseq's encoder-decoder pass over one sentence of each lane, with its context.

        It is ``TransformerModelBase.forward``'s pass, written out because that one gives the
        encoder the source only and the decoder the encoder's output only: here the sentence's
        context (``SentenceContext.inputs``) goes to ``encode``, and the decoder reads what the
        encoding gives it (``decode``); ``extra["encoding"]`` keeps the encoding for ``carry_out``."""
        encoding = self.encode(src_tokens, src_lengths, return_all_hiddens=return_all_hiddens, **context)
        logits, extra = self.decode(
            prev_output_tokens, encoding, features_only=features_only, alignment_layer=alignment_layer,
            alignment_heads=alignment_heads, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens,
        )
        extra["encoding"] = encoding
        return logits, extra

    def encode(self, src_tokens, src_lengths, return_all_hiddens: bool = False, **context) -> SentenceEncoding:
        """One sentence step's encoding: the encoder's output, the sentence's context
        (``SentenceContext.inputs``) its keyword arguments, with nothing besides for the decoder."""
        return SentenceEncoding(
            self.encoder(src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens, **context)
        )

    def decode(self, prev_output_tokens, encoding: SentenceEncoding, incremental_state=None, **options):
        """The decoder's forward (``options``: fairseq's keyword arguments of it) over ``encoding``: the
        encoder's output, and the encoding's ``reads`` where it has them (a ``transformer_pass.
        ReadingDecoder`` then)."""
        reads = {} if encoding.reads is None else {"reads": encoding.reads}
        return self.decoder(prev_output_tokens, encoder_out=encoding.encoder_out,
                            incremental_state=incremental_state, **options, **reads)

    @classmethod
    def build_model(cls, args, task):
        """fairseq's model, in the document task only: any other task would translate every
        sentence without its context, and say nothing (fairseq-generate --task translation)."""
        if not isinstance(task, TranslatesDocuments):
            raise DocumentSystemError(
                f"{cls.__name__} translates documents: use --task document_translation, with the "
                f"split's .docids (--task {getattr(task.cfg, '_name', None) or 'translation'} would "
                "translate every sentence without its context)"
            )
        return super().build_model(args, task)

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """fairseq's hub loading, returning a ``DocumentHubInterface`` (``hub.py``):
        ``translate_document(sentences)`` and ``translate_documents(documents)``."""
        check_pretrained_paths(model_name_or_path, data_name_or_path)
        plain = super().from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
        return DocumentHubInterface(plain.cfg, plain.task, plain.models)


class SentenceLevel(SystemHooks):
    """A fairseq model without document context, run as a system: each sentence alone. Its
    ``encode`` and ``decode`` are fairseq's encoder's and decoder's forward (the document generator's
    steps, ``generator.py``); it trains through the model's own forward."""

    reads_context = False
    packs_rows = True  # where its attention can be confined to each sentence (``packed_attention.py``)

    def __init__(self, model):
        self.model = model

    def encode(self, src_tokens, src_lengths, **net_input) -> SentenceEncoding:
        return SentenceEncoding(self.model.encoder(src_tokens, src_lengths=src_lengths, **net_input))

    def decode(self, prev_output_tokens, encoding: SentenceEncoding, incremental_state=None, **options):
        """The decoder's forward; an incremental state only where there is one (a decoder that is not
        incremental takes none)."""
        if incremental_state is not None:
            options["incremental_state"] = incremental_state
        return self.model.decoder(prev_output_tokens, encoder_out=encoding.encoder_out, **options)

    def starting_carry(self, lanes, rows, net_input) -> Carry:
        return Carry(lanes)

    def sentence_context(self, carry, net_input, target_room) -> SentenceContext:
        return SentenceContext()

    def carry_out(self, context, lanes, net_input, target, encoding, decoder_extra=None) -> Carry:
        return Carry(lanes)

    def training_unit(self) -> str:
        return "sentences"

    def carry_of_previous_sentences(self, lanes, previous) -> Carry:
        return Carry(lanes)


def carry_of_rows(
    system: SystemHooks,
    carry: Optional[Carry],
    lanes: Tensor,
    continues: Optional[Tensor],
    net_input: Dict[str, Tensor],
) -> Carry:
    """What every row of a step reads its context from, in row order: ``carry`` holds the rows
    that continue their documents (every row where ``continues`` is None; None: no row does),
    ``continues`` (B,) marks them; the other rows get the system's ``starting_carry``."""
    if carry is None:
        return system.starting_carry(lanes, torch.arange(lanes.numel(), device=lanes.device), net_input)
    if continues is None or bool(continues.all()):
        return carry
    continuing, starting = continues.nonzero().squeeze(1), (~continues).nonzero().squeeze(1)
    if carry.lanes.numel() != continuing.numel():
        raise ValueError(
            f"the carry holds {carry.lanes.numel()} rows, but {continuing.numel()} rows continue their documents"
        )
    stacked = carry.stacked(system.starting_carry(lanes[starting], starting, net_input))
    return stacked.rows(torch.cat([continuing, starting]).argsort())


def unwrapped(model):
    """The model inside fairseq's data-parallel wrappers (each holds the next in ``module``)."""
    while not isinstance(model, FairseqEncoderDecoderModel) and hasattr(model, "module"):
        model = model.module
    return model


def document_system(model):
    """The system of ``model``: itself for a ``DocumentSystem``, else a ``SentenceLevel`` one.
    fairseq's data-parallel wrappers are looked through; forward passes still go through the
    wrapper."""
    model = unwrapped(model)
    if isinstance(model, DocumentSystem):
        return model
    if isinstance(model, FairseqEncoderDecoderModel):
        return SentenceLevel(model)
    raise DocumentSystemError(
        f"{model.__class__.__name__} is not an encoder-decoder model; the document_translation "
        "task translates with encoder-decoder models (see docs/systems.md)"
    )
