"""The one document pipeline every system runs on.

``data.py`` turns a binarized split and its ``.docids`` into sentence steps of documents in
lanes; ``task.py`` (``document_translation``) feeds them to fairseq; ``criterion.py`` trains on
them and ``generator.py`` decodes them, both keeping what each lane carries from sentence to
sentence (``carry.py``) through the interface a system implements (``system.py``);
``interactive.py`` and ``hub.py`` place fairseq-interactive's lines and Python's documents in
lanes. ``previous_sentences.py`` is the carry of systems whose context is earlier sentences;
``chunks.py`` cuts documents into chunks for systems that read a whole chunk's source.
"""
