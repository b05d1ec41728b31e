"""Tests of scripts/prepare_documents.py through its command line.

Small inputs of each format (blank-lines, doc-markers with CRLF and mixed line ends, WMT SGML
with entities and markup lines) are written to tmp_path; the tests check the exact sentence
and docids files, Moses tokenization, the BPE and sentencepiece round trips and the input errors.
The last tests run the script on the real files under ../shared/data and are skipped where it
is absent.
"""
import os
import re
import subprocess
import sys

import pytest
from fairseq.data.data_utils import post_process
from fairseq.data.encoders.sentencepiece_bpe import SentencepieceBPE, SentencepieceConfig

from conftest import REPO, TRAIN_DE, TRAIN_EN
from memory_nmt_tools import prepare_documents

SCRIPT = REPO / "scripts" / "prepare_documents.py"
DATA = REPO.parent / "shared" / "data" / "docmt-en-de"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True)


def prepare(tmp_path, input_format, source, target, *options, name="corpus"):
    """Write source/target (str or bytes) as NAME.src/NAME.tgt and run the script on them."""
    paths = []
    for suffix, content in (("src", source), ("tgt", target)):
        path = tmp_path / f"{name}.{suffix}"
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        paths.append(path)
    return run("--format", input_format, "--source", paths[0], "--target", paths[1],
               "--source-lang", "en", "--target-lang", "de",
               "--output-prefix", tmp_path / "out" / "train", *options)


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def lines(path):
    """The lines of an output file, checking it is LF-only UTF-8 with a final newline."""
    data = path.read_bytes()
    assert b"\r" not in data and data.endswith(b"\n")
    return data.decode("utf-8").split("\n")[:-1]


def outputs(tmp_path):
    prefix = tmp_path / "out" / "train"
    return [lines(prefix.with_suffix(suffix)) for suffix in (".en", ".de", ".docids")]


def assert_fails(result, *fragments):
    """One-line 'error: ...' on stderr naming every fragment, non-zero exit, no traceback."""
    assert result.returncode != 0
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


def test_blank_lines_writes_sentences_and_docids(tmp_path):
    source = "Hello there.\nHow are you?\n\n  Second document.  \n\n"
    target = "Hallo.\nWie geht's?\n\nZweites Dokument.\n"
    result = prepare(tmp_path, "blank-lines", source, target)
    assert result.returncode == 0, result.stderr
    assert outputs(tmp_path) == [
        ["Hello there.", "How are you?", "Second document."],
        ["Hallo.", "Wie geht's?", "Zweites Dokument."],
        ["corpus-0", "corpus-0", "corpus-1"],
    ]
    assert result.stdout.startswith("2 documents, 3 sentences")


@pytest.mark.parametrize("overwritten", ["source", "target", "bpe-codes"])
def test_an_output_that_is_an_input_is_refused_untouched(tmp_path, overwritten):
    """--output-prefix X where X.en is the --source (or X.de the --target, or X.docids the
    --bpe-codes) would overwrite an input: refused before anything is written."""
    source, target = tmp_path / "corpus.en", tmp_path / "corpus.de"
    source.write_text("Hello there.\n\nSecond document.\n")
    target.write_text("Hallo.\n\nZweites Dokument.\n")
    codes = tmp_path / "corpus.docids"
    options = ["--learn-bpe", "10", "--bpe-codes", codes] if overwritten == "bpe-codes" else []
    before = {path: path.read_bytes() for path in (source, target)}
    result = run("--format", "blank-lines", "--source", source, "--target", target, "--source-lang", "en",
                 "--target-lang", "de", "--output-prefix", tmp_path / "corpus", *options)
    assert_fails(result, "would overwrite", "choose another --output-prefix")
    assert {path: path.read_bytes() for path in (source, target)} == before and not codes.exists()


def test_outputs_are_written_whole_or_not_at_all(tmp_path):
    """Each output goes to a temporary file renamed into place: a failure while writing leaves
    the earlier file under the output's name as it was, and no temporary file behind."""
    output = tmp_path / "train.en"
    output.write_text("an older, complete output\n")

    def lines_then_a_full_disk():
        yield "a new first line"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        prepare_documents.write_outputs({str(output): lines_then_a_full_disk()})
    assert output.read_text() == "an older, complete output\n"
    assert [path.name for path in tmp_path.iterdir()] == ["train.en"]


