"""Writes ``config/view.py``, the typed view of the settings, from their declarations.

``python -m config.view_source > config/view.py`` after a setting is added, renamed or retyped;
``tests/config/test_view.py`` fails while the written view differs from what this prints. The
view is a file of its own, not built at run time, so that a reader and a type checker follow
``cfg.view.app.workers`` to its declaration and type.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Iterable

from config.settings import FREE_TABLES, SETTINGS, Setting

HEADER = '''"""The resolved settings as typed, frozen attributes: ``cfg.view.app.workers`` is
``cfg["app.workers"]`` with its type. Written by ``python -m config.view_source`` from the
declarations in ``config/settings.py``; edit those, not this file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
'''


def _type_name(setting: Setting) -> str:
    """The annotation of a setting's value: what its parser returns."""
    hint = typing.get_type_hints(setting.parse)["return"]
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _class_name(section: str) -> str:
    return "".join(part.capitalize() for part in section.replace(".", "_").split("_")) + "Settings"


def _tree() -> dict[str, dict[str, str]]:
    """Section -> field -> annotation, the topics' sections as one shared shape."""
    tree: dict[str, dict[str, str]] = {}
    for s in SETTINGS:
        section, field = s.path.rsplit(".", 1)
        if section.startswith("topics."):
            tree.setdefault("topic", {})[field] = _type_name(s)
            tree.setdefault("topics", {})[section.split(".", 1)[1]] = "TopicSettings"
        else:
            tree.setdefault(section, {})[field] = _type_name(s)
    for table in FREE_TABLES:
        section, field = table.split(".")
        tree.setdefault(section, {})[field] = "Mapping[str, Any]"
    return tree


def _dataclass(name: str, fields: dict[str, str], doc: str) -> Iterable[str]:
    yield "\n\n@dataclass(frozen=True)"
    yield f"class {name}:"
    yield f'    """{doc}"""'
    yield ""
    for field, annotation in fields.items():
        yield f"    {field}: {annotation}"


def source() -> str:
    """The text of ``config/view.py``."""
    tree = _tree()
    sections = [s for s in tree if s not in ("topic", "topics")]
    lines = [HEADER.rstrip("\n")]
    lines += _dataclass("TopicSettings", tree["topic"], "One logical topic's settings.")
    lines += _dataclass("TopicsSettings", tree["topics"], "Every logical topic's settings.")
    for section in sections:
        lines += _dataclass(_class_name(section), tree[section], f"The ``[{section}]`` settings.")
    lines += _dataclass("Settings", {"topics": "TopicsSettings",
                                     **{s: _class_name(s) for s in sections}},
                        "Every resolved setting, by section.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(source())
