"""Tests of scripts/document_bleu.py through its command line, and of score_documents.

A small fake fairseq-generate output (ids out of order, logging lines in between) and its
docids file are written to tmp_path; the scores must equal what sacrebleu gives directly on
the sentences in id order and on the documents joined with spaces. The script runs in a process
of its own, but where it undoes subword pieces, which imports fairseq (seconds): there its
command line runs in this process, which has imported fairseq already.
"""
import json
import subprocess
import sys

import pytest
import sacrebleu
from fairseq.data.data_utils import post_process
from sacrebleu.metrics import BLEU

from conftest import REPO, script_in_process
from memory_nmt_tools import document_bleu
from memory_nmt_tools.subword_pieces import UNDO

SCRIPT = REPO / "scripts" / "document_bleu.py"

REFERENCES = [
    "The cat sat on the mat.",
    "It was a sunny day.",
    "Then it went home.",
    "Markets fell sharply on Monday.",
    "Investors were worried about inflation.",
    "A new study says coffee is good for you.",
]
HYPOTHESES = [
    "The cat sat on a mat.",
    "It was sunny day.",
    "Then he went home.",
    "Markets fell on Monday.",
    "Investors worried about the inflation.",
    "A study says coffee is good.",
]
DOCIDS = ["cats", "cats", "cats", "markets", "markets", "coffee"]
ORDER = [4, 1, 5, 0, 3, 2]
SIGNATURE = f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"


def generate_output(hypotheses, references, order=ORDER, extra=()):
    """fairseq-generate style lines for the ids in order, with logging lines mixed in."""
    lines = ["2024-01-01 10:00:00 | INFO | fairseq_cli.generate | loading model"]
    for n, i in enumerate(order):
        lines += [f"S-{i}\tsource {i}", f"T-{i}\t{references[i]}",
                  f"H-{i}\t-0.5\t{hypotheses[i]} (tokenized)", f"D-{i}\t-0.5\t{hypotheses[i]}",
                  f"P-{i}\t-0.1 -0.2"]
        if n == 2:
            lines.append("2024-01-01 10:00:01 | INFO | fairseq.tasks.translation | batch done")
    lines += list(extra)
    lines.append("Generate test with beam=5: BLEU4 = 12.34, 40.0/20.0/10.0/5.0 (BP=1.000)")
    return "\n".join(lines) + "\n"


def inputs(tmp_path, generate_text, docids=DOCIDS):
    """The --generate-output and --docids options, their files written to tmp_path."""
    (tmp_path / "gen.txt").write_text(generate_text, encoding="utf-8")
    (tmp_path / "test.docids").write_text("\n".join(docids) + "\n", encoding="utf-8")
    return ["--generate-output", str(tmp_path / "gen.txt"), "--docids", str(tmp_path / "test.docids")]


def run(tmp_path, generate_text, *options, docids=DOCIDS):
    return subprocess.run([sys.executable, str(SCRIPT), *inputs(tmp_path, generate_text, docids), *options],
                          capture_output=True, text=True)


def run_in_this_process(monkeypatch, capsys, tmp_path, generate_text, *options):
    """``run``, its command line run in this process (``script_in_process``)."""
    return script_in_process(monkeypatch, capsys, SCRIPT, *inputs(tmp_path, generate_text), *options)


def expected(hypotheses, references, tokenize=None):
    """s-BLEU and d-BLEU straight from sacrebleu, documents in order cats, markets, coffee."""
    documents = [[0, 1, 2], [3, 4], [5]]
    s_bleu = BLEU(tokenize=tokenize).corpus_score(hypotheses, [references]).score
    d_bleu = BLEU(tokenize=tokenize).corpus_score(
        [" ".join(hypotheses[i] for i in doc) for doc in documents],
        [[" ".join(references[i] for i in doc) for doc in documents]],
    ).score
    return s_bleu, d_bleu


def assert_fails(result, *fragments):
    assert result.returncode != 0
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


def test_scores_equal_sacrebleu_on_sorted_sentences_and_joined_documents(tmp_path):
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES), "--json")
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    s_bleu, d_bleu = expected(HYPOTHESES, REFERENCES)
    assert scores["s_bleu"] == pytest.approx(s_bleu)
    assert scores["d_bleu"] == pytest.approx(d_bleu)
    assert s_bleu != pytest.approx(d_bleu)
    assert (scores["sentences"], scores["documents"]) == (6, 3)
    assert scores["signature"] == SIGNATURE


