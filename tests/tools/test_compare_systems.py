"""scripts/compare_systems.py: one table of systems decoded on the same documents, its figures those
of the stock tools (fairseq-generate, document_bleu.py, contrastive_eval.py, context_usage.py's
CXMI) run on their own."""
import io
import json
import re
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from fairseq.data.data_utils import post_process

from commands import run_command
from conftest import AMN, REPO, build, save_checkpoint, script_in_process
from memory_nmt.evaluation import contrastive
from memory_nmt_tools import (
    compare_systems,
    comparison_steps,
    context_usage,
    contrastive_eval,
    prepare_documents,
    synthetic_documents,
)
from memory_nmt_tools.benchmarks.peak_memory import MiB
from memory_nmt_tools.text_files import TextFileError

SCRIPT = REPO / "scripts" / "compare_systems.py"
SET_FIGURES = {"peak_bytes": 3 * MiB, "seconds_per_sentence": 0.002}  # the fixture's 7-sentence documents'


def write_items(items):
    """The test documents' context words, as the data_bin fixture made them, as contrastive items."""
    documents = synthetic_documents.generate_documents(6, seed=3, min_sentences=2, max_sentences=6)
    items.write_text(json.dumps(synthetic_documents.contrastive_items(documents)))
    return items


@pytest.fixture(scope="module")
def compared(data_bin, sentence_checkpoint, concat_checkpoint, tmp_path_factory):
    """The comparison of the sentence and the concatenation models, its command line run in this
    process (fairseq-generate and each 3-sentence document measured in fresh processes, as it runs
    them; the 7-sentence documents' figures set, ``SET_FIGURES``: two fairseq imports fewer):
    (its folder, the contrastive items, what it printed, its --json)."""
    root = tmp_path_factory.mktemp("compare")
    items = write_items(root / "items.json")
    printed = io.StringIO()
    measure = comparison_steps.measure_in_subprocess
    with redirect_stdout(printed), pytest.MonkeyPatch.context() as patch:
        patch.setattr(comparison_steps, "measure_in_subprocess", lambda args, name, path, length, workdir: (
            measure(args, name, path, length, workdir) if length == 3 else SET_FIGURES))
        compare_systems.main([
            "--data", str(data_bin), "--system", f"sentence={sentence_checkpoint}",
            "--system", f"concat={concat_checkpoint}", "--beam", "2", "--max-tokens", "200",
            "--generate-args", "--max-len-b 10", "--contrastive", "voita", str(items), "--lengths", "3,7",
            "--cpu", "--workdir", str(root / "work"), "--json", str(root / "results.json"),
            "--plot", str(root / "compare.png"),
        ])
    return root, items, printed.getvalue(), json.loads((root / "results.json").read_text())


def test_one_row_per_system_with_every_column(compared):
    _, _, stdout, _ = compared
    header = next(line for line in stdout.splitlines() if line.startswith("system"))
    for column in ("s-BLEU", "d-BLEU", "CXMI", "ctx all", "d=1", "sent/s", "MiB@3", "MiB@7", "ms/sent@7"):
        assert column in header
    rows = [line.split()[0] for line in stdout.splitlines()[stdout.splitlines().index(header) + 2:] if line.strip()]
    assert rows[:2] == ["sentence", "concat"]
    _, second = [line for line in stdout.splitlines() if line.startswith("system")]
    assert "CXMI all" in second and "d=1" in second
    assert "sacrebleu: nrefs:1" in stdout and "bits per token" in stdout


