"""Document decoding: fairseq's beam search, one sentence step of many documents at a time.

``fairseq-generate`` hands the generator the batches of ``data.py`` in order: batch t holds
sentence t of each document of a group, one lane each. For every batch the generator
1. computes the memory each lane reads, from its ``MemoryCarry`` (``carry.py``),
2. runs fairseq's ``SequenceGenerator`` with that memory as part of the encoder input, so the
   memory is the same at every beam step of the sentence and is expanded and reordered with
   the beams like the rest of the encoder output, and
3. once the whole sentence is decoded, runs the decoder once over each lane's best hypothesis
   (teacher-forced) to record the states that the next sentence's memory update writes.
Output is fairseq's own: one list of hypotheses per sentence, under its original id.
fairseq-interactive's batches mix documents that go on and documents that start
(``interactive.py``); their carries are kept by lane in ``OpenDocuments``.
"""
import torch
from fairseq.data import data_utils
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator

from .carry import CarryStore, OpenDocuments


class EncoderOutputKeepingModel(EnsembleModel):
    """fairseq's ``EnsembleModel`` around one model, keeping the encoder output of the batch
    being decoded (before beam expansion) for the pass over the chosen hypotheses."""

    def __init__(self, models):
        if len(models) != 1:
            raise NotImplementedError(
                f"document_translation decodes with one model, not an ensemble of {len(models)}: "
                "each model would need its own memory"
            )
        super().__init__(models)
        self.encoder_outs = None

    def forward_encoder(self, net_input):
        self.encoder_outs = super().forward_encoder(net_input)
        return self.encoder_outs


class DocumentSequenceGenerator(SequenceGenerator):
    def __init__(self, models, tgt_dict, **kwargs):
        super().__init__(EncoderOutputKeepingModel(models), tgt_dict, **kwargs)
        self.carries = CarryStore()
        self.open_documents = OpenDocuments()

    @torch.no_grad()
    def generate(self, models, sample, **kwargs):
        """Beam search for one batch of sentences. The batch says where its rows stand in their
        documents: ``position`` (fairseq-generate: step t of a group) or, per row,
        ``continues`` (fairseq-interactive: documents go on across batches in any mix)."""
        if "position" not in sample and "continues" not in sample:
            raise ValueError(
                "document decoding needs the batches of the document_translation task "
                "(fairseq-generate on a split with its .docids, or fairseq-interactive)"
            )
        model = self.model.single_model
        lanes = sample["lanes"]
        if "continues" in sample:
            memory = self.open_documents.memory_for(model, lanes, sample["continues"])
        else:
            carry = self.carries.get(sample["position"])
            memory = model.read_memory(carry.select(lanes) if carry is not None else None, lanes.numel())
        with_memory = {**sample, "net_input": {**sample["net_input"], "memory": memory}}
        hypotheses = super().generate(models, with_memory, **kwargs)

        (encoder_out,) = self.model.encoder_outs
        self.model.encoder_outs = None
        chosen = data_utils.collate_tokens(
            [sentence[0]["tokens"] for sentence in hypotheses],
            pad_idx=self.pad,
            eos_idx=self.eos,
            move_eos_to_beginning=True,
        )
        _, decoder_extra = model.decoder(chosen, encoder_out=encoder_out, features_only=True)
        carry = model.carry_after(lanes, memory, encoder_out, decoder_extra)
        if "continues" in sample:
            self.open_documents.keep(carry)
        else:
            self.carries.keep(sample["position"], carry)
        return hypotheses
