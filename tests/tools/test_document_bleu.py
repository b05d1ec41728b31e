"""Tests of scripts/document_bleu.py through its command line, and of score_documents.

A small fake fairseq-generate output (ids out of order, logging lines in between) and its
docids file are written to tmp_path; the scores must equal what sacrebleu gives directly on
the sentences in id order and on the documents joined with spaces.
"""
import json
import subprocess
import sys

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from conftest import REPO
from memory_nmt_tools import document_bleu

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


def run(tmp_path, generate_text, *options, docids=DOCIDS):
    (tmp_path / "gen.txt").write_text(generate_text, encoding="utf-8")
    (tmp_path / "test.docids").write_text("\n".join(docids) + "\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--generate-output", str(tmp_path / "gen.txt"),
         "--docids", str(tmp_path / "test.docids"), *options],
        capture_output=True, text=True,
    )


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


def test_text_output_shows_both_scores_and_the_signature(tmp_path):
    result = run(tmp_path, generate_output(HYPOTHESES, REFERENCES))
    assert result.returncode == 0, result.stderr
    s_bleu, d_bleu = expected(HYPOTHESES, REFERENCES)
    assert result.stdout.splitlines() == [
        f"s-BLEU {s_bleu:.2f}  (6 sentences)",
        f"d-BLEU {d_bleu:.2f}  (3 documents)",
        f"signature: {SIGNATURE}",
    ]


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


def test_tokenized_reference_adds_the_papers_scores(tmp_path):
    """BLEU as the paper reports it: the H- lines (the model's tokens) against the tokenized
    reference, subword-nmt joins removed, without sacrebleu's own tokenization (which would
    split the H- lines' parentheses here)."""
    tokenized = [reference.replace(".", " .") for reference in REFERENCES]
    with_bpe = [line.replace("cat", "c@@ at").replace("Markets", "Mark@@ ets") for line in tokenized]
    (tmp_path / "test.tok.de").write_text("\n".join(with_bpe) + "\n", encoding="utf-8")
    hypotheses = [hypothesis.replace(".", " .") for hypothesis in HYPOTHESES]
    generated = generate_output(hypotheses, REFERENCES)
    result = run(tmp_path, generated, "--json", "--tokenized-reference", str(tmp_path / "test.tok.de"))
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    h_lines = [f"{hypothesis} (tokenized)" for hypothesis in hypotheses]
    paper = expected(h_lines, tokenized, tokenize="none")
    assert (scores["tokenized"]["s_bleu"], scores["tokenized"]["d_bleu"]) == pytest.approx(paper)
    assert paper[0] != pytest.approx(expected(h_lines, tokenized)[0])
    assert "tok:none" in scores["tokenized"]["signature"]
    assert (scores["s_bleu"], scores["d_bleu"]) == pytest.approx(expected(hypotheses, REFERENCES))

    text = run(tmp_path, generated, "--tokenized-reference", str(tmp_path / "test.tok.de")).stdout.splitlines()
    assert text[3] == (f"tokenized s-BLEU {paper[0]:.2f}, d-BLEU {paper[1]:.2f}  (as the paper reports: "
                       "tokenized text, BPE removed; not comparable with sacreBLEU scores)")
    assert "tok:none" in text[4]


def sentencepiece_pieces(line):
    """line as a sentencepiece model might segment it: "\u2581" before each word, some words split."""
    return "\u2581" + line.replace(" ", " \u2581").replace("at", " at").replace("ee", "e e")


def test_tokenized_reference_of_sentencepiece_data_is_undone_as_post_process_does(tmp_path):
    """Data prepared with --spm-model: fairseq-generate --post-process sentencepiece gives H- lines of
    raw text, and the reference's pieces are undone the same way (before, only "@@ " was removed
    and the pieces were scored as they were)."""
    pieces = [sentencepiece_pieces(reference) for reference in REFERENCES]
    (tmp_path / "test.spm.de").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    generated = generate_output(HYPOTHESES, REFERENCES)
    result = run(tmp_path, generated, "--json", "--tokenized-reference", str(tmp_path / "test.spm.de"),
                 "--post-process", "sentencepiece")
    assert result.returncode == 0, result.stderr
    h_lines = [f"{hypothesis} (tokenized)" for hypothesis in HYPOTHESES]
    tokenized = json.loads(result.stdout)["tokenized"]
    assert (tokenized["s_bleu"], tokenized["d_bleu"]) == pytest.approx(expected(h_lines, REFERENCES, tokenize="none"))
    assert tokenized["s_bleu"] > 10


@pytest.mark.parametrize("subwords, h_line", [("subword_nmt", "The c@@ at sat ."), ("sentencepiece", "\u2581The \u2581cat")])
def test_h_lines_with_their_subwords_left_in_are_an_error(tmp_path, subwords, h_line):
    """The H- lines are taken as fairseq-generate's --post-process left them: subwords still in
    them mean it was run without it (or with another one)."""
    hypotheses = HYPOTHESES[:3] + [h_line] + HYPOTHESES[4:]
    (tmp_path / "test.tok.de").write_text("\n".join(REFERENCES) + "\n", encoding="utf-8")
    result = run(tmp_path, generate_output(hypotheses, REFERENCES), "--tokenized-reference",
                 str(tmp_path / "test.tok.de"), "--post-process", subwords)
    assert_fails(result, "gen.txt: H-3 still holds the subword mark", f"--post-process {subwords}")


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
