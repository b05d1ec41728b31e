"""The ``transformer_recurrent_memory`` model: fairseq's transformer with a recurrent memory.

Encoder and decoder are fairseq's, with the layers chosen by ``--memory-layers`` (default: the
top one) on the sides chosen by ``--memory-sides`` (default: both) replaced by memory layers
(``layers.py``). The model itself holds no document state: a forward pass takes the memory each
memory layer reads (``memory``: name -> ``(memory_size, B, C)``) and returns, in the decoder's
``extra``, the states it recorded, from which its owner builds the next ``MemoryCarry``
(``carry.py``). Without ``memory``, every sentence reads the initial memory, as a document's
first sentence does. As a document system (``pipeline/system.py``), a sentence's context is the
memory its lane's carry writes, and what a lane carries out is that memory and the sentence's
states; in decoding, those states are the chosen hypothesis's, recorded during beam search
(``layers.py``; with ``--context-from reference``, from one teacher-forced decoder pass over the
reference).

The model's ``encode`` gives the decoder the memory its layers read (``MemoryRead``, in the
``SentenceEncoding``, ``pipeline/sentence_encoding.py``) and the carry the states the encoder
recorded; the document generator hands the decoder that read at every beam step, and beam
reordering moves an index of memory rows, not the memory (``MemoryRead.reordered``).

A checkpoint of fairseq's plain ``transformer`` loads into this model, post-norm or pre-norm
(mBART's and NLLB's layers: the memory then reads the normalised residual stream, ``layers.py``):
the memory parameters it lacks keep their fresh initialisation (logged,
``pipeline/checkpoint_fit.py``), and since the Output Attention starts at zero the model then
computes exactly what the transformer computed.
"""
import copy
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
    base_architecture,
)
import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from ...pipeline.checkpoint_fit import FitsTransformerCheckpoints
from ...pipeline.option_ranges import OptionError, Range, flag_of
from ...pipeline.packed_attention import Confinement
from ...pipeline.packing import PackedRows
from ...pipeline.sentence_encoding import SentenceEncoding
from ...pipeline.system import DocumentSystem, SentenceContext
from ...pipeline.teacher_forcing import teacher_forcing_input
from ...pipeline.transformer_pass import ReadingDecoder, decoder_features, encoder_features
from ...pipeline.truncation import WINDOW
from ..options import SystemOptions
from ..sizes import small_transformer
from .carry import MemoryCarry
from .layers import MemoryDecoderLayer, MemoryEncoderLayer, MemoryRead
from .memory import MEMORY_UPDATES, NEW_SLOT_UPDATES, RecurrentMemory

MEMORY_SIDES = ("both", "encoder", "decoder")
MEMORY_GRADIENTS = ("stopped", "window")  # the paper's detached memory; attached within a training window


def memory_layer_indices(spec: str, num_layers: int) -> List[int]:
    """Parse ``--memory-layers`` ("-1", "4,5", ...) into sorted 0-based layer indices."""
    parts = [part.strip() for part in str(spec).split(",") if part.strip()]
    if not parts or not all(re.fullmatch(r"-?\d+", part) for part in parts) or not all(
        -num_layers <= int(part) < num_layers for part in parts
    ):
        raise OptionError(
            f"--memory-layers {spec!r}: give comma-separated layer indices between "
            f"{-num_layers} and {num_layers - 1} (-1 is the top layer)"
        )
    return sorted({int(part) % num_layers for part in parts})


class _MemoryLayersMixin:
    """Shared by encoder and decoder: which layers carry memory, and their initial memory."""

    def replace_memory_layers(self, side: str, build_layer, cfg):
        self.memory_layer_names: List[str] = []
        if cfg.memory_sides not in ("both", side):
            return
        for index in memory_layer_indices(cfg.memory_layers, len(self.layers)):
            name = f"{side}.{index}"
            self.layers[index] = build_layer(name)
            self.memory_layer_names.append(name)

    def memory_layers(self):
        return [layer for layer in self.layers if isinstance(layer, (MemoryEncoderLayer, MemoryDecoderLayer))]

    def memory_units(self) -> Dict[str, RecurrentMemory]:
        return {layer.memory_name: layer.memory for layer in self.memory_layers()}

    def memory_to_read(self, memory: Optional[Dict[str, Tensor]], lanes: int) -> Dict[str, Tensor]:
        if memory is None:
            return {name: unit.initial(lanes) for name, unit in self.memory_units().items()}
        return memory

    def recorded_by_name(self, records: List[Optional[Tensor]]) -> Dict[str, Tensor]:
        """The states each memory layer recorded, from the pass's records of every layer (None from
        the layers without memory)."""
        return {layer.memory_name: record for layer, record in zip(self.layers, records) if record is not None}


