"""Document decoding: fairseq's beam search, one sentence step of many documents at a time.

``fairseq-generate`` hands the generator the batches of ``data.py`` in order: batch t holds
sentence t of each document of a group, one lane each. For every batch the generator
1. asks the system (``system.py``) for the context each lane reads, from what the lane carried
   (``carry.py``),
2. runs fairseq's ``SequenceGenerator`` with that context as part of the encoder input (in place of
   the context sentences the batch brings, if it does: ``chosen_context.py``): the system encodes
   the sentence with it (``sentence_encoding.py``), beam search expands and reorders the encoding,
   what the decoder reads included, and the decoder reads it at every step, and
3. once the whole sentence is decoded, asks the system what each lane carries on, given the
   lane's best hypothesis (or, with ``--context-from reference``, its reference translation)
   and what the decoder recorded for that hypothesis while decoding it, if the system records
   anything (``DocumentSystem.hypothesis_records``: taken as each hypothesis ends, since beam
   search drops its row afterwards). Records are not taken with a forced prefix: where the
   prefix ends in eos, fairseq copies the first beam onto the others without telling the
   decoder, so its records would belong to other hypotheses; the system then runs its own pass.
Output is fairseq's own: one list of hypotheses per sentence, under its original id.
fairseq-interactive's batches mix documents that go on and documents that start
(``interactive.py``); their carries are kept by lane in ``OpenDocuments``.
"""
from typing import List

import torch
from fairseq.data import data_utils
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator

from .carry import CarryStore, OpenDocuments
from .chosen_context import without_chosen
from .errors import UnsupportedOptionError
from .option_ranges import OptionError
from .samples import LaneStep, LinesStep, read_sample
from .sentence_encoding import SentenceEncoding
from .system import carry_of_rows, document_system

CONTEXT_FROM = ("hypothesis", "reference")
RECORD = "document_record"  # a finished hypothesis's record, while the generator holds it


class EncodingKeepingModel(EnsembleModel):
    """fairseq's ``EnsembleModel`` around one model, whose steps are the system's: its encoding
    (``SentenceEncoding``) is what beam search holds and reorders, and its decoder reads the
    encoding at every step. It keeps the encoding of the batch being decoded (before beam
    expansion) for what the lanes carry out, and the decoder's incremental state, where the
    system records what its hypotheses need to carry out: fairseq's ``SequenceGenerator`` calls
    these steps itself and returns neither."""

    def __init__(self, models):
        if len(models) != 1:
            raise UnsupportedOptionError(
                f"document_translation decodes with one model, not an ensemble of {len(models)}: "
                "each model would need its own document context"
            )
        super().__init__(models)
        self.encoding = None
        self.incremental_state = None

    def forward_encoder(self, net_input) -> List[SentenceEncoding]:
        encoder_input = {key: value for key, value in net_input.items() if key != "prev_output_tokens"}
        self.encoding = document_system(self.single_model).encode(**encoder_input)
        return [self.encoding]

    def reorder_encoder_out(self, encoder_outs: List[SentenceEncoding], new_order) -> List[SentenceEncoding]:
        return [encoding.reordered(self.single_model.encoder, new_order) for encoding in encoder_outs]

    def forward_decoder(self, tokens, encoder_outs: List[SentenceEncoding], incremental_states,
                        temperature: float = 1.0):
        """The log-probabilities of every row's next token and the decoder's attention to the source
        from that token (None where the decoder gives none), as fairseq's ensemble of one model
        gives them."""
        (encoding,), (self.incremental_state,) = encoder_outs, incremental_states
        state = self.incremental_state if self.has_incremental_states() else None
        features, extra = document_system(self.single_model).decode(tokens, encoding, state)
        last = (features[:, -1:, :].div_(temperature), extra)
        log_probs = self.single_model.get_normalized_probs(last, log_probs=True, sample=None)[:, -1, :]
        attention = extra.get("attn") if isinstance(extra, dict) else extra
        if isinstance(attention, list):
            attention = attention[0] if attention else None
        return log_probs, None if attention is None else attention[:, -1, :]