def test_doc_prefix_names_the_documents(tmp_path):
    result = prepare(tmp_path, "blank-lines", "a\n\nb\n", "x\n\ny\n", "--doc-prefix", "ted")
    assert result.returncode == 0, result.stderr
    assert outputs(tmp_path)[2] == ["ted-0", "ted-1"]


def test_doc_markers_with_crlf_and_mixed_line_ends(tmp_path):
    source = b"<d>\r\nFirst one.   \r\nSecond one.\n<d>\nThird one.\r\n"
    target = b"<d>\nErster.\nZweiter.\r\n<d>\r\nDritter.   \n"
    result = prepare(tmp_path, "doc-markers", source, target)
    assert result.returncode == 0, result.stderr
    assert outputs(tmp_path) == [
        ["First one.", "Second one.", "Third one."],
        ["Erster.", "Zweiter.", "Dritter."],
        ["corpus-0", "corpus-0", "corpus-1"],
    ]


def test_line_separators_inside_a_sentence_do_not_split_it(tmp_path):
    # U+0085 (NEL) occurs inside real WMT references; only LF ends a line.
    result = prepare(tmp_path, "doc-markers", "<d>\nWait\u2026 what?\n", "<d>\nWarte\x85 was?\n")
    assert result.returncode == 0, result.stderr
    assert outputs(tmp_path)[1] == ["Warte\x85 was?"]


SGML_SOURCE = """<srcset setid="newstest2099" srclang="any">
<doc docid="a.com/1" genre="news" origlang="en">
<h1>
<seg id="1">Cats &amp; dogs</seg>
</h1>
<p>
<seg id="2"> He said &quot;hi&quot; &#8211; twice. </seg>
</p>
</doc>
<doc docid="b.com/2" genre="news" origlang="de">
<p>
<seg id="1">Only one.</seg>
</p>stray
</doc>
</srcset>
"""
# The reference lists the documents, and the segments of a.com/1, in another order.
SGML_TARGET = """<refset trglang="de" setid="newstest2099" srclang="any">
<doc sysid="ref" docid="b.com/2" genre="news" origlang="de">
<seg id="1">Nur einer.</seg>
</doc>
<doc sysid="ref" docid="a.com/1" genre="news" origlang="en">
<p>
<seg id="2">Er sagte &bdquo;hallo&ldquo; &lt;zweimal&gt;.</seg>
<seg id="1">Katzen &amp; Hunde</seg>
</p>
</doc>
</refset>
"""


def test_sgml_pairs_by_docid_and_seg_id_and_unescapes(tmp_path):
    result = prepare(tmp_path, "sgml", SGML_SOURCE, SGML_TARGET)
    assert result.returncode == 0, result.stderr
    assert outputs(tmp_path) == [
        ["Cats & dogs", 'He said "hi" \u2013 twice.', "Only one."],
        ["Katzen & Hunde", "Er sagte \u201ehallo\u201c <zweimal>.", "Nur einer."],
        ["newstest2099-a.com/1", "newstest2099-a.com/1", "newstest2099-b.com/2"],
    ]


def test_sgml_missing_segment_names_file_docid_and_seg(tmp_path):
    target = "".join(line for line in SGML_TARGET.splitlines(keepends=True)
                     if not line.startswith('<seg id="2">'))
    result = prepare(tmp_path, "sgml", SGML_SOURCE, target)
    assert_fails(result, "corpus.tgt", "docid=a.com/1", "id=2")


def test_sgml_missing_document_names_it(tmp_path):
    extra = '<doc docid="c.com/3">\n<seg id="1">Extra.</seg>\n</doc>\n</srcset>'
    source = SGML_SOURCE.replace("</srcset>", extra)
    result = prepare(tmp_path, "sgml", source, SGML_TARGET)
    assert_fails(result, "corpus.tgt", "docid=c.com/3")


def test_moses_tokenization_matches_fairseq_defaults(tmp_path):
    source = "<d>\nHello, world! It's a well-known \"test\" & more.\n"
    target = "<d>\nHallo, Welt! Das ist's: ein Euro-Test.\n"
    result = prepare(tmp_path, "doc-markers", source, target, "--moses")
    assert result.returncode == 0, result.stderr
    source_lines, target_lines, _ = outputs(tmp_path)
    assert source_lines == [
        "Hello , world ! It &apos;s a well @-@ known &quot; test &quot; &amp; more ."
    ]
    assert target_lines == ["Hallo , Welt ! Das ist &apos; s : ein Euro @-@ Test ."]


