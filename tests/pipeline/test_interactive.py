"""fairseq-interactive in document mode: one sentence a line, an empty line between documents;
the translations equal fairseq-generate's for the same documents, whatever the buffer size; a
line longer than the model's positions is refused by its number. The hub translates as
fairseq-generate does, and refuses a call it cannot take naming the keyword or the method."""
import os
import re

import pytest
import torch

from commands import run_command
from conftest import CONCAT, LOCAL_GLOBAL, PLUGIN, build, fairseq_command, run
from memory_nmt.pipeline.data import DocumentDataError
from memory_nmt.pipeline.option_ranges import OptionError


@pytest.fixture(scope="module")
def checkpoint(memory_run, tmp_path_factory):
    """memory_run's model, in a folder of its own."""
    state = torch.load(memory_run[0] / "checkpoint_last.pt", weights_only=False)
    generator = torch.Generator().manual_seed(0)
    for name, value in state["model"].items():  # reads that matter, as after real training
        if name.endswith("memory.read_attn.out_proj.weight"):
            state["model"][name] = torch.randn(value.shape, generator=generator)
    path = tmp_path_factory.mktemp("interactive") / "reading.pt"
    torch.save(state, path)
    return path


def hypotheses(output):
    return {int(i): text for i, text in re.findall(r"^H-(\d+)\t[^\t]*\t(.*)$", output, re.M)}


def decoding(checkpoint):
    return ["--user-dir", str(PLUGIN), "--task", "document_translation", "--path", str(checkpoint),
            "--beam", "3", "--max-len-b", "20", "--cpu"]