def test_text_output_shows_both_scores_and_the_signature_and_save_json_keeps_the_json_beside_it(tmp_path):
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES), "--save-json", str(tmp_path / "scores.json"))
    assert result.returncode == 0, result.stderr
    s_bleu, d_bleu = expected(HYPOTHESES, REFERENCES)
    assert result.stdout.splitlines() == [
        f"s-BLEU {s_bleu:.2f}  (6 sentences)",
        f"d-BLEU {d_bleu:.2f}  (3 documents)",
        f"signature: {SIGNATURE}",
    ]
    printed = run(tmp_path, generate_output(HYPOTHESES, REFERENCES), "--json")
    assert json.loads((tmp_path / "scores.json").read_text(encoding="utf-8")) == json.loads(printed.stdout)
    refused = run(tmp_path, generate_output(HYPOTHESES, REFERENCES), "--save-json", str(tmp_path / "no" / "s.json"))
    assert refused.returncode == 2 and f"--save-json {tmp_path}/no/s.json: no folder {tmp_path}/no" in refused.stderr


def test_hypothesis_equal_to_reference_scores_100(tmp_path):
    result = run(tmp_path, generate_output(REFERENCES, REFERENCES), "--json")
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    assert scores["s_bleu"] == pytest.approx(100) and scores["d_bleu"] == pytest.approx(100)


def test_h_lines_are_used_when_asked(tmp_path):
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES), "--json",
                 "--hypothesis-lines", "H")
    assert result.returncode == 0, result.stderr
    tokenized = [f"{hypothesis} (tokenized)" for hypothesis in HYPOTHESES]
    assert json.loads(result.stdout)["s_bleu"] == pytest.approx(expected(tokenized, REFERENCES)[0])


def test_tokenized_reference_adds_the_papers_scores(tmp_path, monkeypatch, capsys):
    """BLEU as the paper reports it: the H- lines (the model's tokens) against the tokenized
    reference, subword-nmt joins removed, without sacrebleu's own tokenization (which would
    split the H- lines' parentheses here)."""
    tokenized = [reference.replace(".", " .") for reference in REFERENCES]
    with_bpe = [line.replace("cat", "c@@ at").replace("Markets", "Mark@@ ets") for line in tokenized]
    (tmp_path / "test.tok.de").write_text("\n".join(with_bpe) + "\n", encoding="utf-8")
    hypotheses = [hypothesis.replace(".", " .") for hypothesis in HYPOTHESES]
    generated = generate_output(hypotheses, REFERENCES)
    bpe = ["--tokenized-reference", str(tmp_path / "test.tok.de"), "--post-process", "subword_nmt"]
    result = run_in_this_process(monkeypatch, capsys, tmp_path, generated, "--json", *bpe)
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    h_lines = [f"{hypothesis} (tokenized)" for hypothesis in hypotheses]
    paper = expected(h_lines, tokenized, tokenize="none")
    assert (scores["tokenized"]["s_bleu"], scores["tokenized"]["d_bleu"]) == pytest.approx(paper)
    assert paper[0] != pytest.approx(expected(h_lines, tokenized)[0])
    assert "tok:none" in scores["tokenized"]["signature"]
    assert (scores["s_bleu"], scores["d_bleu"]) == pytest.approx(expected(hypotheses, REFERENCES))

    text = run_in_this_process(monkeypatch, capsys, tmp_path, generated, *bpe).stdout.splitlines()
    assert text[3] == (f"tokenized s-BLEU {paper[0]:.2f}, d-BLEU {paper[1]:.2f}  (as the paper reports: "
                       "tokenized text, BPE removed; not comparable with sacreBLEU scores)")
    assert "tok:none" in text[4]


def in_pieces(line, segmentation):
    """``line`` as BPE ("subword_nmt") or sentencepiece might segment it: words of three letters or
    more split after two, "@@" ending a word's first piece, or "\u2581" beginning every word."""
    words = [word[:2] + " " + word[2:] if len(word) > 2 else word for word in line.split()]
    if segmentation == "subword_nmt":
        return " ".join(word.replace(" ", "@@ ") for word in words)
    return " ".join("\u2581" + word for word in words)


