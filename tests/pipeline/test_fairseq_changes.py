"""What importing the plugin changes in fairseq, torch and Python is what ``memory_nmt/fairseq_changes.py``
lists, and what each change relies on in fairseq's code is still there.

A fresh process records every attribute of every fairseq module loaded, and of the classes they
define, of ``torch.serialization``, ``sys.excepthook`` and torch's allow-list of classes for its safe
unpickling; then imports the plugin, as Python code does, and records them again; then makes the
changes for a command line that loads the plugin, as fairseq-train's ``--user-dir`` import does, twice."""
import inspect
import json
import os
import subprocess
import sys

import pytest

from memory_nmt import fairseq_changes

RECORDED = """
import json, sys
import torch
import fairseq, fairseq.checkpoint_utils, fairseq.data.iterators, fairseq.distributed.utils, fairseq.trainer
import fairseq_cli.generate, fairseq_cli.interactive, fairseq_cli.train, fairseq_cli.validate


def record():
    seen = {"sys.excepthook": sys.excepthook,
            "torch.serialization.get_safe_globals()": sorted(map(str, torch.serialization.get_safe_globals()))}
    modules = {id(module): module for module in list(sys.modules.values()) if module is not None}.values()
    for module in modules:
        name = getattr(module, "__name__", None)
        if not isinstance(name, str) or not (name.startswith("fairseq") or name == "torch.serialization"):
            continue
        for key, value in list(vars(module).items()):
            seen[f"{name}.{key}"] = value
            if isinstance(value, type) and value.__module__ == name:
                for attribute, member in list(vars(value).items()):
                    seen[f"{name}.{key}.{attribute}"] = member
    return seen


def changed(before, after):
    return sorted(key for key in before if key in after and not (before[key] is after[key] or (
        isinstance(before[key], list) and before[key] == after[key])))


before = record()
import memory_nmt
imported = record()
from memory_nmt.fairseq_changes import make_changes
COMMAND_LINE = ["fairseq-train", "data-bin", "--user-dir", "memory_nmt", "--task", "translation"]
make_changes(COMMAND_LINE)
command_line = record()
make_changes(COMMAND_LINE)
print(json.dumps({"import": changed(before, imported), "command line": changed(imported, command_line),
                  "again": changed(command_line, record())}))
"""


def test_importing_the_plugin_changes_only_what_the_list_names():
    done = subprocess.run([sys.executable, "-c", RECORDED], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["import"] == list(fairseq_changes.CHANGED_BY_IMPORT)
    assert found["command line"] == sorted(fairseq_changes.CHANGED_FOR_PLUGIN_COMMAND_LINES)
    assert found["again"] == []


@pytest.mark.parametrize("argv, loads", [
    (["fairseq-train", "data", "--user-dir", "memory_nmt", "--task", "document_translation"], True),
    (["fairseq-generate", "data", "--user-dir=/opt/memory_nmt"], True),
    (["fairseq-train", "data", "--task", "translation", "--arch", "transformer"], False),
    (["python", "-m", "pytest", "--user-dirs"], False),
])
def test_a_command_line_loads_the_plugin_where_it_gives_a_user_dir(argv, loads):
    assert fairseq_changes.loads_the_plugin(argv) == loads


def test_what_the_changes_rely_on_in_fairseq_is_there():
    """fairseq starts its workers through ``infer_init_method`` looked up in its module (so that the
    plugin's takes its place), and its command lines are the modules of the folder ``fairseq_cli``
    (whose ``assert`` checks the plugin's excepthook prints on one line)."""
    import fairseq_cli.train
    from fairseq.distributed import utils as distributed_utils

    assert "infer_init_method(" in inspect.getsource(distributed_utils.call_main)
    assert os.path.basename(os.path.dirname(fairseq_cli.train.__file__)) == "fairseq_cli"
