"""memory_nmt_tools.paths: the one check of a command's paths, before it starts work; each message
names the option, the path and what to give."""
import argparse

import pytest

from memory_nmt_tools import paths
from memory_nmt_tools.paths import PathError


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a.pt").write_bytes(b"")
    (tmp_path / "data").mkdir()
    return tmp_path


@pytest.mark.parametrize("given, kind, message", [
    ("missing.pt", "file", "--path {tmp}/missing.pt: no such file; give a checkpoint"),
    ("data", "file", "--path {tmp}/data: is a directory, not a file; give a checkpoint"),
    ("missing", "directory", "--path {tmp}/missing: no such directory; give a checkpoint"),
    ("a.pt", "directory", "--path {tmp}/a.pt: not a directory; give a checkpoint"),
])
def test_an_input_must_exist_as_what_it_is(files, given, kind, message):
    with pytest.raises(PathError) as refused:
        paths.check_input("--path", files / given, kind, "a checkpoint")
    assert str(refused.value) == message.format(tmp=files)


def test_a_good_input_or_none_passes(files):
    paths.check_input("--path", files / "a.pt", "file", "a checkpoint")
    paths.check_input("--data", files / "data", "directory", "the data")
    paths.check_input("--data", None, "directory", "the data")


def test_an_output_needs_its_folder(files):
    with pytest.raises(PathError, match="^--json .*/nodir/x.json: no folder .*/nodir; create it first"):
        paths.check_output("--json", files / "nodir" / "x.json")
    with pytest.raises(PathError, match="^--json .*/data: is a directory; give a file name"):
        paths.check_output("--json", files / "data")
    paths.check_output("--json", files / "a.pt")  # an existing file is replaced
    paths.check_output("--json", files / "work" / "x.json", created=[files / "work"])


def test_a_plot_needs_a_format_matplotlib_writes(files):
    with pytest.raises(PathError, match=r"^--plot .*/out\.pgn: matplotlib cannot write \.pgn files; give a name ending in .*\.png"):
        paths.check_plot("--plot", files / "out.pgn")
    for name in ("out.png", "out.PDF", "out"):
        paths.check_plot("--plot", files / name)


def test_a_workdir_is_created_unless_it_is_a_file(files):
    paths.make_workdir("--workdir", files / "new" / "work")
    assert (files / "new" / "work").is_dir()
    with pytest.raises(PathError, match="^--workdir .*/a.pt: is a file, not a directory"):
        paths.make_workdir("--workdir", files / "a.pt")
    with pytest.raises(PathError, match=r"^--workdir .*/a.pt/work: cannot create it \(Not a directory\)"):
        paths.make_workdir("--workdir", files / "a.pt" / "work")


def test_check_paths_reports_through_the_parser_and_creates_nothing_when_refused(files, capsys):
    parser = argparse.ArgumentParser(prog="tool")
    with pytest.raises(SystemExit) as refused:
        paths.check_paths(parser, inputs=[("--path", files / "a.pt", "file", "a checkpoint")],
                          outputs=[("--json", files / "nodir" / "x.json")], workdirs=[("--workdir", files / "work")])
    assert refused.value.code == 2
    assert capsys.readouterr().err.endswith(f"tool: error: --json {files}/nodir/x.json: no folder {files}/nodir; "
                                            "create it first or give a path in an existing folder\n")
    assert not (files / "work").exists()
    paths.check_paths(parser, outputs=[("--json", files / "work" / "x.json")], workdirs=[("--workdir", files / "work")])
    assert (files / "work").is_dir()