def test_tokenized_reference_of_sentencepiece_data_is_undone_as_post_process_does(tmp_path, monkeypatch, capsys):
    """Data prepared with --spm-model: fairseq-generate --post-process sentencepiece gives H- lines of
    raw text, and the reference's pieces are undone the same way (before, only "@@ " was removed
    and the pieces were scored as they were)."""
    pieces = [in_pieces(reference, "sentencepiece") for reference in REFERENCES]
    (tmp_path / "test.spm.de").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    generated = generate_output(HYPOTHESES, REFERENCES)
    result = run_in_this_process(monkeypatch, capsys, tmp_path, generated, "--json", "--tokenized-reference",
                                 str(tmp_path / "test.spm.de"), "--post-process", "sentencepiece")
    assert result.returncode == 0, result.stderr
    h_lines = [f"{hypothesis} (tokenized)" for hypothesis in HYPOTHESES]
    tokenized = json.loads(result.stdout)["tokenized"]
    assert (tokenized["s_bleu"], tokenized["d_bleu"]) == pytest.approx(expected(h_lines, REFERENCES, tokenize="none"))
    assert tokenized["s_bleu"] > 10


def test_in_pieces_is_undone_by_fairseqs_post_process():
    assert in_pieces(REFERENCES[0], "sentencepiece") == "\u2581Th e \u2581ca t \u2581sa t \u2581on \u2581th e \u2581ma t."
    assert in_pieces(REFERENCES[0], "subword_nmt") == "Th@@ e ca@@ t sa@@ t on th@@ e ma@@ t."
    for segmentation in ("sentencepiece", "subword_nmt"):
        assert [post_process(in_pieces(line, segmentation), segmentation) for line in REFERENCES] == REFERENCES


def test_the_scoring_tools_undo_pieces_as_fairseqs_post_process_does():
    """``subword_pieces.UNDO`` (which spares a scoring process fairseq's import) is fairseq's
    ``post_process``, on pieces, edges of lines and marks inside words alike."""
    lines = [in_pieces(line, segmentation) for line in REFERENCES for segmentation in UNDO]
    lines += ["", " ", "a@@", "a@@  b", "x@@y z", "  \u2581a  \u2581b ", "a\u2581b", "\u2581", "@@ @@"]
    for segmentation, undo in UNDO.items():
        assert [undo(line) for line in lines] == [post_process(line, segmentation) for line in lines], segmentation


