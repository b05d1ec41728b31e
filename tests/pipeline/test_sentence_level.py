"""fairseq's plain transformer in the document pipeline: every sentence translated alone, exactly
as fairseq's own generator translates it, through the stock CLIs too; and the other way round,
a document system outside the document task is refused."""
import re

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from commands import run_command
from conftest import AMN, CONCAT, COMMON, PLUGIN, TINY_DIMS, TINY_MODEL, batches, build, fairseq_command, run
from memory_nmt.pipeline.generator import DocumentSequenceGenerator
from memory_nmt.pipeline.system import DocumentSystemError, SentenceLevel, document_system


def test_plain_transformer_decodes_in_document_batches_as_fairseq_does(data_bin):
    task, model, _, _ = build(data_bin, "--arch", "transformer", *TINY_DIMS)
    assert isinstance(document_system(model), SentenceLevel) and task.regime.stepping.context == (0, 0)
    model.eval()
    document = DocumentSequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=12)
    plain = SequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=12)
    decoded = []
    for sample in batches(task, "test"):
        got, expected = document.generate([model], sample), plain.generate([model], sample)
        for ours, theirs in zip(got, expected):
            assert torch.equal(ours[0]["tokens"], theirs[0]["tokens"])
            assert torch.equal(ours[0]["positional_scores"], theirs[0]["positional_scores"])
        decoded += sample["id"].tolist()
    assert sorted(decoded) == list(range(len(task.dataset("test"))))


def test_stock_clis_train_and_decode_it_in_the_document_task(data_bin, sentence_checkpoint, tmp_path):
    trained = run([
        fairseq_command("fairseq-train"), str(data_bin), *COMMON, "--task", "document_translation",
        "--arch", "transformer", *TINY_DIMS, "--criterion", "document_label_smoothed_cross_entropy",
        "--lr", "1e-3", "--max-update", "2", "--save-dir", str(tmp_path),
    ])
    assert "num_updates 2" in trained.stdout + trained.stderr
    generated = run([
        fairseq_command("fairseq-generate"), str(data_bin), "--user-dir", str(PLUGIN),
        "--task", "document_translation", "--path", str(sentence_checkpoint), "--gen-subset", "test",
        "--beam", "3", "--max-tokens", "200", "--max-len-b", "20", "--cpu",
    ]).stdout
    sentences = sum(1 for _ in open(data_bin / "test.en-de.docids"))
    assert sorted(int(i) for i in re.findall(r"^H-(\d+)\t", generated, re.M)) == list(range(sentences))


@pytest.mark.parametrize("arch", [TINY_MODEL, CONCAT, AMN], ids=["memory", "concat", "amn"])
def test_a_document_system_outside_the_document_task_is_refused(data_bin, arch):
    """fairseq-generate --task translation with a document checkpoint would decode every sentence
    without its context and say nothing."""
    with pytest.raises(DocumentSystemError, match="translates documents: use --task document_translation"):
        build(data_bin, *arch, task="translation")


def test_fairseq_generate_with_a_document_checkpoint_in_the_translation_task_ends_on_one_line(data_bin,
                                                                                            concat_checkpoint):
    """Under fairseq's own task the plugin's refusal is still an error in what the user gave: the
    command line loads the plugin (--user-dir), so it ends in one line (memory_nmt/fairseq_changes.py)."""
    done = run_command([
        fairseq_command("fairseq-generate"), str(data_bin), "--user-dir", str(PLUGIN), "--task", "translation",
        "--path", str(concat_checkpoint), "--gen-subset", "test", "--cpu", "--max-tokens", "200",
    ])
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert re.match(r"fairseq-generate: error: .*translates documents: use --task document_translation",
                    done.stderr.strip().splitlines()[-1]), done.stderr[-2000:]


def test_the_document_hub_translates_a_sentence_models_documents_sentence_by_sentence(data_bin, sentence_checkpoint):
    """Any class's from_pretrained loads what the checkpoint holds: a transformer trained in
    fairseq's translation task has no context, so each sentence is translated alone."""
    from fairseq.models.transformer import TransformerModel

    from memory_nmt.systems.recurrent_memory.model import RecurrentMemoryTransformerModel

    where = dict(checkpoint_file=sentence_checkpoint.name, data_name_or_path=str(data_bin))
    hub = RecurrentMemoryTransformerModel.from_pretrained(str(sentence_checkpoint.parent), **where)
    plain = TransformerModel.from_pretrained(str(sentence_checkpoint.parent), **where)
    for interface in (hub, plain):
        interface.cfg.generation.max_len_b = 20
    text = (data_bin.parent / "raw" / "test.en").read_text().strip("\n")
    documents = [document.split("\n") for document in text.split("\n\n")]
    assert hub.translate_documents(documents, beam=3) == [plain.translate(document, beam=3) for document in documents]
