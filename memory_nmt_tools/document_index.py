"""Reading a document index (``.docids``): the document id of each sentence line.

``prepare_documents.py`` writes it; training and decoding (``memory_nmt/pipeline/data.py``) and
the scores (``document_bleu.py``) read it here, under the same rules, so no file that training
refuses gets a score. It is a text file as ``text_files.py`` reads one (UTF-8, a byte-order mark
ignored, LF or CRLF line ends). Ids are compared exactly: an empty id, or one with spaces at its
ends, is refused rather than stripped. A document's sentences are contiguous, so an id that
appears again after other documents is refused too.
"""
from .text_files import TextFileError, numbered_lines


def read_document_ids(path):
    """The document id of each line of the document index at ``path``, in order; ``TextFileError``
    naming the file and line where the file breaks a rule above."""
    ids, first_line = [], {}
    for number, doc_id in numbered_lines(path):
        if not doc_id.strip():
            raise TextFileError(f"{path}:{number}: empty document id; every sentence line needs its document's id")
        if doc_id != doc_id.strip():
            raise TextFileError(
                f"{path}:{number}: document id {doc_id!r} has spaces at its ends; ids are compared "
                "exactly, so remove them"
            )
        if doc_id in first_line and ids[-1] != doc_id:
            raise TextFileError(
                f"{path}:{number}: document {doc_id!r} continues after other documents "
                f"(it started at line {first_line[doc_id]}); a document's sentences must be contiguous"
            )
        first_line.setdefault(doc_id, number)
        ids.append(doc_id)
    return ids