def test_undoing_pieces_does_not_import_fairseq():
    """A scoring process undoes pieces without fairseq's import (seconds of CPU): in a fresh process,
    BPE and sentencepiece lines are undone and no fairseq module is loaded."""
    code = ("import sys; from memory_nmt_tools.subword_pieces import without_pieces; "
            "print(without_pieces(['a@@ b c'], 'subword_nmt', str, ''), "
            "without_pieces(['\u2581a b \u2581c'], 'sentencepiece', str, ''), "
            "sorted(name for name in sys.modules if name.split('.')[0] == 'fairseq'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "['ab c'] ['ab c'] []", done.stderr[-2000:]


def line_of(generated, prefix):
    """The line number of fairseq-generate output's line that starts with ``prefix``."""
    return next(number for number, line in enumerate(generated.splitlines(), 1) if line.startswith(prefix))


@pytest.mark.parametrize("in_pieces_side, segmentation, options, message", [
    ("D", "sentencepiece", [], "{gen}:{D-0}: D-0 is in sentencepiece pieces ('{pieces}'): run fairseq-generate "
     "with --post-process sentencepiece, or undo them here with --post-process sentencepiece"),
    ("D", "subword_nmt", [], "{gen}:{D-0}: D-0 is in BPE pieces ('{pieces}'): run fairseq-generate with "
     "--post-process subword_nmt, or undo them here with --post-process subword_nmt"),
    ("D", "sentencepiece", ["--post-process", "subword_nmt"],
     "{gen}:{D-0}: D-0 is in sentencepiece pieces ('{pieces}'), not BPE's: give --post-process sentencepiece"),
    ("H", "sentencepiece", ["--hypothesis-lines", "H"], "{gen}:{H-0}: H-0 is in sentencepiece pieces ('{pieces} "
     "(tokeniz...'): run fairseq-generate with --post-process sentencepiece, or undo them here with --post-process "
     "sentencepiece"),
    ("T", "sentencepiece", [], "{gen}:{T-0}: T-0 is in sentencepiece pieces ('{pieces}'): run fairseq-generate "
     "with --post-process sentencepiece, or undo them here with --post-process sentencepiece"),
    ("reference", "sentencepiece", ["--reference", "{tmp}/ref.de"], "{tmp}/ref.de:1 is in sentencepiece pieces "
     "('{pieces}'): pass the raw reference, not the segmented one, or undo them here with --post-process sentencepiece"),
    ("tokenized reference", "sentencepiece", ["--tokenized-reference", "{tmp}/ref.de", "--post-process", "subword_nmt"],
     "{tmp}/ref.de:1 is in sentencepiece pieces ('{pieces}'), not BPE's: give --post-process sentencepiece"),
    ("tokenized reference", "subword_nmt", ["--tokenized-reference", "{tmp}/ref.de"], "{tmp}/ref.de:1 is in BPE "
     "pieces ('{pieces}'): give --post-process subword_nmt, as to fairseq-generate, to undo them"),
], ids=["D-sentencepiece", "D-bpe", "D-other-post-process", "H", "T", "reference", "tokenized-reference-sentencepiece",
        "tokenized-reference-bpe"])
def test_text_in_subword_pieces_is_refused_naming_its_line_and_the_post_process(
        tmp_path, in_pieces_side, segmentation, options, message):
    """Before, pieces were scored as words (issue 45: the D- lines of fairseq-generate run without
    --post-process sentencepiece scored s-BLEU 18.69 for 5.80); only "@@ " was looked for, and only
    in the H- lines with --tokenized-reference."""
    def side(lines, name):
        return [in_pieces(line, segmentation) for line in lines] if in_pieces_side == name else lines

    hypotheses, references = side(HYPOTHESES, "D"), side(REFERENCES, "T")
    generated = generate_output(hypotheses, references)
    if in_pieces_side == "H":
        generated = generated.replace(f"\t{HYPOTHESES[0]} (tokenized)", f"\t{in_pieces(HYPOTHESES[0], segmentation)} (tokenized)")
    reference = [in_pieces(line, segmentation) for line in REFERENCES] if "reference" in in_pieces_side else REFERENCES
    (tmp_path / "ref.de").write_text("\n".join(reference) + "\n")
    result = run(tmp_path, generated, *(option.format(tmp=tmp_path) for option in options))
    assert_fails(result)
    lines = {f"{kind}-0": line_of(generated, f"{kind}-0\t") for kind in "DHT"}
    first = in_pieces((HYPOTHESES if in_pieces_side in "DH" else REFERENCES)[0], segmentation)
    assert result.stderr == "error: " + message.format(gen=tmp_path / "gen.txt", tmp=tmp_path, pieces=first, **lines) + "\n"


@pytest.mark.parametrize("segmentation", ["sentencepiece", "subword_nmt"])
def test_text_in_subword_pieces_is_undone_with_the_post_process_given(tmp_path, capsys, segmentation):
    """--post-process undoes the pieces fairseq-generate left on every side (D-, T- and, with
    --tokenized-reference, H- lines) and those of a reference file, as fairseq-generate's own
    --post-process would have: the scores are those of the text."""
    hypotheses = [in_pieces(line, segmentation) for line in HYPOTHESES]
    generated = generate_output(hypotheses, [in_pieces(line, segmentation) for line in REFERENCES])
    (tmp_path / "ref.de").write_text("\n".join(in_pieces(line, segmentation) for line in REFERENCES) + "\n")
    h_lines = [post_process(f"{line} (tokenized)", segmentation) for line in hypotheses]  # as fairseq-generate's
    for reference in ([], ["--reference", str(tmp_path / "ref.de")], ["--tokenized-reference", str(tmp_path / "ref.de")]):
        document_bleu.main([*inputs(tmp_path, generated), "--json", "--post-process", segmentation, *reference])
        scores = json.loads(capsys.readouterr().out)  # in this process, which has imported fairseq already
        assert (scores["s_bleu"], scores["d_bleu"]) == pytest.approx(expected(HYPOTHESES, REFERENCES))
        if "--tokenized-reference" in reference:
            tokenized = scores["tokenized"]
            assert (tokenized["s_bleu"], tokenized["d_bleu"]) == pytest.approx(
                expected(h_lines, REFERENCES, tokenize="none"))


def test_a_mark_in_ordinary_text_is_not_taken_for_pieces(tmp_path):
    """A lone "\u2581" or one inside a word, or "@@" inside a word, is text, scored as it is."""
    references = [*REFERENCES[:3], "Press \u2581 to start.", "Bars\u2581\u2582\u2583 rose.", "Mail a@@b now."]
    result = run(tmp_path, generate_output(HYPOTHESES, references), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["s_bleu"] == pytest.approx(expected(HYPOTHESES, references)[0])


def test_tokenized_reference_of_another_length_is_an_error(tmp_path):
    (tmp_path / "test.tok.de").write_text("\n".join(REFERENCES[:4]) + "\n", encoding="utf-8")
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES),
                 "--tokenized-reference", str(tmp_path / "test.tok.de"))
    assert_fails(result, "test.tok.de", "4 lines", "6")


