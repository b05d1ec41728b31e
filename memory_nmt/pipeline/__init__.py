"""The one document pipeline every system runs on; it knows no system by name.

``data.py`` turns a binarized split and its ``.docids`` into sentence steps of documents in
lanes; planners (``planners.py``: one interface) deal them to workers and batches, the one a
split gets chosen once from what the model's system declares (``regime.py``):
``refilled_lanes.py`` plans training's lanes, whose steps ``packing.py`` packs several
sentences to a row, each confined to itself by ``packed_attention.py`` through the passes over
fairseq's layers that take what a sentence reads as arguments (``transformer_pass.py``,
``layer_blocks.py``); ``sentence_batches.py``
plans shuffled sentences with their context; ``chunks.py`` cuts documents into chunks for
systems that read a whole chunk's source; ``chosen_context.py`` picks the next or random
sentences a system's sentences read instead of what their lanes carry. Each kind of batch is a
type (``samples.py``), read once from fairseq's dict. ``task.py`` (``document_translation``;
its options ``task_config.py``, its checks of a run's options and files ``run_checks.py``)
feeds the batches to fairseq; ``criterion.py`` trains on them and
``generator.py`` decodes them, both keeping what each lane carries from sentence to sentence
(``carry.py``) through the interface a system implements (``system.py``); a sentence step
teacher-forced on its reference is ``teacher_forcing.py``'s, and the gradient across sentences
``truncation.py``'s; ``interactive.py`` and ``hub.py`` place fairseq-interactive's lines and
Python's documents in lanes; ``precision.py`` checks fairseq's precision options for the task.
The parameters a system adds to read its context are tagged (``context_parameters.py``), so that
a checkpoint fits any system alike (``checkpoint_fit.py``).
Its modules import only each other and fairseq, lowest first:
``task.py`` at the top, nothing below it imports it.
"""