def test_moses_options_turn_off_dash_splits_and_escaping(tmp_path):
    result = prepare(tmp_path, "doc-markers", "<d>\nIt's well-known.\n", "<d>\nGut.\n",
                     "--moses", "--moses-no-dash-splits", "--moses-no-escape")
    assert result.returncode == 0, result.stderr
    assert outputs(tmp_path)[0] == ["It 's well-known ."]


def test_bpe_learn_then_apply_round_trips(tmp_path):
    source = "<d>\n" + "\n".join(TRAIN_EN) + "\n"
    target = "<d>\n" + "\n".join(TRAIN_DE) + "\n"
    codes = tmp_path / "bpe" / "codes"
    result = prepare(tmp_path, "doc-markers", source, target,
                     "--learn-bpe", "30", "--bpe-codes", codes)
    assert result.returncode == 0, result.stderr
    code_lines = codes.read_text(encoding="utf-8").splitlines()
    assert code_lines[0].startswith("#version") and len(code_lines) == 31
    source_lines, target_lines, docids = outputs(tmp_path)
    segmented = source_lines + target_lines
    assert any("@@ " in line for line in segmented)
    assert [re.sub(r"(@@ )|(@@ ?$)", "", line) for line in segmented] == TRAIN_EN + TRAIN_DE
    assert docids == ["corpus-0"] * len(TRAIN_EN)

    # Applying the same codes alone (as for valid/test) segments the same text the same way.
    applied = prepare(tmp_path, "doc-markers", source, target, "--bpe-codes", codes, name="test")
    assert applied.returncode == 0, applied.stderr
    assert outputs(tmp_path)[:2] == [source_lines, target_lines]


def test_spm_model_writes_the_pieces_fairseq_writes_and_post_process_undoes(tmp_path, spm_model):
    """Raw text in, the pretrained model's pieces out: exactly what fairseq's --bpe sentencepiece
    gives, undone by --post-process sentencepiece; the docids are those of the raw text."""
    source = "The lower house passed the budget.\nShe passed the houses slowly!\n\nNew prices, lower.\n"
    target = "Das Unterhaus verabschiedete den Haushalt.\nSie ging langsam vorbei!\n\nNeue Preise, niedriger.\n"
    raw = prepare(tmp_path, "blank-lines", source, target)
    assert raw.returncode == 0, raw.stderr
    raw_source, raw_target, raw_docids = outputs(tmp_path)
    result = prepare(tmp_path, "blank-lines", source, target, "--spm-model", spm_model)
    assert result.returncode == 0, result.stderr
    source_lines, target_lines, docids = outputs(tmp_path)
    fairseq_bpe = SentencepieceBPE(SentencepieceConfig(sentencepiece_model=str(spm_model)))
    assert source_lines == [fairseq_bpe.encode(line) for line in raw_source]
    assert target_lines == [fairseq_bpe.encode(line) for line in raw_target]
    assert all(len(line.split(" ")) > len(raw_line.split(" "))
               for line, raw_line in zip(source_lines + target_lines, raw_source + raw_target))
    assert [post_process(line, "sentencepiece") for line in source_lines + target_lines] == raw_source + raw_target
    assert docids == raw_docids == ["corpus-0", "corpus-0", "corpus-1"]


def test_a_sentence_spm_model_segments_into_nothing_is_an_error(tmp_path, spm_model):
    """An ideographic space is kept by the reader (only ASCII whitespace is stripped) but is
    nothing to sentencepiece: an empty line would leave the sentence without tokens."""
    result = prepare(tmp_path, "blank-lines", "fine\n\u3000\n", "gut\nauch\n", "--spm-model", spm_model)
    assert_fails(result, "sentence 2 of document corpus-0 (en) is empty after sentencepiece "
                 "segmentation; remove it from both sides")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options", [["--moses"], ["--learn-bpe", "10", "--bpe-codes", "codes"],
                                     ["--bpe-codes", "codes"]], ids=["moses", "learn-bpe", "bpe-codes"])