def test_reference_file_replaces_the_t_lines(tmp_path):
    damaged = [reference.replace("e", "<unk>") for reference in REFERENCES]
    (tmp_path / "ref.de").write_text("\n".join(REFERENCES) + "\n", encoding="utf-8")
    result = run(tmp_path, generate_output(REFERENCES, damaged), "--json",
                 "--reference", str(tmp_path / "ref.de"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["s_bleu"] == pytest.approx(100)


def test_reference_file_of_another_length_is_an_error(tmp_path):
    (tmp_path / "ref.de").write_text("\n".join(REFERENCES[:5]) + "\n", encoding="utf-8")
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES),
                 "--reference", str(tmp_path / "ref.de"))
    assert_fails(result, "ref.de", "5 lines", "6")


def test_missing_id_is_an_error(tmp_path):
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES, order=[4, 1, 5, 0, 2]))
    assert_fails(result, "missing ids 3 (1 in all)", "6 sentences", "5 lines",
                 "--required-batch-size-multiple 1")


def test_duplicated_id_is_an_error(tmp_path):
    duplicate = [f"D-2\t-0.4\t{HYPOTHESES[2]}"]
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES, extra=duplicate))
    assert_fails(result, "repeated ids 2 (1 in all)", "7 lines")


def test_id_beyond_the_docids_is_an_error(tmp_path):
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES), docids=DOCIDS[:5])
    assert_fails(result, "ids beyond the docids file 5")


def test_non_contiguous_document_is_an_error(tmp_path):
    docids = ["cats", "markets", "cats", "markets", "markets", "coffee"]
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES), docids=docids)
    assert_fails(result, "test.docids:3", "cats", "contiguous")


def test_output_without_hypotheses_is_an_error(tmp_path):
    result = run(tmp_path, "2024-01-01 10:00:00 | INFO | fairseq_cli.generate | nothing\n")
    assert_fails(result, "gen.txt", "no D- lines")


def test_tokenized_scores_do_not_warn_that_the_text_is_tokenized(caplog):
    """sacrebleu warns when 100 lines end in " ." (a sign of tokenized text given by mistake);
    the tokenized scores are of tokenized text by design."""
    lines = [f"line {i} ." for i in range(120)]
    docids = [str(i // 3) for i in range(120)]
    document_bleu.score_documents(lines, lines, docids)
    assert "forgot to detokenize" in caplog.text
    caplog.clear()
    document_bleu.score_documents(lines, lines, docids, tokenized=True)
    assert "forgot to detokenize" not in caplog.text


def test_score_documents_is_importable():
    scores = document_bleu.score_documents(HYPOTHESES, REFERENCES, DOCIDS)
    assert (scores["s_bleu"], scores["d_bleu"]) == pytest.approx(expected(HYPOTHESES, REFERENCES))
    with pytest.raises(ValueError, match="parallel"):
        document_bleu.score_documents(HYPOTHESES, REFERENCES[:5], DOCIDS)