def test_figures_are_those_of_the_stock_tools(compared, data_bin, monkeypatch, capsys):
    """Each tool's command line run on its own, in this process."""
    root, items, _, results = compared

    def printed(script, *arguments):
        done = script_in_process(monkeypatch, capsys, REPO / "scripts" / script, *arguments)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    for name, path in (("sentence", results["systems"]["sentence"]["checkpoint"]),
                       ("concat", results["systems"]["concat"]["checkpoint"])):
        figures = results["systems"][name]
        output = "".join((root / "work" / f"generate-{name}.{kind}").read_text() for kind in ("txt", "log"))
        speed = re.search(r"Translated [\d,]+ sentences .* \(([\d.]+) sentences/s", output)
        assert figures["sentences_per_second"] == float(speed[1])
        bleu = printed("document_bleu.py", "--json", "--generate-output", str(root / "work" / f"generate-{name}.txt"),
                       "--docids", str(data_bin / "test.en-de.docids"))
        assert (figures["s_bleu"], figures["d_bleu"]) == (bleu["s_bleu"], bleu["d_bleu"])
        alone = printed("contrastive_eval.py", "--json", "--cpu", "--path", path, "--data", str(data_bin),
                        "--format", "voita", str(items))
        (accuracy,) = alone.values()
        assert {k: v for k, v in figures["contrastive"].items()} == {
            k: [v["right"], v["total"]] for k, v in accuracy.items()
        }
        alone = context_usage.split_cxmi(path, data_bin, "test", root / "cxmi", max_tokens=200)
        assert figures["cxmi"] == alone
        model, task, _ = contrastive_eval.load(path, data_bin, use_cuda=False)
        _, on_items = context_usage.contrastive_context_use(model, task, contrastive.read_voita_json(str(items)))
        assert figures["contrastive_cxmi"] == on_items
        measured = figures["long_documents"]["3"]
        assert measured != SET_FIGURES and measured["peak_bytes"] > 0 and measured["seconds_per_sentence"] > 0
        assert figures["long_documents"]["7"] == SET_FIGURES
    assert abs(results["systems"]["sentence"]["cxmi"]["bits_per_token"]) < 1e-6
    assert (root / "compare.png").stat().st_size > 10000


def test_bad_system_is_refused_by_name(data_bin, tmp_path):
    done = run_command([sys.executable, str(SCRIPT), "--data", str(data_bin), "--system", "nonsense"])
    assert done.returncode == 2 and "give NAME=CHECKPOINT" in done.stderr
    missing = tmp_path / "none.pt"
    done = run_command([sys.executable, str(SCRIPT), "--data", str(data_bin), "--system", f"a={missing}"])
    assert done.returncode == 2 and f"no checkpoint file {missing}" in done.stderr


def test_model_overrides_reach_their_system_only(data_bin, tmp_path):
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"")
    args = compare_systems.parse_args([
        "--data", str(data_bin), "--system", f"lg={checkpoint}", "--system", f"lg-5={checkpoint}",
        "--model-overrides", "lg-5={'chunk_sentences': 5}",
    ])
    assert "--model-overrides" not in comparison_steps.decoding_options(args, "lg", str(checkpoint))
    options = comparison_steps.decoding_options(args, "lg-5", str(checkpoint))
    assert options[options.index("--model-overrides") + 1] == "{'chunk_sentences': 5}"
    for wrong, message in (("lg-5=chunk", "give NAME=DICT"), ("other={'a': 1}", "no --system is named other")):
        done = run_command([sys.executable, str(SCRIPT), "--data", str(data_bin), "--system", f"lg-5={checkpoint}",
                            "--model-overrides", wrong])
        assert done.returncode == 2 and message in done.stderr


