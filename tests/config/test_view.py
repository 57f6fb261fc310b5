"""The typed view of the settings (``cfg.view``): written from the declarations, covering every
setting, frozen, and the only way the product reads a setting."""

from __future__ import annotations

import ast
import dataclasses
import pickle
from pathlib import Path

import pytest

import config
from config.settings import BY_PATH, FREE_TABLES
from config.view_source import source

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("app", "bench", "cli", "dashboard", "distributor", "geops", "kafkaio", "schemas")


def attribute(cfg: config.Config, path: str) -> object:
    node: object = cfg.view
    for part in path.split("."):
        node = getattr(node, part)
    return node


def test_the_written_view_is_current() -> None:
    written = (ROOT / "config" / "view.py").read_text()
    assert written == source(), "run: python -m config.view_source > config/view.py"


def test_every_setting_has_its_attribute_with_its_value() -> None:
    cfg = config.load(environ={"GEOPS_APP_WORKERS": "3"}, flags={"app.trigger": "250ms"})
    for path in [*BY_PATH, *FREE_TABLES]:
        assert attribute(cfg, path) == cfg[path], path
    assert cfg.view.app.workers == 3 and cfg.view.app.trigger == 0.25


def leaves(node: object) -> int:
    if not dataclasses.is_dataclass(node):
        return 1
    return sum(leaves(getattr(node, f.name)) for f in dataclasses.fields(node))


def test_the_view_holds_nothing_but_the_settings() -> None:
    assert leaves(config.load(environ={}).view) == len(BY_PATH) + len(FREE_TABLES)


def test_the_view_is_frozen_and_a_config_still_pickles() -> None:
    cfg = config.load(environ={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.view.app.workers = 5  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(cfg))
    assert again.view == cfg.view
    assert cfg.with_overrides({"app.workers": "4"}).view.app.workers == 4


def string_reads(path: Path) -> list[str]:
    """Subscripts by a setting's path (``x["app.workers"]``), except of the declarations."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and node.slice.value in {*BY_PATH, *FREE_TABLES}
                and not ast.unparse(node.value).endswith("BY_PATH")):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("pkg", PRODUCT)
def test_the_product_reads_settings_through_the_view(pkg: str) -> None:
    wrong = [hit for path in sorted((ROOT / pkg).rglob("*.py")) for hit in string_reads(path)]
    assert not wrong, "read cfg.view.<section>.<name> instead:\n" + "\n".join(wrong)
