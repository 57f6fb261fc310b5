"""The shape of ``bench/`` (docs/architecture.md, "The benchmarks"): the harness, one package per
``geops bench`` command, and the studies, every import pointing the allowed way.

- ``bench.harness`` imports no command's package and no study: it serves them all.
- A command's package (``bench.paper``, ``bench.live``, ...) imports the harness, its own
  modules and the packages below ``bench`` (``LAYERS`` of tests/test_layers.py), never another
  command or a study: what two commands share belongs to the harness.
- A study imports the harness, a command's package at its top only (the public surface of its
  ``__init__.py``: ``from bench.paper import ...``) and the packages below ``bench``, never a
  command's module or another study.
- The imports among the modules of ``bench``, those inside functions too, form no cycle.

Each module is read with ``ast``, nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layers import RANK, ROOT

HARNESS, STUDIES = "harness", "studies"
# the project's packages a benchmark may import: those of the layers below bench's
LOWER = {pkg for pkg, rank in RANK.items() if rank > RANK["bench"]}


def module_name(root: Path, path: Path) -> str:
    """``bench.live.run`` for ``bench/live/run.py``, ``bench.live`` for its ``__init__.py``."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(root: Path, name: str) -> bool:
    """Whether ``name`` is a module or package of the tree at ``root``."""
    path = root.joinpath(*name.split("."))
    return (path / "__init__.py").exists() or path.with_suffix(".py").exists()


def imports(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of the module at ``path``, at any depth, relative ones
    resolved; ``from P import n`` names ``P.n`` where that is a module of the tree, else ``P``."""
    name = module_name(root, path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1],
                                 *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if is_module(root, sub) else base))
    return found


def graph(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Every module of ``bench`` with its imports, by module name."""
    return {module_name(root, path): imports(root, path)
            for path in sorted((root / "bench").rglob("*.py")) if "__pycache__" not in path.parts}


def group(name: str) -> str:
    """What a module of ``bench`` belongs to: ``harness``, ``studies``, a command's package
    (``live``), or '' for ``bench`` itself."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def allowed(source: str, target: str, commands: set[str]) -> bool:
    """Whether module ``source`` of ``bench`` may import ``target``."""
    top = target.split(".")[0]
    if top != "bench":
        return top not in RANK or top in LOWER
    mine, theirs = group(source), group(target)
    if theirs == HARNESS:
        return True
    if mine == STUDIES:
        return theirs in commands and target == f"bench.{theirs}"
    return mine in commands and theirs == mine


def wrong_imports(root: Path) -> list[str]:
    """Every import that breaks the rules of the module's docstring, as ``file:line``."""
    commands = {p.parent.name for p in (root / "bench").glob("*/__init__.py")} - {HARNESS,
                                                                                   STUDIES}
    wrong = [f"{p.relative_to(root)} is neither the harness, a study nor a command's package"
             for p in sorted((root / "bench").glob("*.py")) if p.name != "__init__.py"]
    for source, found in graph(root).items():
        for line, target in found:
            if not allowed(source, target, commands):
                wrong.append(f"{source}:{line} imports {target}")
    return wrong


def cycles(root: Path) -> list[list[str]]:
    """Cycles among the modules of ``bench``, each as the modules along it (a depth-first
    search over the imports)."""
    modules = graph(root)
    edges = {m: sorted({t for _, t in found if t in modules and t != m})
             for m, found in modules.items()}
    state: dict[str, str] = {}     # "open" while on the path, "done" after
    path: list[str] = []
    found: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = "open"
        path.append(m)
        for t in edges[m]:
            if state.get(t) == "open":
                found.append([*path[path.index(t):], t])
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = "done"

    for m in sorted(modules):
        if m not in state:
            visit(m)
    return found


def test_each_module_imports_what_its_place_allows() -> None:
    wrong = wrong_imports(ROOT)
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_in_bench() -> None:
    found = cycles(ROOT)
    assert not found, "\n".join(" -> ".join(c) for c in found)


def test_the_checks_see_wrong_imports_and_cycles(tmp_path: Path) -> None:
    files = {
        "bench/__init__.py": "",
        "bench/harness/__init__.py": "",
        "bench/harness/tables.py": "def f():\n    from bench.live import run\n",
        "bench/live/__init__.py": "from bench.live.run import main\n",
        "bench/live/run.py": "from . import moving\nimport numpy\nfrom geops import model\n",
        "bench/live/moving.py": "from bench.live.run import main\nimport cli.main\n",
        "bench/paper/__init__.py": "",
        "bench/paper/plan.py": "from bench.harness import tables\nfrom bench.live import run\n",
        "bench/studies/__init__.py": "",
        "bench/studies/a.py": "from bench.paper import plan\nfrom bench.live import main\n",
        "bench/studies/b.py": "from bench.studies import a\nfrom bench.harness.tables import f\n",
        "bench/loose.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert wrong_imports(tmp_path) == [
        "bench/loose.py is neither the harness, a study nor a command's package",
        "bench.harness.tables:2 imports bench.live.run",
        "bench.live.moving:2 imports cli.main",
        "bench.paper.plan:2 imports bench.live.run",
        "bench.studies.a:1 imports bench.paper.plan",
        "bench.studies.b:1 imports bench.studies.a"]
    assert cycles(tmp_path) == [["bench.live.run", "bench.live.moving", "bench.live.run"]]