@pytest.mark.parametrize("arguments, message", [
    (["--contrastive", "voita", "{tmp}/missing.json"], "--contrastive: cannot read {tmp}/missing.json"),
    (["--contrastive", "voita"], "--contrastive voita: give a format and its files"),
    (["--contrastive", "voita", "{tmp}/bad.json"], "entry 0: 'true_ind' is a str"),
    (["--gen-subset", "nosuch"], "--gen-subset nosuch: {data} holds no split 'nosuch' (it holds: test, train, "
                                 "valid); give --gen-subset one of those"),  # was: "found 0 docids; give --docids"
    (["--reference", "{tmp}/missing.de"], "--reference {tmp}/missing.de: no such file"),
    ([], "a: {tmp}/checkpoint.pt: cannot be read as a checkpoint (EOFError: the file ends before a checkpoint does)"),
], ids=["contrastive-file", "contrastive-format", "contrastive-item", "docids", "reference", "checkpoint"])
def test_inputs_are_checked_before_the_first_system_is_translated(data_bin, tmp_path, capsys, arguments, message):
    """Each of these failed only after the first system had been translated. The checkpoint
    here is not one: translating anything would fail on it first, and the systems' check (the
    last case) fails on it after the other inputs."""
    (tmp_path / "checkpoint.pt").write_bytes(b"")
    (tmp_path / "bad.json").write_text(json.dumps([{"src": "a", "dst": ["b", "c"], "true_ind": "0"}]))
    with pytest.raises(SystemExit) as refused:
        compare_systems.main(["--data", str(data_bin), "--system", f"a={tmp_path}/checkpoint.pt", "--cpu",
                              *(argument.format(tmp=tmp_path) for argument in arguments)])
    assert message.format(tmp=tmp_path, data=data_bin) in f"{refused.value.code} {capsys.readouterr().err}"


@pytest.fixture
def nothing_translated(monkeypatch, tmp_path):
    """A checkpoint file, a data folder and a docids file; translating anything fails the test."""
    def translate(*args):
        raise AssertionError("a system was translated before the paths were checked")

    monkeypatch.setattr(comparison_steps, "translate", translate)
    (tmp_path / "checkpoint.pt").write_bytes(b"")
    (tmp_path / "data").mkdir()
    (tmp_path / "test.docids").write_text("d1\nd1\n")
    return ["--system", f"a={tmp_path}/checkpoint.pt", "--docids", f"{tmp_path}/test.docids", "--cpu"]


@pytest.mark.parametrize("arguments, message", [
    (["--data", "{tmp}/missing"], "--data {tmp}/missing: no such directory; give the binarized data"),
    (["--json", "{tmp}/nodir/x.json"], "--json {tmp}/nodir/x.json: no folder {tmp}/nodir; create it first"),
    (["--plot", "{tmp}/nodir/x.png"], "--plot {tmp}/nodir/x.png: no folder {tmp}/nodir; create it first"),
    (["--plot", "{tmp}/compare.pgn"], "--plot {tmp}/compare.pgn: matplotlib cannot write .pgn files"),
    (["--workdir", "{tmp}/checkpoint.pt"], "--workdir {tmp}/checkpoint.pt: is a file, not a directory"),
    (["--system", "a/b={tmp}/checkpoint.pt"], "argument --system: 'a/b={tmp}/checkpoint.pt': the name a/b names "
                                              "files in WORKDIR (generate-a/b.txt); give a name without '/'"),
], ids=["data", "json", "plot-folder", "plot-format", "workdir", "system-name"])
def test_paths_and_names_are_checked_before_the_first_system_is_translated(
        nothing_translated, tmp_path, capsys, arguments, message):
    """A missing --data was found by fairseq-generate (its log in a temporary folder already
    deleted), a --json or --plot folder only after the whole comparison had run, a system name
    with a '/' only when its output was written."""
    arguments = ["--data", f"{tmp_path}/data", *nothing_translated, *arguments]
    with pytest.raises(SystemExit) as refused:
        compare_systems.main([argument.format(tmp=tmp_path) for argument in arguments])
    assert refused.value.code == 2
    assert f"error: {message.format(tmp=tmp_path)}" in capsys.readouterr().err


SPM_ITEMS = [{"src": "The lower house passed. _eos She passed it!", "dst": [
    "Das Unterhaus ging. _eos Sie ging vorbei!", "Das Unterhaus ging. _eos Er ging vorbei!"], "true_ind": 0}]


