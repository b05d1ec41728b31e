"""The import graph of the plugin and of the tools beside it, read from their source: no cycle, a
pipeline that knows no system, nothing below the document task imports it, the plugin imports
nothing of the tools but the readers of the files both read; and the tools that need no model
start without fairseq.

Every ``import`` statement of every module counts, those inside functions too. ``from .a import b``
is an edge to module ``a.b`` where that is a module, else to ``a``. Importing a module also runs
its packages' ``__init__``; those implicit edges are not counted (Python has the package
initialised by then), the ``__init__`` modules' own imports are.
"""
import ast
import subprocess
import sys
from pathlib import Path

from conftest import PLUGIN, REPO

PACKAGE = PLUGIN.name
TOOLS = "memory_nmt_tools"
# the readers of the files that training and the tools both read, so that both apply one set of rules
SHARED_READERS = {f"{TOOLS}.document_index", f"{TOOLS}.text_files"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PLUGIN.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set) -> set:
    """The package's modules that the module at ``path`` imports."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        found |= {target for target in targets if target in modules}
    return found - {name}


def import_graph() -> dict:
    paths = sorted([*PLUGIN.rglob("*.py"), *(REPO / TOOLS).rglob("*.py")])
    modules = {module_name(path) for path in paths}
    return {module_name(path): imports_of(path, modules) for path in paths}


def test_the_graph_is_read_from_the_source():
    graph = import_graph()
    assert f"{PACKAGE}.pipeline.document_task" in graph[f"{PACKAGE}.pipeline.criterion"]
    assert f"{PACKAGE}.pipeline.teacher_forcing" in graph[f"{PACKAGE}.pipeline.criterion"]
    assert f"{PACKAGE}.systems.previous_sentences" in graph[f"{PACKAGE}.systems.context_concat.model"]
    assert f"{PACKAGE}.pipeline.task" in graph[PACKAGE]
    assert f"{TOOLS}.document_bleu" in graph[f"{TOOLS}.comparison_steps"]
    assert f"{TOOLS}.comparison_steps" in graph[f"{TOOLS}.compare_systems"]  # imported in main, counted


def test_no_import_cycle():
    graph = import_graph()
    state = {}  # module -> "open" while on the path, "done" once every path below it is checked

    def visit(module, path):
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                cycle = path[path.index(imported):] + [imported]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if imported not in state:
                visit(imported, path + [imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_the_pipeline_imports_nothing_of_the_systems_or_the_tools_but_the_shared_readers():
    graph = import_graph()
    pipeline = f"{PACKAGE}.pipeline"
    for module, imported in graph.items():
        if module.startswith(pipeline + ".") or module == pipeline:
            outside = sorted(m for m in imported - SHARED_READERS if not m.startswith(pipeline))
            assert not outside, f"{module} imports {outside}"


def test_the_plugin_imports_nothing_of_the_tools_beside_it_but_the_shared_readers():
    graph = import_graph()
    assert f"{TOOLS}.document_index" in graph[f"{PACKAGE}.pipeline.data"]
    for module, imported in graph.items():
        if module.split(".")[0] == PACKAGE:
            assert not [m for m in imported - SHARED_READERS if m.split(".")[0] == TOOLS], module
    for reader in SHARED_READERS:  # they stay below the plugin: they import only each other
        assert graph[reader] <= SHARED_READERS, reader


def test_only_the_package_itself_imports_the_document_task():
    graph = import_graph()
    importers = sorted(
        module for module, imported in graph.items()
        if module.split(".")[0] == PACKAGE and f"{PACKAGE}.pipeline.task" in imported
    )
    assert importers == [PACKAGE]  # the tools above the plugin may use it


def test_the_tools_that_need_no_model_import_neither_fairseq_nor_the_plugin():
    """Importing the plugin registers it with fairseq (seconds, and fairseq's log lines on stderr):
    the commands that read and write text only start at once and print their own lines only."""
    light = ["text_files", "document_index", "paths", "generate_texts", "document_bleu", "prepare_documents",
             "compare_systems", "experiments", "synthetic_documents"]
    probe = (
        f"import sys; import {', '.join('memory_nmt_tools.' + name for name in light)}; "
        "print(sorted(name for name in ('fairseq', 'torch', PACKAGE) if name in sys.modules))"
    ).replace("PACKAGE", repr(PACKAGE))
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (result.stdout.strip(), result.stderr) == ("[]", "")
