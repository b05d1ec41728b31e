"""The fingerprints of the dictionaries a model is trained with, kept in its checkpoints' task state and compared with the data's.

A checkpoint decodes data binarized with its own dictionaries only: the same size in another order
decodes garbage without a word. The document task saves a digest of each dictionary's symbols in
their order with its state (``DICTIONARIES``: ``task.py``'s ``state_dict``), and refuses a
checkpoint whose digests are not the data's as it loads its state; a checkpoint without them (one
of ``--task translation``, or from before they were saved) is not checked.
"""
import hashlib
import os
from typing import Optional

from .data import DocumentDataError

DICTIONARIES = "dictionary_fingerprints"  # in a checkpoint's task state


def fingerprint(dictionary) -> str:
    """A digest of a fairseq dictionary's symbols in their order (its indices)."""
    return hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()


def fingerprints(source, target) -> dict:
    """The fingerprints of a task's source and target dictionaries, by side."""
    return {"source": fingerprint(source), "target": fingerprint(target)}


def check_trained_with(trained: Optional[dict], here: dict, data_path: str, source_lang: str, target_lang: str):
    """Refuse a checkpoint whose model was trained with other dictionaries (``trained``, its fingerprints)
    than those of the data in ``data_path`` (``here``)."""
    if trained is None:
        return
    for side, language in (("source", source_lang), ("target", target_lang)):
        if trained[side] != here[side]:
            raise DocumentDataError(
                f"the checkpoint's model was trained with another {side} dictionary than "
                f"{os.path.join(data_path, f'dict.{language}.txt')} "
                f"(its symbols or their order differ): binarize the data with the dictionary "
                "the model was trained with (fairseq-preprocess --srcdict / --tgtdict)"
            )