def test_contrastive_text_is_segmented_with_the_spm_model(nothing_translated, tmp_path, spm_model, monkeypatch):
    """--spm-model reaches contrastive_eval.py: each system scores the items in the pieces
    prepare_documents.py --spm-model gives their raw sentences."""
    def contrastive_context_use(model, task, items, **kwargs):
        scored.extend(items)
        return [[0.0, -1.0] for _ in items], {}

    scored = []
    monkeypatch.setattr(contrastive_eval, "load", lambda *args: (None, SimpleNamespace(
        cfg=SimpleNamespace(source_lang="en", target_lang="de")), "transformer"))
    monkeypatch.setattr(context_usage, "contrastive_context_use", contrastive_context_use)
    (tmp_path / "items.json").write_text(json.dumps(SPM_ITEMS))
    args = compare_systems.parse_args(["--data", f"{tmp_path}/data", *nothing_translated, "--contrastive", "voita",
                                       f"{tmp_path}/items.json", "--spm-model", str(spm_model)])
    items, segment = comparison_steps.contrastive_items(args)
    accuracy, _ = comparison_steps.contrastive_scores(args, "a", f"{tmp_path}/checkpoint.pt", items, segment, False)
    assert accuracy == {"all": (1, 1)}
    (item,) = items
    model = prepare_documents.load_sentencepiece(spm_model)
    pieces = prepare_documents.apply_sentencepiece([*item.context_source, item.source], model)
    pieces_de = prepare_documents.apply_sentencepiece([*item.context_target, *item.candidates], model)
    assert scored == [replace(item, context_source=pieces[:1], source=pieces[1], context_target=pieces_de[:1],
                              candidates=pieces_de[1:])]
    raw = [*item.context_source, item.source, *item.context_target, *item.candidates]
    assert all(piece != sentence and post_process(piece, "sentencepiece") == sentence
               for piece, sentence in zip(pieces + pieces_de, raw))


@pytest.mark.parametrize("options", [["--moses"], ["--bpe-codes", "{tmp}/checkpoint.pt"]], ids=["moses", "bpe-codes"])
def test_spm_model_refuses_moses_and_bpe(nothing_translated, tmp_path, spm_model, capsys, options):
    """The pretrained model's pieces are made from raw text, as prepare_documents.py refuses too."""
    with pytest.raises(SystemExit) as refused:
        compare_systems.main(["--data", f"{tmp_path}/data", *nothing_translated, "--spm-model", str(spm_model),
                              *(option.format(tmp=tmp_path) for option in options)])
    assert refused.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: --spm-model segments raw text with the pretrained model's own pieces: "
        "leave out --moses and --bpe-codes\n")


@pytest.mark.parametrize("model, message", [
    ("sentence.bpe.model", "no such file; pass the sentencepiece model of the pretrained checkpoint"),
    ("checkpoint.pt", "cannot load it"),
])
def test_a_bad_spm_model_is_named_before_the_first_system_is_translated(nothing_translated, tmp_path, model, message):
    """The error prepare_documents.py gives, before anything is translated."""
    (tmp_path / "items.json").write_text(json.dumps(SPM_ITEMS))
    with pytest.raises(SystemExit, match=re.escape(f"error: --spm-model {tmp_path / model}: {message}")):
        compare_systems.main(["--data", f"{tmp_path}/data", *nothing_translated, "--contrastive", "voita",
                              f"{tmp_path}/items.json", "--spm-model", str(tmp_path / model)])


class Translated(Exception):
    """Raised where a system would be translated: every check before it has passed."""