def interactive_sentences(data_bin, checkpoint, lines, buffer_size):
    """Translations of the non-empty ``lines``, checking one output per input line."""
    result = run_command(
        [fairseq_command("fairseq-interactive"), str(data_bin), *decoding(checkpoint),
         "--source-lang", "en", "--target-lang", "de",
         "--buffer-size", str(buffer_size), "--batch-size", str(buffer_size)],
        input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr[-3000:]
    translations = hypotheses(result.stdout)
    assert sorted(translations) == list(range(len(lines))), "one output per input line"
    assert all(translations[i] == "" for i, line in enumerate(lines) if not line)
    return [translations[i] for i, line in enumerate(lines) if line]


@pytest.fixture(scope="module")
def generated(data_bin, checkpoint):
    output = run([fairseq_command("fairseq-generate"), str(data_bin), *decoding(checkpoint),
                  "--gen-subset", "test", "--max-tokens", "200"]).stdout
    translations = hypotheses(output)
    return [translations[i] for i in range(len(translations))]


@pytest.mark.parametrize("buffer_size", [1, 5])
def test_interactive_documents_translate_as_generate_does(data_bin, checkpoint, generated, buffer_size):
    lines = (data_bin.parent / "raw" / "test.en").read_text().splitlines()
    assert "" in lines, "the raw test file separates documents with empty lines"
    assert interactive_sentences(data_bin, checkpoint, lines, buffer_size) == generated


def test_context_matters_every_line_its_own_document_differs(data_bin, checkpoint, generated):
    lines = [line for line in (data_bin.parent / "raw" / "test.en").read_text().splitlines() if line]
    alone = interactive_sentences(data_bin, checkpoint, "\n\n".join(lines).split("\n"), 5)
    assert alone != generated


def test_hub_translates_documents_as_generate_does(data_bin, checkpoint, generated):
    from memory_nmt.systems.recurrent_memory.model import RecurrentMemoryTransformerModel

    hub = RecurrentMemoryTransformerModel.from_pretrained(
        str(checkpoint.parent), checkpoint_file=checkpoint.name, data_name_or_path=str(data_bin)
    )
    text = (data_bin.parent / "raw" / "test.en").read_text().strip("\n")
    documents = [document.split("\n") for document in text.split("\n\n")]
    hub.cfg.generation.max_len_b = 20
    translations = hub.translate_documents(documents, beam=3)
    assert [len(t) for t in translations] == [len(d) for d in documents]
    assert [s for t in translations for s in t] == generated
    assert hub.translate_document(documents[1], beam=3) == translations[1]
    with pytest.raises(ValueError, match="document 1: sentence 2 is empty"):
        hub.translate_document(["a b c .", " "])
    with pytest.raises(TypeError, match="a list of strings, not one string"):
        hub.translate_document("a b c . d e .")
    with pytest.raises(TypeError, match="document 1 is a NoneType"):
        hub.translate_documents([None])
    with pytest.raises(TypeError, match="document 1: sentence 1 is a list"):
        hub.translate_document([["a b c ."]])
    with pytest.raises(TypeError, match=r"translate_document\(sentences\)"):
        hub.translate("a b c .")
    with pytest.raises(TypeError, match=r"beem=3 is not a generation option: did you mean beam"):
        hub.translate_document(documents[0], beem=3)
    limit = hub.models[0].max_positions()[0]
    with pytest.raises(DocumentDataError, match=rf"^document 2, sentence 1 has {limit + 1} tokens"):
        hub.translate_documents([["a b ."], [" ".join(["a"] * limit)]])  # counted within this call


@pytest.fixture(scope="module")
def hub(data_bin, checkpoint):
    from memory_nmt.systems.recurrent_memory.model import RecurrentMemoryTransformerModel

    return RecurrentMemoryTransformerModel.from_pretrained(
        str(checkpoint.parent), checkpoint_file=checkpoint.name, data_name_or_path=str(data_bin)
    )


HUB_CALLS = [  # (the hub's method, its keywords, the error, its message): each failed elsewhere, or named another
    ("translate_documents", {"lenpen": "x"}, OptionError,  # a TypeError in fairseq's generator
     "lenpen='x': Value 'x' of type 'str' could not be converted to Float; give lenpen a value that "
     "fairseq-generate's --lenpen takes"),
    ("translate_documents", {"max_len_b": None}, OptionError,  # a TypeError in the task
     "max_len_b=None: field 'max_len_b' is not Optional; give max_len_b a value that fairseq-generate's --max-len-b "
     "takes"),
    ("sample", {}, TypeError,  # "document decoding needs the batches of ... (fairseq-generate ...)"
     "sample() translates sentences without their document; a document model translates documents: use "
     "translate_document(sentences) for one document (a list of sentences) or translate_documents(documents) for "
     "several"),
]


@pytest.mark.parametrize("method, keywords, error, message", HUB_CALLS,
                         ids=[f"{m} {' '.join(map(str, k))}" for m, k, _, _ in HUB_CALLS])
def test_a_hub_call_it_cannot_take_is_refused_naming_the_keyword_or_method(hub, method, keywords, error, message):
    documents = [["we spent the day in the mountains .", "the crane is old now ."]]
    with pytest.raises(error) as refused:
        getattr(hub, method)(documents if method == "translate_documents" else documents[0], **keywords)
    assert str(refused.value) == message


def test_a_hub_keyword_is_taken_as_fairseq_generates_option_takes_it(hub):
    """A value the option's type reads (lenpen='1.5', beam='2') is read as it (fairseq's generator failed on text)."""
    documents = [["we spent the day in the mountains .", "the crane is old now ."]]
    assert hub.translate_documents(documents, beam="2", lenpen="1.5") == hub.translate_documents(documents, beam=2,
                                                                                                  lenpen=1.5)


@pytest.mark.parametrize("place, message", [
    ({"data_name_or_path": "nosuchdata"},
     "data_name_or_path='nosuchdata': no such directory ({cwd}/nosuchdata); give the directory of the binarized "
     "data's dictionaries (fairseq-preprocess's --destdir); one that starts with '.' is read from the checkpoint's "
     "directory"),
    ({"model_name_or_path": "nosuch"},
     "model_name_or_path='nosuch': no such directory; give the directory of the checkpoint (fairseq-train's "
     "--save-dir)"),
], ids=["data", "model"])
def test_from_pretrained_names_a_directory_that_is_not_there(data_bin, checkpoint, place, message):
    """fairseq's hub took a path that is not there for None, and failed with a TypeError."""
    from memory_nmt.systems.recurrent_memory.model import RecurrentMemoryTransformerModel

    where = {"model_name_or_path": str(checkpoint.parent), "data_name_or_path": str(data_bin), **place}
    with pytest.raises(OptionError) as refused:
        RecurrentMemoryTransformerModel.from_pretrained(checkpoint_file=checkpoint.name, **where)
    assert str(refused.value) == message.format(cwd=os.getcwd())


def test_interactive_tokenizes_and_detokenizes_with_moses(data_bin, checkpoint, generated):
    """Raw input ("it was red.") is Moses-tokenized as fairseq does; the H- lines equal the
    translations of the tokenized text, and the D- lines are their Moses detokenization."""
    from sacremoses import MosesDetokenizer

    lines = (data_bin.parent / "raw" / "test.en").read_text().splitlines()
    raw = [line[:-2] + "." if line.endswith(" .") else line for line in lines]
    result = run_command(
        [fairseq_command("fairseq-interactive"), str(data_bin), *decoding(checkpoint),
         "--source-lang", "en", "--target-lang", "de", "--tokenizer", "moses",
         "--buffer-size", "4", "--batch-size", "4"],
        input="\n".join(raw) + "\n")
    assert result.returncode == 0, result.stderr[-3000:]
    tokenized = hypotheses(result.stdout)
    detokenized = {int(i): t for i, t in re.findall(r"^D-(\d+)\t[^\t]*\t(.*)$", result.stdout, re.M)}
    sentences = [i for i, line in enumerate(lines) if line]
    assert [tokenized[i] for i in sentences] == generated
    detokenizer = MosesDetokenizer(lang="de")
    assert [detokenized[i] for i in sentences] == [detokenizer.detokenize(t.split()) for t in generated]


@pytest.mark.parametrize("arch", [CONCAT, [*LOCAL_GLOBAL, "--chunk-sentences", "1"]], ids=["concat", "local_global"])
def test_a_line_longer_than_the_positions_is_refused_by_its_number(data_bin, arch):
    """As in a split, a line is never cut to the model's positions: the run stops at it, named by
    its line and by its document and sentence, whatever the system (a chunk is not a document)."""
    task, model, _, _ = build(data_bin, *arch, "--max-source-positions", "6")
    lines = ["a b", "a b c d e f g", "", "a"]  # line 2 takes 8 tokens with its eos
    tokens, lengths = task.get_interactive_tokens_and_lengths(lines, lambda line: line)
    dataset = task.build_dataset_for_inference(tokens, lengths)
    with pytest.raises(DocumentDataError,
                       match=r"input line 2 \(document 1, sentence 2\) has 8 tokens, more than the 6"):
        task.get_batch_iterator(dataset, max_sentences=4, max_positions=model.max_positions())