def without_fairseqs_checkpointing(cfg):
    """``cfg`` for fairseq to build the layers with: without --checkpoint-activations, which this
    model's passes do (``pipeline/transformer_pass.py``: each layer's call, with its memory and masks,
    is recomputed in the backward pass)."""
    cfg = copy.copy(cfg)
    cfg.checkpoint_activations = False
    return cfg


class RecurrentMemoryTransformerEncoder(_MemoryLayersMixin, TransformerEncoderBase):
    def __init__(self, cfg, dictionary, embed_tokens):
        super().__init__(without_fairseqs_checkpointing(cfg), dictionary, embed_tokens)
        self.replace_memory_layers(
            "encoder", lambda name: MemoryEncoderLayer(cfg, name, cfg.memory_size), cfg
        )
        self.recomputes_layers = cfg.checkpoint_activations

    def forward(
        self,
        src_tokens,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        memory: Optional[Dict[str, Tensor]] = None,
        packed_rows: Optional[PackedRows] = None,
    ) -> Tuple[Dict[str, List[Tensor]], Dict[str, Tensor]]:
        """fairseq's encoder output, reading ``memory`` (all layers' memory, both sides; None: the
        initial memory; one memory a sentence, of the sentences ``packed_rows`` lays out several to
        a row where given, ``pipeline/packing.py``), and the states each memory layer recorded for
        the memory update."""
        sentences = packed_rows.sentences if packed_rows is not None else src_tokens.size(0)
        reads = MemoryRead(self.memory_to_read(memory, sentences), packed_rows=packed_rows, side="source")
        encoder_out, records = encoder_features(
            self, src_tokens, token_embeddings, return_all_hiddens, reads=reads, recompute=self.recomputes_layers,
            confinement=None if packed_rows is None else Confinement(packed_rows),
        )
        return encoder_out, self.recorded_by_name(records)


class RecurrentMemoryTransformerDecoder(_MemoryLayersMixin, ReadingDecoder, TransformerDecoderBase):
    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        super().__init__(
            without_fairseqs_checkpointing(cfg), dictionary, embed_tokens,
            no_encoder_attn=no_encoder_attn, output_projection=output_projection,
        )
        self.replace_memory_layers(
            "decoder",
            lambda name: MemoryDecoderLayer(cfg, name, cfg.memory_size, no_encoder_attn),
            cfg,
        )
        self.recomputes_layers = cfg.checkpoint_activations

    def extract_features(
        self,
        prev_output_tokens,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state=None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        reads: Optional[MemoryRead] = None,
    ):
        """fairseq's decoder features, the memory layers reading ``reads`` (the model's ``encode``
        gives it; None: the initial memory).

        On whole sentences (no ``incremental_state``) ``extra`` gains ``memory_states`` and
        ``memory_padding_mask``: the decoder's recorded states, for the memory update.
        """
        if reads is None:
            reads = MemoryRead(self.memory_to_read(None, prev_output_tokens.size(0)), side="target")
        packed_rows = reads.packed_rows
        new = prev_output_tokens.size(1) if incremental_state is None else 1
        features, extra, records = decoder_features(
            self, prev_output_tokens, new, encoder_out, incremental_state, reads=reads,
            full_context_alignment=full_context_alignment, alignment_layer=alignment_layer,
            alignment_heads=alignment_heads, recompute=self.recomputes_layers,
            confinement=None if packed_rows is None else Confinement(packed_rows),
        )
        if incremental_state is None:
            padding_mask = prev_output_tokens.eq(self.padding_idx)
            extra["memory_states"] = self.recorded_by_name(records)
            extra["memory_padding_mask"] = {name: padding_mask for name in extra["memory_states"]}
        return features, extra

    def recorded_states(self, incremental_state, rows: Tensor) -> Dict[str, Tensor]:
        """During beam search: each memory layer's states of the steps decoded so far
        (steps x len(rows) x C) of the hypotheses now at beam rows ``rows``."""
        return {layer.memory_name: layer.recorded_states(incremental_state, rows) for layer in self.memory_layers()}