@pytest.mark.parametrize("options, message", [
    ([], "spm: its target dictionary holds sentencepiece pieces, which fairseq-generate would leave in its "
         "translations: add --post-process sentencepiece to --generate-args"),
    (["--generate-args", "--post-process subword_nmt"], "spm: its target dictionary holds sentencepiece pieces, which "
     "fairseq-generate would leave in its translations: add --post-process sentencepiece to --generate-args"),
    (["--generate-args", "--post-process sentencepiece", "--contrastive", "voita", "{tmp}/items.json"],
     "spm: {checkpoint}: its dictionary holds sentencepiece pieces but the items are not in them ({tmp}/items.json: "
     "entry 0), so it would read their words as <unk>: give --spm-model, the sentencepiece model its data was "
     "segmented with"),
    (["--generate-args", "--post-process sentencepiece", "--contrastive", "voita", "{tmp}/items.json",
      "--spm-model", "{model}"], None),
    (["--generate-args", "--bpe sentencepiece --sentencepiece-model {model}"], None),
], ids=["no-post-process", "another-post-process", "contrastive-without-spm-model", "both", "bpe"])
def test_a_sentencepiece_checkpoint_needs_its_post_process_and_spm_model_before_anything_is_translated(
        spm_checkpoint, tmp_path, monkeypatch, options, message):
    """Before, its translations were scored in pieces and its contrastive items read as <unk>, the
    comparison ending without a word. None: the checks pass and the system is translated."""
    def translate(*args):
        raise Translated

    checkpoint, data, model = spm_checkpoint
    monkeypatch.setattr(comparison_steps, "translate", translate)
    (tmp_path / "items.json").write_text(json.dumps(SPM_ITEMS))
    names = dict(tmp=tmp_path, checkpoint=checkpoint, model=model)
    command = ["--data", str(data), "--system", f"spm={checkpoint}", "--cpu", *(o.format(**names) for o in options)]
    if message is None:
        with pytest.raises(Translated):
            compare_systems.main(command)
        return
    with pytest.raises(SystemExit) as refused:
        compare_systems.main(command)
    assert refused.value.code == f"error: {message.format(**names)}"


def test_translations_in_pieces_are_refused_naming_generate_args(spm_checkpoint, tmp_path, monkeypatch):
    """What fairseq-generate printed is read as document_bleu.py reads it: pieces left in it are
    refused, naming the option of compare_systems.py that undoes them."""
    def fairseq_generate(command, **kwargs):
        score = {"T": "", "H": "-0.5\t", "D": "-0.5\t"}  # the T- lines have none
        lines = [f"{kind}-{i}\t{score[kind]}\u2581da s \u2581haus" for i in range(9) for kind in "THD"]
        return subprocess.CompletedProcess(command, 0, stdout="\n".join(lines) + "\n",
                                           stderr="Translated 9 sentences (27 tokens) in 0.1s (90.00 sentences/s")

    checkpoint, data, _ = spm_checkpoint
    monkeypatch.setattr(comparison_steps.subprocess, "run", fairseq_generate)
    args = compare_systems.parse_args(["--data", str(data), "--system", f"spm={checkpoint}", "--cpu"])
    docids = comparison_steps.read_docids(data / "test.en-de.docids")
    with pytest.raises(TextFileError) as refused:
        comparison_steps.translate(args, "spm", str(checkpoint), tmp_path, docids)
    assert str(refused.value) == (f"{tmp_path}/generate-spm.txt:3: D-0 is in sentencepiece pieces ('\u2581da s "
                                  "\u2581haus'): add --post-process sentencepiece to --generate-args")


@pytest.mark.parametrize("stderr, error", [
    ("Traceback (most recent call last):\n  ...\nRuntimeError: boom\n", "RuntimeError: boom"),
    ("{'_name': None, 'common': {" + "'x': 0, " * 500 + "}}\ngenerate.py: error: --path a.pt: no such file\n",
     "generate.py: error: --path a.pt: no such file"),  # the error began in the cut-off config fairseq logs
], ids=["traceback", "one-line error"])
def test_a_failed_step_is_named_on_one_line_pointing_at_a_log_that_is_kept(monkeypatch, tmp_path, data_bin,
                                                                           sentence_checkpoint, stderr, error):
    """Without --workdir, the outputs go to a temporary folder; it was deleted before the error
    that named the failed fairseq-generate's log in it was printed. The error is one line: the last
    the step printed, which the log holds with the rest."""
    def fairseq_generate(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, stdout="", stderr=stderr)

    monkeypatch.setattr(comparison_steps.subprocess, "run", fairseq_generate)
    monkeypatch.setattr(comparison_steps.tempfile, "tempdir", str(tmp_path))  # the kept folder goes here
    with pytest.raises(SystemExit) as failed:
        compare_systems.main(["--data", str(data_bin), "--system", f"a={sentence_checkpoint}", "--cpu"])
    log = re.search(r"its log: (\S+)\)$", str(failed.value.code))[1]
    assert str(failed.value.code) == f"error: a: fairseq-generate failed: {error} (its log: {log})"
    assert log.startswith(f"{tmp_path}/compare_systems-") and open(log).read() == stderr


