"""examples/making_the_most_of_context/global_attention_maps.py: Figure 4's sentence-to-sentence
attention of one chunk of a document, as the model's encoder gives it, drawn and printed; a checkpoint
without a global layer, a document or a chunk that is not there, refused by name."""
import pytest
import torch
from fairseq.data import data_utils

from conftest import LOCAL_GLOBAL, REPO, build, load_script, save_checkpoint
from memory_nmt.pipeline.context_parameters import is_context_parameter

SCRIPT = REPO / "examples" / "making_the_most_of_context" / "global_attention_maps.py"


@pytest.fixture(scope="module")
def maps():
    return load_script(SCRIPT)


@pytest.fixture(scope="module")
def checkpoint(data_bin, tmp_path_factory):
    """A local+global model in chunks of 3, its context parameters random (they start at zero)."""
    _, model, _, cfg = build(data_bin, *LOCAL_GLOBAL, "--chunk-sentences", "3")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if is_context_parameter(parameter):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    path = tmp_path_factory.mktemp("local_global") / "checkpoint.pt"
    save_checkpoint(model, cfg, path)
    return path


def longest_document(data_bin):
    docids = (data_bin / "test.en-de.docids").read_text().split()
    return max(set(docids), key=docids.count), docids


def test_the_map_is_the_encoders_sentence_attention_of_the_chunk(maps, data_bin, checkpoint, tmp_path, capsys):
    docid, docids = longest_document(data_bin)
    assert docids.count(docid) >= 4  # a second chunk of chunks of 3
    weights = maps.main(["--path", str(checkpoint), "--data", str(data_bin), "--document", docid, "--chunk", "2",
                         "--plot", str(tmp_path / "map.png")])
    model, task = maps.load_model(checkpoint, data_bin)
    task.load_dataset("test")
    first = docids.index(docid)
    pairs = task.dataset("test").pairs
    sources = [pairs[i]["source"] for i in range(first + 3, first + min(6, docids.count(docid)))]
    with torch.no_grad():
        expected = model.encoder.sentence_attention(
            data_utils.collate_tokens(sources, task.source_dictionary.pad(), left_pad=True))
    assert torch.equal(weights, expected) and torch.allclose(weights.sum(-1), torch.ones(len(sources)))
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[1:1 + len(sources)] == [str(n) for n in range(4, 4 + len(sources))]
    assert (tmp_path / "map.png").stat().st_size > 5000


@pytest.mark.parametrize("arguments, message", [
    (["--document", "nosuch"], "document 'nosuch' is not in"),
    (["--chunk", "9"], "give --chunk 1 to"),
], ids=["document", "chunk"])
def test_what_is_not_there_is_refused_by_name(maps, data_bin, checkpoint, tmp_path, arguments, message):
    docid, _ = longest_document(data_bin)
    with pytest.raises(SystemExit) as refused:
        maps.main(["--path", str(checkpoint), "--data", str(data_bin), "--document", docid,
                   "--plot", str(tmp_path / "map.png"), *arguments])
    assert message in str(refused.value.code)


def test_a_model_without_a_global_layer_is_refused(maps, data_bin, sentence_checkpoint, tmp_path):
    docid, _ = longest_document(data_bin)
    with pytest.raises(SystemExit) as refused:
        maps.main(["--path", str(sentence_checkpoint), "--data", str(data_bin), "--document", docid,
                   "--plot", str(tmp_path / "map.png")])
    assert "which has no global layer; pass a transformer_local_global checkpoint" in str(refused.value.code)