def test_spm_model_refuses_moses_and_bpe(tmp_path, spm_model, options):
    """A pretrained model's pieces are its own, made from raw text: no Moses, no BPE on top."""
    result = prepare(tmp_path, "blank-lines", "a\n", "x\n", "--spm-model", spm_model, *options)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].endswith(
        "error: --spm-model segments raw text with the pretrained model's own pieces: "
        "leave out --moses, --learn-bpe and --bpe-codes")
    assert not (tmp_path / "out").exists() and not (tmp_path / "codes").exists()


def test_missing_spm_model_is_named_before_the_corpus_is_read(tmp_path, monkeypatch):
    def read_side(*args):
        raise AssertionError("the corpus was read before the model was loaded")

    monkeypatch.setattr(prepare_documents, "read_side", read_side)
    missing = tmp_path / "sentence.bpe.model"
    with pytest.raises(SystemExit, match=re.escape(
            f"error: --spm-model {missing}: no such file; pass the sentencepiece model of the "
            "pretrained checkpoint")):
        prepare_documents.main(["--format", "blank-lines", "--source", str(tmp_path / "a.en"), "--target",
                                str(tmp_path / "a.de"), "--source-lang", "en", "--target-lang", "de",
                                "--output-prefix", str(tmp_path / "out"), "--spm-model", str(missing)])


def test_a_file_that_is_no_spm_model_is_named(tmp_path):
    not_a_model = write(tmp_path / "dict.txt", "the 10\n")
    result = prepare(tmp_path, "blank-lines", "a\n", "x\n", "--spm-model", not_a_model)
    assert_fails(result, f"--spm-model {not_a_model}: cannot load it", "pass the sentencepiece model")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source, target", [
    ("a b\n\nc\n", "x y\n\nz\n"),  # words of one character: no pair at all
    ("ab cd\n\nef\n", "gh ij\n\nkl\n"),  # pairs, but none twice: subword-nmt wrote a header-only codes file
], ids=["one-character-words", "no-pair-twice"])
def test_bpe_on_a_corpus_with_nothing_to_merge_is_an_error(tmp_path, source, target):
    """subword-nmt merges only pairs that occur at least twice: with none, it wrote a codes file
    with no merge in it, which the next split's --bpe-codes then failed on ("invalid line 2")."""
    result = prepare(tmp_path, "blank-lines", source, target,
                     "--learn-bpe", "20", "--bpe-codes", tmp_path / "bpe" / "codes")
    assert_fails(result, "--learn-bpe 20: no pair of symbols occurs twice in the corpus",
                 "learn the codes on the real training corpus")
    assert not (tmp_path / "bpe").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_outputs_get_the_mode_of_a_plainly_written_file(tmp_path, umask, mode):
    """The outputs were written to a temporary file (mode 0600) renamed into place, whatever the
    umask: collaborators could not read the prepared data, nor the data-bin the recipes copy it to."""
    source = "<d>\n" + "\n".join(TRAIN_EN) + "\n"
    target = "<d>\n" + "\n".join(TRAIN_DE) + "\n"
    codes = tmp_path / "codes"
    before = os.umask(umask)
    try:
        prepare_documents.main(["--format", "doc-markers", "--source", str(write(tmp_path / "a.en", source)),
                                "--target", str(write(tmp_path / "a.de", target)), "--source-lang", "en",
                                "--target-lang", "de", "--output-prefix", str(tmp_path / "out" / "train"),
                                "--learn-bpe", "30", "--bpe-codes", str(codes)])
    finally:
        os.umask(before)
    written = [codes, *(tmp_path / "out").iterdir()]
    assert len(written) == 4
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in written} == {
        path.name: oct(mode) for path in written}


def test_bpe_codes_to_apply_are_checked_before_the_corpus_is_read(tmp_path, monkeypatch, capsys):
    """Missing codes were found only after reading and Moses-tokenizing the whole corpus."""
    def read_side(*args):
        raise AssertionError("the corpus was read before the codes were checked")

    monkeypatch.setattr(prepare_documents, "read_side", read_side)
    missing = tmp_path / "bpe.codes"
    with pytest.raises(SystemExit, match=re.escape(f"error: --bpe-codes {missing}: no such file; learn")):
        prepare_documents.main(["--format", "blank-lines", "--source", str(tmp_path / "a.en"), "--target",
                                str(tmp_path / "a.de"), "--source-lang", "en", "--target-lang", "de",
                                "--output-prefix", str(tmp_path / "out"), "--moses", "--bpe-codes", str(missing)])