@pytest.fixture(scope="module")
def what_a_user_sees(data_bin, tmp_path_factory):
    """The lines each situation of ``test_what_a_new_user_hits`` prints (a function of the situation,
    each run once), paths relative to its folder:

    - "refused": the command line refused while parsed (stderr), ``arguments`` added;
    - "one document": random context (r) on a split of one document (stdout, then the error);
    - "run": r, n (--context-choice next) and x (n's copy) compared with contrastive items and
      --lengths 3, n's checkpoint removed after its CXMI on the split, before its document is
      measured (stdout, then the error): x is never measured;
    - "run json": that run's --json: whether complete, its error, each system's figures
      (the names of those it holds).

    r and n are associated memories whose data chooses their context sentences, untrained (n's
    checkpoint in the folder, which the run removes)."""
    root = tmp_path_factory.mktemp("what_a_user_sees")
    random_checkpoint = root / "random.pt"
    for choice, path in (("random", random_checkpoint), ("next", root / "next.pt")):
        _, model, _, cfg = build(data_bin, *AMN, "--context-choice", choice)
        save_checkpoint(model, cfg, path)
    one_document = root / "one-document"
    one_document.mkdir()
    for path in data_bin.iterdir():
        (one_document / path.name).symlink_to(path)
    sentences = len((data_bin / "test.en-de.docids").read_text().split())
    (one_document / "test.en-de.docids").unlink()
    (one_document / "test.en-de.docids").write_text("talk\n" * sentences)
    write_items(root / "items.json")
    shutil.copy(root / "next.pt", root / "spare.pt")
    seen = {}

    def in_process(arguments, checkpoint_gone=None):
        split_cxmi = comparison_steps.split_cxmi

        def removing_after_cxmi(args, name, path, *rest):
            measured = split_cxmi(args, name, path, *rest)
            if name == checkpoint_gone:
                Path(path).unlink()
            return measured

        printed = io.StringIO()
        with pytest.MonkeyPatch.context() as patch, redirect_stdout(printed), pytest.raises(SystemExit) as stopped:
            patch.chdir(root)
            patch.setattr(comparison_steps, "split_cxmi", removing_after_cxmi)
            compare_systems.main(arguments)
        return printed.getvalue().splitlines() + str(stopped.value.code).splitlines()

    def lines(situation, arguments):
        if situation == "refused":
            done = run_command([sys.executable, str(SCRIPT), "--data", str(data_bin), "--system",
                                f"r={random_checkpoint}", *arguments])
            assert done.returncode == 2
            return done.stderr.splitlines()
        if situation == "one document" and situation not in seen:
            seen[situation] = in_process(["--data", "one-document", "--system", f"r={random_checkpoint}", "--cpu"])
        if situation.startswith("run") and situation not in seen:
            seen["run"] = in_process([
                "--data", str(data_bin), "--system", f"r={random_checkpoint}", "--system", "n=next.pt", "--system",
                "x=spare.pt",
                "--beam", "2", "--max-tokens", "200", "--generate-args", "--max-len-b 10",
                "--contrastive", "voita", "items.json", "--lengths", "3", "--cpu", "--workdir", "work",
                "--json", "results.json",
            ], checkpoint_gone="n")
            saved = json.loads((root / "results.json").read_text())
            seen["run json"] = [f"complete: {saved['complete']}", f"error: {saved['error']}"] + [
                f"{name}: {' '.join(sorted(key for key, figure in figures.items() if figure not in (None, {})))}"
                for name, figures in saved["systems"].items()
            ]
        return seen[situation]

    return lines


