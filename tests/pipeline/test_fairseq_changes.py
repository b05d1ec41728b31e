"""What importing the plugin changes in fairseq, torch and Python is what ``memory_nmt/fairseq_changes.py``
lists, and what each change relies on in fairseq's code is still there.

A fresh process records every attribute of every fairseq and torch module loaded (and of the classes
they define), ``sys.excepthook`` and torch's allow-list of classes for its safe unpickling; then
imports the plugin, as Python code does, and records them again; then makes the changes for a
command line that runs the document task, as fairseq-train's ``--user-dir`` import does, twice."""
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

ALLOW_LIST_STORAGE = "torch._weights_only_unpickler"  # what get_safe_globals() reads: recorded as that


def record():
    seen = {"sys.excepthook": id(sys.excepthook),
            "torch.serialization.get_safe_globals()": sorted(map(str, torch.serialization.get_safe_globals()))}
    for module in {id(module): module for module in list(sys.modules.values()) if module is not None}.values():
        name = getattr(module, "__name__", None)
        if not isinstance(name, str) or not name.startswith(("fairseq", "torch")) or name == ALLOW_LIST_STORAGE:
            continue
        for key, value in list(vars(module).items()):
            seen[f"{name}.{key}"] = id(value)
            if isinstance(value, type) and value.__module__ == name:
                for attribute, member in list(vars(value).items()):
                    seen[f"{name}.{key}.{attribute}"] = id(member)
    return seen


def changed(before, after):
    return sorted(key for key in before if key in after and before[key] != after[key])


before = record()
import memory_nmt
imported = record()
from memory_nmt.fairseq_changes import make_changes
COMMAND_LINE = ["fairseq-train", "data-bin", "--user-dir", "memory_nmt", "--task", "document_translation"]
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
    assert found["command line"] == sorted(fairseq_changes.CHANGED_FOR_DOCUMENT_COMMAND_LINES)
    assert found["again"] == []


@pytest.mark.parametrize("argv, runs", [
    (["fairseq-train", "data", "--task", "document_translation", "--arch", "transformer"], True),
    (["fairseq-generate", "data", "--task=document_translation"], True),
    (["fairseq-train", "data", "--task", "translation", "--arch", "document_translation"], False),
    (["fairseq-train", "data", "--task"], False),
    (["python", "-m", "pytest"], False),
])
def test_a_command_line_runs_the_document_task_where_it_names_it(argv, runs):
    assert fairseq_changes.runs_document_task(argv) == runs


def test_what_the_changes_rely_on_in_fairseq_is_there():
    """fairseq starts its workers through ``infer_init_method`` looked up in its module (so that the
    plugin's takes its place), its command lines are the modules of the folder ``fairseq_cli`` (whose
    ``assert`` checks the plugin's excepthook prints on one line), and the task's registered name is the
    one the changes look for."""
    import fairseq_cli.train
    from fairseq.distributed import utils as distributed_utils
    from fairseq.tasks import TASK_REGISTRY

    from memory_nmt.pipeline.task import DocumentTranslationTask

    assert "infer_init_method(" in inspect.getsource(distributed_utils.call_main)
    assert os.path.basename(os.path.dirname(fairseq_cli.train.__file__)) == "fairseq_cli"
    assert TASK_REGISTRY[fairseq_changes.DOCUMENT_TASK] is DocumentTranslationTask
