"""The document index's rules (``memory_nmt_tools/document_index.py``), one set for training's reader
(``memory_nmt/pipeline/data.py``) and for document_bleu's: a file that breaks one is refused by
both with the same message, naming its file and line; a file that keeps them gives both the same ids."""
import pytest

from memory_nmt.pipeline.data import DocumentDataError, read_docids
from memory_nmt_tools import document_bleu

REFUSED = {
    "spaces-at-the-ends": (b"a\na \na\n", "docids:2: document id 'a ' has spaces at its ends; ids are compared "
                           "exactly, so remove them"),
    "empty": (b"a\n\nb\n", "docids:2: empty document id; every sentence line needs its document's id"),
    "only-spaces": (b"a\n \t\nb\n", "docids:2: empty document id"),
    "not-contiguous": (b"a\nb\na\n", "docids:3: document 'a' continues after other documents (it started at line 1); "
                       "a document's sentences must be contiguous"),
    "not-utf-8": (b"a\r\nb\xff\nc\n", "docids:2: not valid UTF-8"),
    "carriage-return-inside": (b"a\nb\rc\nd\n", "docids:2: carriage return inside the line"),
}


@pytest.mark.parametrize("content, message", REFUSED.values(), ids=REFUSED.keys())
def test_training_and_document_bleu_refuse_a_file_alike(tmp_path, content, message):
    path = tmp_path / "test.en-de.docids"
    path.write_bytes(content)
    with pytest.raises(DocumentDataError) as training:
        read_docids(str(path), 3)
    with pytest.raises(SystemExit) as scoring:  # the docids are read before the generate output
        document_bleu.main(["--generate-output", str(tmp_path / "unread.txt"), "--docids", str(path)])
    assert str(training.value).startswith(f"{path}:") and message in str(training.value)
    assert scoring.value.code == f"error: {training.value}"


def test_training_and_document_bleu_read_the_same_ids(tmp_path):
    path = tmp_path / "test.en-de.docids"
    path.write_bytes("\ufeffdoc 1\r\ndoc 1\r\ndoc 2".encode("utf-8"))  # a byte-order mark, CRLF, no last line end
    assert document_bleu.read_docids(str(path)) == ["doc 1", "doc 1", "doc 2"]
    assert [(d.doc_id, d.first, d.length) for d in read_docids(str(path), 3)] == [("doc 1", 0, 2), ("doc 2", 2, 1)]
