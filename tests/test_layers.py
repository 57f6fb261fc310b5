"""The packages form layers, and every import points down (docs/architecture.md).

    cli -> bench, dashboard -> app, distributor -> kafkaio, geops -> schemas -> config

A module may import its own package and any package of a lower layer, never a package of its
own layer or of one above; imports inside functions count like any other. Each module is read
with ``ast``, nothing is imported.

Inside ``app`` the rooms (subpackages) follow the same rule by their own table (``APP_ROOMS``,
as ``app/__init__.py`` says): ``app.main`` may import every room, a room only those it names,
and the shared modules at the top of ``app`` no room.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("bench", "dashboard"),
    ("app", "distributor"),
    ("kafkaio", "geops"),
    ("schemas",),
    ("config",),  # below schemas: its errors derive from config.errors.GeopsError
)
RANK = {pkg: rank for rank, layer in enumerate(LAYERS) for pkg in layer}

# Imports that break the rule today, each with the reason and who removes it. Keep it empty.
EXCEPTIONS: dict[tuple[str, str], str] = {}

# Third-party packages a layer must not need: the core runs without Spark or Kafka, and only
# the app runs on Spark.
FORBIDDEN = {
    "geops": {"pyspark", "confluent_kafka"},
    "schemas": {"pyspark", "confluent_kafka"},
    "config": {"pyspark", "confluent_kafka"},
    "kafkaio": {"pyspark"},
    "distributor": {"pyspark"},
    "dashboard": {"pyspark"},
}


# Which rooms of ``app`` each room may import, besides itself and the shared modules.
APP_ROOMS: dict[str, set[str]] = {
    "launch": {"read"},
    "batch": {"static", "events", "read", "subscriptions"},
    "realtime": {"events", "subscriptions"},
    "static": {"subscriptions"},
    "events": set(),
    "read": set(),
    "subscriptions": set(),
}
APP_SHARED = {"errors", "executors", "faults", "joins", "metrics", "records"}


def modules(pkg: str) -> list[Path]:
    return sorted(p for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in a module, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def test_every_package_has_a_layer() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == set(RANK), "place new packages in LAYERS (and docs/architecture.md)"


@pytest.mark.parametrize("pkg", list(RANK))
def test_imports_point_down(pkg: str) -> None:
    wrong = []
    for path in modules(pkg):
        rel = path.relative_to(ROOT).as_posix()
        for line, top in imported(path):
            if top == pkg or top not in RANK or RANK[top] > RANK[pkg]:
                continue
            if (rel, top) not in EXCEPTIONS:
                where = "its own layer" if RANK[top] == RANK[pkg] else "a layer above"
                wrong.append(f"{rel}:{line} imports {top} ({where})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("pkg", sorted(FORBIDDEN))
def test_lower_layers_need_neither_spark_nor_kafka(pkg: str) -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {top}" for path in modules(pkg)
             for line, top in imported(path) if top in FORBIDDEN[pkg]]
    assert not wrong, "\n".join(wrong)


def test_the_app_ships_every_package_it_may_import() -> None:
    from cli.app import APP_PACKAGES  # the zip `geops app` sends to a cluster's executors

    assert set(APP_PACKAGES) == {"app"} | {pkg for pkg in RANK if RANK[pkg] > RANK["app"]}


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from cli.main import main\n"
                      "    import app.tasks\n    from . import sibling\n")
    assert imported(module) == [(1, "os"), (4, "cli"), (5, "app")]


def app_imports(path: Path) -> list[tuple[int, str]]:
    """(line, second component) of every absolute import of ``app.<name>`` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                 and node.module else [])
        found += [(node.lineno, n.split(".")[1]) for n in names
                  if n.startswith("app.") and n.count(".") >= 1]
    return found


def test_app_has_only_known_rooms_and_shared_modules() -> None:
    app = ROOT / "app"
    rooms = {p.parent.name for p in app.glob("*/__init__.py")}
    shared = {p.stem for p in app.glob("*.py")} - {"__init__", "main"}
    assert rooms == set(APP_ROOMS), "name a new room of app in APP_ROOMS and app/__init__.py"
    assert shared == APP_SHARED, "a module at the top of app is shared by the rooms: add it"


@pytest.mark.parametrize("room", [*APP_ROOMS, "shared"])
def test_app_rooms_import_only_the_rooms_they_name(room: str) -> None:
    app = ROOT / "app"
    paths = ([app / f"{m}.py" for m in sorted(APP_SHARED)] if room == "shared" else
             sorted(p for p in (app / room).rglob("*.py") if "__pycache__" not in p.parts))
    allowed = set() if room == "shared" else APP_ROOMS[room] | {room}
    wrong = [f"{path.relative_to(ROOT)}:{line} imports app.{name}"
             for path in paths for line, name in app_imports(path)
             if name not in APP_SHARED and name not in allowed]
    assert not wrong, "\n".join(wrong)
