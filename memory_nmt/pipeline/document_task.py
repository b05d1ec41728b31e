"""The mark of a task that feeds its models sentence steps of documents in lanes and carries their
context: ``document_translation`` (``task.py``) bears it. The modules below the task check for it
(a document system's ``build_model``, the document criterion, the hub) without importing the
task, which imports them.
"""


class TranslatesDocuments:
    """Marks a fairseq task that feeds sentence steps of documents in lanes (``task.py``)."""
