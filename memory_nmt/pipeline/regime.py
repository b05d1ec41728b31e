"""A built model's batching regime: which planner each split's batches come from, chosen once from what its system declares.

``DocumentTranslationTask.build_model`` asks the model's system (``system.py``) what it reads
and how its papers train it, and keeps the answer as a ``Regime``; ``get_batch_iterator`` then
asks the regime for a planner (``planners.py``) and nothing else about the model:

- the training split of the model fairseq-train trains, by the system's ``training_unit()``
  ('sentences' trains in lanes with ``--training-batches lanes``):

  ======================  ==========================================================
  'lanes'                 ``RefilledLanes`` (``refilled_lanes.py``), sentences packed
                          several to a row where the system and the model allow it
  'chunks'                ``WholeChunks`` (``planners.py``)
  'sentences'             ``ShuffledSentences`` (``sentence_batches.py``)
  ======================  ==========================================================

- every other split, and every split of a model loaded to translate or score:
  ``DocumentLanes``, one sentence step an item.

Each planner's steps are sized by what the system reads besides a sentence (its previous
sentences, cut to the model's positions; its chunks); the regime also holds the context
sentences the data chooses for it (``chosen_context.py``), which every split's batches bring.
"""
from dataclasses import dataclass
from typing import Optional

from .chosen_context import ContextChoice
from .data import parse_window
from .packed_attention import why_not_confinable
from .planners import DocumentLanes, WholeChunks
from .refilled_lanes import RefilledLanes
from .sentence_batches import ShuffledSentences
from .system import SentenceLevel


@dataclass(frozen=True)
class Regime:
    training: object  # the training split's planner
    stepping: DocumentLanes  # every other split's, and every split's of a loaded model
    context_choice: Optional[ContextChoice] = None
    carries_states: bool = False  # the system's ``carries_states``: training back-propagates through its carry

    @property
    def chunk_sentences(self) -> Optional[int]:
        """The most sentences of a chunk, for a system that reads whole chunks; else None."""
        return self.stepping.chunk_sentences

    @property
    def unit(self) -> str:
        """What a training batch holds, as ``system.py``'s ``TRAINING_UNITS`` name it."""
        return {RefilledLanes: "lanes", WholeChunks: "chunks", ShuffledSentences: "sentences"}[type(self.training)]

    @staticmethod
    def of_model(system, model, cfg) -> "Regime":
        """The regime of ``model`` (whose system is ``system``) under the task's options ``cfg``."""
        context = system.context_sentences()
        positions = model.max_positions()
        chunk_sentences = system.chunk_sentences()
        unit = system.training_unit()
        if unit == "chunks":
            training = WholeChunks(chunk_sentences)
        elif unit == "sentences" and cfg.training_batches == "system":
            training = ShuffledSentences(context, positions)
        else:
            unpackable = why_rows_not_packed(system, model, cfg.lane_rows)
            training = RefilledLanes(
                parse_window(cfg.optimization_window), cfg.passes_per_step,
                packed_width=model.encoder.embed_tokens.embedding_dim if unpackable is None else None,
                context=context, max_positions=positions, unpacked_because=unpackable or "",
            )
        return Regime(training, DocumentLanes(context, positions, chunk_sentences), system.context_choice(),
                      system.carries_states)

    @staticmethod
    def before_any_model(cfg) -> "Regime":
        """Until a model is built: a sentence-level system's, whose batches read no context."""
        return Regime(RefilledLanes(parse_window(cfg.optimization_window), cfg.passes_per_step), DocumentLanes())


def why_rows_not_packed(system, model, lane_rows: str) -> Optional[str]:
    """Why training steps in lanes keep one sentence a row for this model, or None when they pack."""
    if lane_rows == "padded":
        return "--lane-rows padded"
    if not system.packs_rows:
        return f"{type(system).__name__} reads its context in the rows"
    return why_not_confinable(model) if isinstance(system, SentenceLevel) else None  # a system confines its own