def test_mismatched_sentence_counts_name_the_document(tmp_path):
    result = prepare(tmp_path, "blank-lines", "a\nb\n\nc\nd\n", "x\ny\n\nz\n")
    assert_fails(result, "corpus-1", "2 sentences", "1 in", "corpus.src", "corpus.tgt")
    assert not (tmp_path / "out").exists()


def test_mismatched_document_counts_are_an_error(tmp_path):
    result = prepare(tmp_path, "doc-markers", "<d>\na\n<d>\nb\n", "<d>\nx\n")
    assert_fails(result, "2 documents", "has 1", "corpus-1")


@pytest.mark.parametrize("input_format", ["blank-lines", "doc-markers", "sgml"])
def test_empty_input_is_an_error(tmp_path, input_format):
    result = prepare(tmp_path, input_format, "", "")
    assert_fails(result, "corpus.src", "empty input")


@pytest.mark.parametrize("source", ["a\n\n\nb\n", "\na\n\nb\n"])
def test_empty_document_is_an_error(tmp_path, source):
    result = prepare(tmp_path, "blank-lines", source, "x\n\ny\n")
    assert_fails(result, "corpus.src:", "empty document")


def test_empty_marked_document_is_an_error(tmp_path):
    result = prepare(tmp_path, "doc-markers", "<d>\n<d>\na\n", "<d>\n<d>\nx\n")
    assert_fails(result, "corpus.src:1", "empty document")


def test_empty_sentence_in_marked_document_is_an_error(tmp_path):
    result = prepare(tmp_path, "doc-markers", "<d>\na\n\nb\n", "<d>\nx\ny\nz\n")
    assert_fails(result, "corpus.src:3", "empty line")


def test_non_utf8_input_names_file_and_line(tmp_path):
    result = prepare(tmp_path, "blank-lines", "fine\n", "fine\n\xfcbel\n".encode("latin-1"))
    assert_fails(result, "corpus.tgt:2", "UTF-8")


def test_missing_doc_marker_is_an_error(tmp_path):
    result = prepare(tmp_path, "doc-markers", "a\n<d>\nb\n", "<d>\nx\ny\n")
    assert_fails(result, "corpus.src:1", "<d>")


def real_data(*parts):
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not found at {path}")
    return path


@pytest.mark.parametrize("corpus, sentences, documents", [
    ("IWSLT2017", 8967, 93), ("NC-2016", 2169, 81), ("Europarl7", 3587, 240),
])
def test_real_selective_attn_files(tmp_path, corpus, sentences, documents):
    folder = real_data("selective-attn", corpus)
    result = run("--format", "doc-markers",
                 "--source", folder / "concatenated_en2de_dev_en.txt",
                 "--target", folder / "concatenated_en2de_dev_de.txt",
                 "--source-lang", "en", "--target-lang", "de", "--output-prefix", tmp_path / "dev")
    assert result.returncode == 0, result.stderr
    source_lines = lines(tmp_path / "dev.en")
    docids = lines(tmp_path / "dev.docids")
    assert len(source_lines) == len(lines(tmp_path / "dev.de")) == len(docids) == sentences
    assert len(set(docids)) == documents
    assert all(line and line == line.strip() for line in source_lines)


# news-test2008: CRLF, <hl> markup and broken "</hl" lines; newstest2009: U+0085 inside
# reference segments; newstest2012: stray text after a </p>.
@pytest.mark.parametrize("test_set", ["news-test2008", "newstest2009", "newstest2012"])
def test_real_wmt_sgml_pair(tmp_path, test_set):
    source = real_data("wmt-newstest", f"{test_set}-src.en.sgm")
    raw = source.read_bytes().decode("utf-8")
    result = run("--format", "sgml", "--source", source,
                 "--target", source.with_name(f"{test_set}-ref.de.sgm"),
                 "--source-lang", "en", "--target-lang", "de", "--output-prefix", tmp_path / "test")
    assert result.returncode == 0, result.stderr
    docids = lines(tmp_path / "test.docids")
    assert len(lines(tmp_path / "test.en")) == len(lines(tmp_path / "test.de")) == len(docids)
    assert len(docids) == raw.count("<seg")
    assert len(set(docids)) == raw.count("<doc")