BLEU, FIGURE, BITS = r"\s+\d+\.\d\d", r"\s+\d+\.\d", r"\s+-?\d+\.\d{4}"  # cells of the table
GONE = ("error: n: its checkpoint next.pt is gone (it was there when the comparison began): put it back, and run "
        "the comparison again")
LENGTHS_REFUSED = ("compare_systems.py: error: argument --lengths: {!r}: give numbers of sentences (1 or more, each "
                   "once) separated by commas, e.g. 10,100,1000")


@pytest.mark.parametrize("situation, arguments, line", [
    *[("refused", ["--lengths", lengths], re.escape(LENGTHS_REFUSED.format(lengths)))
      for lengths in ("", ",", "10,,100", "100,10,100", "0")],
    ("refused", ["--beam", "0"], re.escape("compare_systems.py: error: argument --beam: '0': give a whole number, "
                                           "1 or more")),
    ("one document", [], re.escape(
        "error: r: --context-choice random reads sentences of the split's other documents, but the split 'test' "
        "(one-document/test.en-de.docids) has one document, 'talk': give the split several documents (one document "
        "id per sentence line), or use --context-choice previous or next")),
    ("run", [], "r" + BLEU + BLEU + r"\s+n/a\s+n/a" + FIGURE + FIGURE + FIGURE),
    ("run", [], re.escape(
        "r: no CXMI on the split: it reads random sentences of other documents (--context-choice random), and would "
        "read them still without its context: in the split's copy without context every other sentence is another "
        "document")),
    ("run", [], "n" + BLEU + BLEU + BITS + r"\s+n/a" + FIGURE + r"\s+-\s+-"),
    ("run", [], re.escape(
        "n: no contrastive scores: it reads the next sentences of its document (--context-choice next), which a "
        "contrastive item does not have")),
    ("run", [], re.escape("stopped by the error below: '-' was not measured, nor was x; every figure above is in "
                          "results.json")),  # was: "'-' was not measured", and x was not in the table
    ("run", [], re.escape(GONE)),  # was: a traceback of the process that measured the document
    ("run json", [], "complete: False"),
    ("run json", [], re.escape(GONE)),  # the error's one line (was: the cut-off end of what the process printed)
    ("run json", [], "r: checkpoint d_bleu documents generate_output long_documents not_measured s_bleu sentences "
                     "sentences_per_second signature"),
    ("run json", [], "n: checkpoint cxmi d_bleu documents generate_output not_measured s_bleu sentences "
                     "sentences_per_second signature"),
], ids=["lengths-empty", "lengths-comma", "lengths-gap", "lengths-twice", "lengths-0", "beam-0", "random-one-document",
        "random-measured", "random-no-cxmi", "next-no-contrastive", "next-why", "partial-table", "partial-error",
        "partial-json-incomplete", "partial-json-error", "partial-json-random", "partial-json-next"])
def test_what_a_new_user_hits(what_a_user_sees, situation, arguments, line):
    """Issue 34's first item, the lines a user sees. An empty --lengths was accepted and failed in
    the table at the end (IndexError); the random-context model failed its documents' measurement
    on the warm-up document ("the split 'warm-up' has one document"), and the next-context model
    the contrastive items, unnamed, after every system was measured; a step that failed lost the
    figures measured before it. Now: bad values refused while parsed; what these models cannot be
    measured on n/a with the reason, the rest measured (the random model's documents draw their
    context from the split); a failure prints the table so far and keeps it in --json."""
    lines = what_a_user_sees(situation, arguments)
    assert any(re.fullmatch(line, printed) for printed in lines), "\n".join(lines)
