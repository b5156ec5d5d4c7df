"""The house keeps the shape docs/architecture.md draws: which folder may import which, and the rules of the code.

Imports are read from the source (ast), at run time only: an import under ``if TYPE_CHECKING:``
names a type and loads nothing, so it may point anywhere. Each rule here was broken once
(issue 17): a rule that fails names the file, the line and what to do.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "toolkit"

# What each part may import at run time (besides itself). docs/architecture.md gives the why.
BASE = {"errors", "redaction", "stats", "progress", "prometheus_text"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "redaction": set(),
    "stats": set(),
    "progress": set(),
    "prometheus_text": set(),
    "logs": {"errors"},
    "engines": {"errors"},
    "host": {"errors", "redaction"},
    "server": BASE | {"logs", "engines", "host"},
    "benchmark": BASE | {"logs", "engines", "host", "server"},
    # the sensors, beside the benchmark: neither imports the other
    "observe": BASE | {"logs", "engines", "host", "server"},
    "journal": BASE | {"logs", "engines", "host", "server", "benchmark", "observe"},
    "moves": BASE | {"logs", "engines", "host", "server", "benchmark", "observe", "journal"},
    "views": BASE | {"logs", "engines", "host", "server", "benchmark", "observe", "journal", "moves"},
    "report": BASE | {"logs", "engines", "server", "benchmark", "observe", "journal", "moves", "views"},
    "testbeds": BASE | {"host", "server"},
    # The stand-in server imitates a named engine release from the toolkit's own release data (pure: the stdlib
    # and packaging), so the two cannot drift apart; it imports nothing else of the toolkit it stands in for.
    "sim": {"engines"},
    "cli": BASE | {"logs", "engines", "host", "server", "benchmark", "observe", "journal", "moves", "views", "report",
                   "sim", "testbeds"},
    "__init__": {"errors", "logs", "report", "host", "server", "journal", "benchmark", "observe", "moves", "views"},
    "__main__": {"cli"},
}
# The two places that import lazily on purpose (see their docstrings): the notebook vocabulary, loaded
# on first use because every simulated TP rank imports the package, and the CLI dispatcher.
LAZY_LOADERS = {"toolkit/__init__.py", "toolkit/cli/main.py"}
MAX_LINES = 400


@dataclass(frozen=True)
class Import:
    source: str  # path relative to the repository
    line: int
    module: str  # toolkit.x.y
    local: bool  # inside a function


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _part_of_file(path: Path) -> str:
    relative = path.relative_to(PACKAGE).with_suffix("")
    return relative.parts[0] if len(relative.parts) > 1 else relative.parts[0]


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    relative = str(path.relative_to(ROOT))

    def walk(node: ast.AST, local: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    yield from walk(sub, local)
                continue
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module] if child.module != "toolkit" else [f"toolkit.{a.name}" for a in child.names]
                for name in names:
                    if name.startswith("toolkit"):
                        yield Import(relative, child.lineno, name, local)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("toolkit"):
                        yield Import(relative, child.lineno, alias.name, local)
            yield from walk(child, inner)

    yield from walk(tree, False)


ALL_IMPORTS = [imp for path in _modules() for imp in _imports(path)]


def test_every_folder_imports_only_the_floors_below_it() -> None:
    wrong = []
    for imp in ALL_IMPORTS:
        mine = _part_of_file(ROOT / imp.source)
        theirs = _part(imp.module)
        if theirs == mine or (mine == "__init__" and theirs in ALLOWED["__init__"]):
            continue
        if theirs not in ALLOWED.get(mine, set()):
            wrong.append(f"{imp.source}:{imp.line} imports {imp.module} ({mine} -> {theirs})")
    assert not wrong, (
        "imports against the layers of docs/architecture.md (move the code to the right floor, or pass the "
        "value in from above):\n" + "\n".join(wrong)
    )


def test_no_function_local_import_of_a_toolkit_module() -> None:
    local = [f"{i.source}:{i.line} {i.module}" for i in ALL_IMPORTS if i.local and i.source not in LAZY_LOADERS]
    assert not local, "import at the top of the module (a local import hides an arrow of the graph):\n" + "\n".join(local)


def test_no_import_by_string_and_no_module_class_swap() -> None:
    found = []
    for path in _modules():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            if "import_module(" in code or "__import__(" in code or "__class__ =" in code:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "plain imports only; no module class swaps:\n" + "\n".join(found)


def test_no_getattr_on_our_own_objects_outside_the_simulator() -> None:
    """getattr/hasattr duck typing hid the seams; type them instead (the simulator is exempt)."""
    found = []
    for path in _modules():
        if "sim" in path.relative_to(PACKAGE).parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            if "getattr(" in code or "hasattr(" in code:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "use the type's attributes (isinstance first when it may be another type):\n" + "\n".join(found)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_400_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines: split it by concept (STYLE.md rule 2)"


def test_the_layers_are_written_down() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = [part for part in ALLOWED if part not in ("__init__", "__main__") and f"`{part}" not in text]
    assert not missing, f"docs/architecture.md does not describe {missing}"


# Records whose constructor takes each setting as a keyword: a Slurm job's or a container's settings.
MANY_KNOBS_ALLOWED = {"toolkit/host/slurm.py:SlurmTarget.__init__", "toolkit/host/container.py:ContainerTarget.__init__"}
MAX_PARAMETERS = 12


def _public_functions(path: Path) -> Iterator[tuple[str, int, int]]:
    """(qualified name, line, parameter count) of each public function and method; ``self``/``cls`` aside."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef) and not child.name.startswith("_"):
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and (
                    not child.name.startswith("_") or child.name == "__init__"):
                args = child.args
                names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
                if prefix and names[:1] in (["self"], ["cls"]):
                    names = names[1:]
                count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
                yield f"{prefix}{child.name}", child.lineno, count

    yield from walk(ast.parse(path.read_text(), filename=str(path)), "")


def test_no_public_function_takes_more_than_12_parameters() -> None:
    """A move says what is particular to it; the knobs every move shares travel in one Plan (STYLE.md rule 17)."""
    found = []
    for path in _modules():
        relative = str(path.relative_to(ROOT))
        for name, line, count in _public_functions(path):
            if count > MAX_PARAMETERS and f"{relative}:{name}" not in MANY_KNOBS_ALLOWED:
                found.append(f"{relative}:{line} {name} takes {count} parameters")
    assert not found, (
        f"more than {MAX_PARAMETERS} parameters: put the knobs moves share in toolkit.moves.plan.Plan, a benchmark's "
        "in toolkit.benchmark.load.Load, what a trial reports in toolkit.moves.trial.TrialObserver:\n" + "\n".join(found)
    )


def test_the_parameter_count_sees_a_long_signature(tmp_path: Path) -> None:
    path = tmp_path / "wide.py"
    path.write_text("def wide(a, b, c, d, e, f, g, h, i, j, k, l, m): ...\n"
                    "class C:\n    def ok(self, a, *args, **kw): ...\n    def _hidden(self, a): ...\n")
    assert list(_public_functions(path)) == [("wide", 1, 13), ("C.ok", 3, 3)]