class DocumentSequenceGenerator(SequenceGenerator):
    def __init__(self, models, tgt_dict, context_from: str = "hypothesis", **kwargs):
        super().__init__(EncodingKeepingModel(models), tgt_dict, **kwargs)
        if context_from not in CONTEXT_FROM:
            raise OptionError(f"--context-from {context_from!r}: give one of {', '.join(CONTEXT_FROM)}")
        self.context_from = context_from
        self.carries = CarryStore()
        self.open_documents = OpenDocuments()
        self.takes_records = False

    def output_room(self, net_input) -> int:
        """The most tokens ``SequenceGenerator`` lets a hypothesis of this batch take."""
        if self.match_source_len:
            return int(net_input["src_lengths"].max())
        return min(int(self.max_len_a * net_input["src_tokens"].size(1) + self.max_len_b), self.max_len - 1)

    @torch.no_grad()
    def generate(self, models, sample, **kwargs):
        """Beam search for one batch of sentences (``samples.py``). The batch says where its rows
        stand in their documents: a ``LaneStep`` (fairseq-generate: step t of a group) or a
        ``LinesStep`` (fairseq-interactive: documents go on across batches in any mix, each row
        saying whether it goes on with one; the documents that have ended lose their carries)."""
        batch = read_sample(sample)
        if not isinstance(batch, (LaneStep, LinesStep)):
            raise OptionError(
                "document decoding needs the batches of the document_translation task "
                "(fairseq-generate on a split with its .docids, fairseq-interactive, or the hub's "
                "translate_document(s))"
            )
        if self.context_from == "reference" and sample.get("target") is None:
            raise OptionError(
                "--context-from reference needs the reference translations: decode a binarized "
                "split that has its target side with fairseq-generate"
            )
        model = self.model.single_model
        system = document_system(model)
        rows = batch.rows if isinstance(batch, LinesStep) else batch.only_pass
        lanes, net_input, continues = rows.lanes, rows.net_input, rows.continues
        if isinstance(batch, LinesStep):
            self.open_documents.close(batch.ended_lanes)
            carry = self.open_documents.carry_of(lanes[continues])
        else:
            carry = self.carries.get(batch.position)
            carry = carry.select(lanes) if carry is not None else None
        carry = carry_of_rows(system, carry, lanes, continues, net_input)
        context = system.sentence_context(carry, net_input, self.output_room(net_input))
        with_context = {**sample, "net_input": {**without_chosen(net_input), **context.inputs}}
        self.takes_records = self.context_from == "hypothesis" and kwargs.get("prefix_tokens") is None
        hypotheses = super().generate(models, with_context, **kwargs)

        encoding = self.model.encoding
        self.model.encoding = self.model.incremental_state = None
        records = [[hypothesis.pop(RECORD, None) for hypothesis in sentence] for sentence in hypotheses]
        decoder_extra = None
        if self.context_from == "reference":
            translations = sample["target"]
        else:
            translations = data_utils.collate_tokens(
                [sentence[0]["tokens"] for sentence in hypotheses], pad_idx=self.pad, eos_idx=self.eos
            )
            if records and records[0][0] is not None:
                decoder_extra = system.decoder_extra_of([sentence[0] for sentence in records])
        carry = system.carry_out(context, lanes, net_input, translations, encoding, decoder_extra)
        if isinstance(batch, LinesStep):
            self.open_documents.keep(carry)
        else:
            self.carries.keep(batch.position, carry)
        return hypotheses

    def finalize_hypos(self, step, bbsz_idx, eos_scores, tokens, scores, finalized, finished, beam_size, *rest):
        """fairseq's, and each hypothesis it keeps gets the system's record of it
        (``hypothesis_records``) under ``RECORD``, which ``generate`` takes out again."""
        arguments = (step, bbsz_idx, eos_scores, tokens, scores, finalized, finished, beam_size, *rest)
        if not self.takes_records:
            return super().finalize_hypos(*arguments)
        system = document_system(self.model.single_model)
        records = system.hypothesis_records(self.model.incremental_state, bbsz_idx)
        if records is None:
            return super().finalize_hypos(*arguments)
        unfinished = [sentence for sentence, done in enumerate(finished) if not done]
        kept = [len(hypotheses) for hypotheses in finalized]
        newly_finished = super().finalize_hypos(*arguments)
        # fairseq 0.12.3's batch rows are the unfinished sentences, in order, beam_size rows each;
        # it keeps a row's hypothesis, in row order, while the row's sentence has room
        for row, record in zip(bbsz_idx.tolist(), records):
            sentence = unfinished[row // beam_size]
            if kept[sentence] < len(finalized[sentence]):
                finalized[sentence][kept[sentence]][RECORD] = record
                kept[sentence] += 1
        return newly_finished
