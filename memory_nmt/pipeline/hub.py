"""Document translation from Python: ``from_pretrained(...)`` of any document system's model class.

``DocumentHubInterface`` is fairseq's ``GeneratorHubInterface`` (raw text in, raw text out, with
the checkpoint's or the given ``bpe`` and ``tokenizer``) that translates whole documents: the
sentences of each document carry their context from one to the next, and several documents are
translated together, one batch per sentence round, as ``fairseq-interactive`` does
(``interactive.py``).
"""
from typing import List

from fairseq.hub_utils import GeneratorHubInterface


class DocumentHubInterface(GeneratorHubInterface):
    def translate_documents(self, documents: List[List[str]], beam: int = 5, **kwargs) -> List[List[str]]:
        """One translation per sentence of each document (a document: a list of sentences)."""
        for number, document in enumerate(documents):
            empty = [i + 1 for i, sentence in enumerate(document) if not sentence.strip()]
            if empty:
                raise ValueError(
                    f"document {number + 1}: sentence {empty[0]} is empty; every sentence needs text"
                )
        lines = [line for document in documents for line in [*document, ""]]
        self.task.placements = self.task.interactive.place(lines)
        translations = iter(self.translate(lines, beam=beam, **kwargs))
        return [[next(translations) for _ in [*document, ""]][:-1] for document in documents]

    def translate_document(self, sentences: List[str], beam: int = 5, **kwargs) -> List[str]:
        """One translation per sentence, the context carried from sentence to sentence."""
        return self.translate_documents([sentences], beam=beam, **kwargs)[0]