@register_model("transformer_recurrent_memory")
class RecurrentMemoryTransformerModel(DocumentSystem, FitsTransformerCheckpoints, TransformerModel):
    """Transformer with a recurrent memory in chosen layers (Feng et al., 2022)."""

    carries_states = True  # the memory and the sentence's states a later sentence's loss reaches
    packs_rows = True
    num_updates = 0  # the updates trained so far, set by the task before each update (``set_num_updates``)

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        RecurrentMemoryOptions.add_to(parser)

    @classmethod
    def build_model(cls, args, task):
        recurrent_memory_base(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return RecurrentMemoryTransformerEncoder(
            TransformerConfig.from_namespace(args), src_dict, embed_tokens
        )

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return RecurrentMemoryTransformerDecoder(
            cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention
        )

    def encode(self, src_tokens, src_lengths, return_all_hiddens: bool = False,
               token_embeddings: Optional[Tensor] = None, memory: Optional[Dict[str, Tensor]] = None,
               packed_rows: Optional[PackedRows] = None) -> SentenceEncoding:
        """The encoder's output with ``memory`` read (None: the initial memory), the decoder's read of
        the same memory, and the states the encoder's memory layers recorded."""
        encoder_out, states = self.encoder(src_tokens, src_lengths, return_all_hiddens, token_embeddings,
                                           memory=memory, packed_rows=packed_rows)
        sentences = packed_rows.sentences if packed_rows is not None else src_tokens.size(0)
        reads = MemoryRead(self.decoder.memory_to_read(memory, sentences), packed_rows=packed_rows, side="target")
        return SentenceEncoding(encoder_out, reads, states)

    def set_num_updates(self, num_updates):
        super().set_num_updates(num_updates)
        self.num_updates = num_updates

    def memory_units(self) -> Dict[str, RecurrentMemory]:
        return {**self.encoder.memory_units(), **self.decoder.memory_units()}

    def read_memory(self, carry: Optional[MemoryCarry], lanes: int) -> Dict[str, Tensor]:
        """The memory a sentence reads: its carry's memory with the previous sentence's states
        written into it (Update Attention); a row with no sentence to write starts its document
        and reads the initial memory, as every row does with no carry. (Its carry holds the
        initial memory too, ``starting_carry``; it is taken from the units here so that its
        gradient reaches them by the same sums whichever rows share the batch.)"""
        return self.memory_and_write_shares(carry, lanes)[0]

    def memory_and_write_shares(self, carry: Optional[MemoryCarry], lanes: int) -> Tuple[Dict[str, Tensor], Dict[str, Tensor]]:
        """``read_memory``'s memory, and for each memory layer whose update writes a new slot
        (``MemoryWrite``), the share of it that each row with a previous sentence wrote (one
        value a row that wrote; no layer where no row did)."""
        units = self.memory_units()
        written = carry.rows_with_sentence() if carry is not None else None
        if written is not None and written.numel() == lanes:
            return self.written_memory(carry)
        initial = {name: unit.initial(lanes) for name, unit in units.items()}
        if written is None or not written.numel():
            return initial, {}
        memory = {name: m.clone() for name, m in initial.items()}
        rows_written, shares = self.written_memory(carry.rows(written))
        for name, rows_memory in rows_written.items():
            memory[name][:, written] = rows_memory
        return memory, shares

    def written_memory(self, carry: MemoryCarry) -> Tuple[Dict[str, Tensor], Dict[str, Tensor]]:
        """Each memory of ``carry``, every row of which has a sentence, with that sentence written in,
        and the share of a new slot each row wrote, by memory layer (where the update writes one)."""
        writes = {name: unit.update(carry.memory[name], carry.states[name], carry.padding_mask[name])
                  for name, unit in self.memory_units().items()}
        return ({name: write.memory for name, write in writes.items()},
                {name: write.new_slot_share for name, write in writes.items() if write.new_slot_share is not None})

    def starting_carry(self, lanes, rows, net_input) -> MemoryCarry:
        """The initial memory, with no sentence to write into it."""
        memory = {name: unit.initial(lanes.numel()) for name, unit in self.memory_units().items()}
        return MemoryCarry(
            lanes=lanes,
            memory=memory,
            states={name: m[:0] for name, m in memory.items()},
            padding_mask={name: torch.ones(lanes.numel(), 0, dtype=torch.bool, device=lanes.device) for name in memory},
        )

    def sentence_context(self, carry, net_input, target_room) -> SentenceContext:
        """The memory each row reads (``read_memory``); in training with ``--memory-write-cost``,
        its cost (``write_cost``; 0 until ``--memory-write-cost-from-update`` updates are done)."""
        memory, shares = self.memory_and_write_shares(carry, carry.lanes.numel())
        cost = None
        if self.training and self.args.memory_write_cost:
            cost = self.write_cost(shares, next(iter(memory.values())))
        return SentenceContext(inputs={"memory": memory}, kept=memory, cost=cost)

    def write_cost(self, shares: Dict[str, Tensor], memory: Tensor) -> Tensor:
        """``--memory-write-cost`` times how far the share of a new slot this forward pass's sentences
        wrote into each memory layer is from ``--memory-write-rate`` a sentence, either way; 0 (on
        ``memory``'s device) where none wrote, or until ``--memory-write-cost-from-update`` updates are
        done, so that every training pass logs the cost alike (fairseq sums the logs of several workers
        key by key)."""
        if self.num_updates < self.args.memory_write_cost_from_update:
            return memory.new_zeros(())
        rate = self.args.memory_write_rate
        off = (torch.abs(share.sum() - rate * share.numel()) for share in shares.values())
        return self.args.memory_write_cost * sum(off, memory.new_zeros(()))

    def carry_out(self, context, lanes, net_input, target, encoding, decoder_extra=None) -> MemoryCarry:
        """The memory the sentence read (detached, the paper's rule, unless ``--memory-gradient
        window``) and the states it recorded; without them (decoding from the reference), the
        decoder is run once over ``target`` to record them."""
        if decoder_extra is None:
            _, decoder_extra = self.decode(
                teacher_forcing_input(target, self.decoder.dictionary), encoding, features_only=True
            )
        memory = dict(context.kept) if self.args.memory_gradient == "window" else {
            name: m.detach() for name, m in context.kept.items()}
        return self.carry_after(lanes, memory, encoding, decoder_extra)

    def carried_gradient(self) -> str:
        if self.args.memory_gradient == "window":
            return "its memory connects it to (--memory-gradient window: every one, through the writes between)"
        return (f"{super().carried_gradient()} (memory in the top layers: the previous sentence, and the one "
                "before on the source side only)")

    def hypothesis_records(self, incremental_state, rows: Tensor) -> List[Dict[str, Tensor]]:
        """Each hypothesis's states in every decoder memory layer (steps x C), recorded during
        beam search (``layers.py``): the states a teacher-forced pass over it would record."""
        recorded = self.decoder.recorded_states(incremental_state, rows)
        return [{name: states[:, row] for name, states in recorded.items()} for row in range(rows.numel())]

    def decoder_extra_of(self, records: List[Dict[str, Tensor]]) -> Dict[str, Dict[str, Tensor]]:
        """The chosen hypotheses' recorded states, right-padded to the longest and masked, as
        the decoder's ``extra`` gives them for a batch of whole sentences."""
        states, padding_mask = {}, {}
        for name in self.decoder.memory_units():
            steps = [record[name] for record in records]
            states[name] = pad_sequence(steps)
            lengths = torch.tensor([s.size(0) for s in steps], device=states[name].device)
            padding_mask[name] = torch.arange(states[name].size(0), device=lengths.device)[None] >= lengths[:, None]
        return {"memory_states": states, "memory_padding_mask": padding_mask}

    @staticmethod
    def carry_after(lanes: Tensor, memory: Dict[str, Tensor], encoding: SentenceEncoding, decoder_extra) -> MemoryCarry:
        """What ``lanes`` carry after a sentence that read ``memory``: the states both sides
        recorded (``encoding``'s records and the decoder's ``extra`` of a whole-sentence pass), one
        sentence a row (taken out of packed rows, where they were packed)."""
        encoder_states = encoding.records
        packed = encoding.reads.packed_rows
        if packed is not None:
            states, padding_mask = {}, {}
            for side, recorded in (("source", encoder_states), ("target", decoder_extra["memory_states"])):
                for name, packed_states in recorded.items():
                    states[name], padding_mask[name] = packed.unpack(packed_states, side)
            return MemoryCarry(lanes=lanes, memory=memory, states=states, padding_mask=padding_mask)
        encoder_padding = encoding.encoder_out["encoder_padding_mask"][0]
        return MemoryCarry(
            lanes=lanes,
            memory=memory,
            states={**encoder_states, **decoder_extra["memory_states"]},
            padding_mask={
                **{name: encoder_padding for name in encoder_states},
                **decoder_extra["memory_padding_mask"],
            },
        )


@dataclass
class RecurrentMemoryOptions(SystemOptions):
    memory_size: int = field(
        default=16,
        metadata={"help": "memory vectors (d_M) per memory layer (the paper's sizes go up to 512)",
                  "range": Range(1, 4096)},
    )
    memory_layers: str = field(
        default="-1",
        metadata={"help": "0-based indices of the layers that carry memory, -1 being the top layer"},
    )
    memory_sides: ChoiceEnum(MEMORY_SIDES) = field(
        default="both", metadata={"help": "sides whose layers carry memory"}
    )
    memory_update: ChoiceEnum(MEMORY_UPDATES) = field(
        default="attention",
        metadata={"help": "how a sentence is written into the memory: 'attention', the paper's Update Attention, "
                  "which rewrites every slot; 'gated' (not in the paper), the same followed by a learned gate "
                  "per slot and feature that keeps the old value where the sentence does not replace it; "
                  "'competitive' (not in the paper), slots that compete for the sentence's tokens (a softmax over "
                  "the slots and a slot that writes nowhere), each rewritten in the share of a token it receives "
                  "and kept otherwise; 'queue' (not in the paper), one new slot a sentence (a learned query's "
                  "Update Attention over it) pushed in front of the others in the share a learned gate gives it, "
                  "the others moving one place back; 'addressed' (not in the paper), the same new slot written "
                  "into the slots in the shares of a softmax over them and a null option, a slot's score being how "
                  "well its learned key matches the new slot's query less its learned worth of keeping"},
    )
    memory_write_cost: float = field(
        default=0.0,
        metadata={"help": "in training (not in the paper), a cost added to the loss of each forward pass: this many "
                  "times how far the share of a new slot its sentences wrote into each memory layer (--memory-update "
                  "queue: the share a sentence is pushed in; addressed: the shares it is written in) is from "
                  "--memory-write-rate a sentence, either way, summed over the memory layers, in the units of a "
                  "token's loss (at rate 0, every write charged). Default: 0, no cost",
                  "range": Range(0)},
    )
    memory_write_rate: float = field(
        default=0.0,
        metadata={"help": "with --memory-write-cost, the share of a new slot a sentence writes into a memory layer "
                  "on average that costs nothing: a forward pass is charged for how far what its sentences wrote "
                  "is from it, either way, so that the sentences compete for what the memory lets in rather than "
                  "every write closing (0.1: a tenth of the sentences written in whole). Default: 0, every write "
                  "charged",
                  "range": Range(0, 1)},
    )
    memory_write_cost_from_update: int = field(
        default=0,
        metadata={"help": "with --memory-write-cost, charge the cost once this many updates are done (fairseq's "
                  "count of updates, which a resumed run carries on and --reset-optimizer starts again at 0): "
                  "before, the memory trains without the cost, so that the reads learn to use what is written "
                  "before the writes are charged. Default: 0, charged from the first update",
                  "range": Range(0)},
    )
    memory_read_positions: bool = field(
        default=False,
        metadata={"help": "the Output Attention's keys are the memory's slots with sinusoidal slot positions added "
                  "(those the paper's Update Attention adds to its slots' queries; not in the paper, whose read "
                  "sees the slots' contents alone), so that a read can tell slots apart by place: a queue's newer "
                  "slots from its older ones. In decoding the read's keys and values are then projected at every "
                  "step"},
    )
    memory_gradient: ChoiceEnum(MEMORY_GRADIENTS) = field(
        default="stopped",
        metadata={"help": "in training, which later losses train a sentence's write into the memory: 'stopped', "
                  "the paper's (the memory is detached before the next sentence reads it, so a write is trained "
                  "by the next sentence's loss only), or 'window' (not in the paper; with --gradient-reach "
                  "window): the memory stays attached within each --optimization-window, so a write is trained "
                  "by the losses of every later sentence of its window, through the writes between"},
    )

    @classmethod
    def check(cls, args):
        reach = str(getattr(args, "gradient_reach", WINDOW))
        if args.memory_gradient == "window" and reach != WINDOW:
            raise OptionError(
                f"--memory-gradient window with --gradient-reach {reach}: a reach of K sentences back-propagates "
                "each step's graph on its own, which a memory attached from step to step would cross; give "
                "--gradient-reach window (the default), whose window --memory-gradient window spans"
            )
        if args.memory_write_cost and args.memory_update not in NEW_SLOT_UPDATES:
            raise OptionError(
                f"--memory-write-cost {args.memory_write_cost} with --memory-update {args.memory_update}: the cost is "
                f"on the share of a new slot a sentence writes, which --memory-update {' or '.join(NEW_SLOT_UPDATES)} "
                "gives; give one of them, or leave --memory-write-cost out"
            )
        for name, what in (("memory_write_rate", "the rate is where the cost is nothing"),
                           ("memory_write_cost_from_update", "it says when the cost starts")):
            if getattr(args, name) and not args.memory_write_cost:
                flag = flag_of(name)
                raise OptionError(f"{flag} {getattr(args, name)} without --memory-write-cost: {what}; give "
                                  f"--memory-write-cost too, or leave {flag} out")
        for side in ("encoder", "decoder"):
            if args.memory_sides in ("both", side):
                memory_layer_indices(args.memory_layers, getattr(args, f"{side}_layers"))
        for flag, given in (("--cross-self-attention", getattr(args, "cross_self_attention", False)),
                            ("--encoder-layerdrop", getattr(args, "encoder_layerdrop", 0) > 0),
                            ("--decoder-layerdrop", getattr(args, "decoder_layerdrop", 0) > 0)):
            if given:
                raise OptionError(
                    f"transformer_recurrent_memory does not support {flag}: each memory layer reads the memory "
                    "after its own self-attention and records, every sentence, the states the update writes; "
                    f"leave {flag} out"
                )
        if getattr(args, "offload_activations", False):
            raise OptionError(
                "transformer_recurrent_memory does not support --offload-activations (fairseq's reentrant "
                "checkpointing, which refuses --gradient-reach K's gradient hop): give --checkpoint-activations "
                "alone, which recomputes each layer in the backward pass and keeps its inputs where they are"
            )


def recurrent_memory_base(args):
    """transformer-base's defaults, then the memory options' (a value given is kept and checked)."""
    base_architecture(args)
    RecurrentMemoryOptions.apply(args)


@register_model_architecture("transformer_recurrent_memory", "transformer_recurrent_memory")
def transformer_recurrent_memory(args):
    """transformer-base (6+6 layers, 512/2048, 8 heads) with the memory in the top layers."""
    recurrent_memory_base(args)


@register_model_architecture("transformer_recurrent_memory", "transformer_recurrent_memory_small")
def transformer_recurrent_memory_small(args):
    """A small model for CPUs and tests: 2+2 layers, 128/256, 4 heads."""
    small_transformer(args)
    recurrent_memory_base(args)
