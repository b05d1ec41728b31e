"""What the recipes' tests share: running a recipe (examples/recipes/*.sh) as a user does, and the
real documents of ../shared/data they run on (tests skipped where it is absent)."""
import os
import subprocess

import pytest

from commands import served_python
from conftest import REPO

RECIPES = REPO / "examples" / "recipes"
DATA = REPO.parent / "shared" / "data" / "docmt-en-de"
SELECTIVE_ATTN = DATA / "selective-attn"

needs_shared_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent")


def run_recipe(script, work, *args, **env):
    """Run a recipe with the Python that runs the tests (PYTHON: python3 would go through a version
    manager's shim, if any, at every step), its Python commands run by a command server
    (``commands.served_python``, started as the recipe's commands start: common.sh exports
    PYTHONUNBUFFERED=1); return its combined output, failing the test with it if it fails."""
    environment = {**os.environ, "WORK_DIR": str(work), "OMP_NUM_THREADS": "1",
                   **{key: str(value) for key, value in env.items()}}
    with served_python({**environment, "PYTHONUNBUFFERED": "1"}) as python:
        result = subprocess.run(["bash", str(RECIPES / script), *args], env={**environment, "PYTHON": python},
                                cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def text_lines(path):
    """The lines of a text file, split at "\\n" only (the corpora hold \\x0b, \\x0c, \\x85)."""
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def first_documents(path, count, destination):
    """Copy the first ``count`` <d>-marked documents of path to destination."""
    lines = text_lines(path)
    starts = [i for i, line in enumerate(lines) if line.strip() == "<d>"]
    destination.write_text("\n".join(lines[:starts[count]]) + "\n", encoding="utf-8")


def news_documents(directory, file_name, valid="valid"):
    """The first documents of News Commentary's dev split in ``directory`` (created): 4 to train on, 2
    to validate (split ``valid``) and 2 to test, in files named ``file_name(split, lang)``."""
    directory.mkdir()
    for lang in ("en", "de"):
        dev = SELECTIVE_ATTN / "NC-2016" / f"concatenated_en2de_dev_{lang}.txt"
        for split, count in (("train", 4), (valid, 2), ("test", 2)):
            first_documents(dev, count, directory / file_name(split, lang))


def last_checkpoint(work, name):
    import torch

    return torch.load(work / "checkpoints" / name / "checkpoint_last.pt", weights_only=False)
