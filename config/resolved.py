"""The resolved configuration: a tree of validated values keyed by dotted paths such as
``app.strategy``, and the accessors the other packages read it through."""

from __future__ import annotations

import copy
import dataclasses
import os
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config import view as typed_view
from config.embedded import running_address
from config.settings import BY_PATH


def get_path(tree: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path; KeyError when a part is missing."""
    node: Any = tree
    for part in path.split("."):
        node = node[part]
    return node


def set_path(tree: dict[str, Any], path: str, value: Any) -> None:
    """Store a value at a dotted path, making the tables on the way."""
    parts = path.split(".")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def has_path(tree: Mapping[str, Any], path: str) -> bool:
    """Whether a dotted path holds a value."""
    try:
        get_path(tree, path)
    except KeyError:
        return False
    return True


def _typed(cls: type, tree: Mapping[str, Any]) -> Any:
    """An instance of one of ``config.view``'s classes from the tree's table of its fields;
    free-form tables as copies."""
    values = {}
    for name, hint in typing.get_type_hints(cls, vars(typed_view)).items():
        value = tree[name]
        if dataclasses.is_dataclass(hint):
            value = _typed(hint, value)
        elif typing.get_origin(hint) is Mapping:
            value = dict(value)
        values[name] = value
    return cls(**values)


class Config:
    """Resolved, validated settings. The product reads them typed, ``cfg.view.app.strategy``;
    ``cfg["app.strategy"]`` is the layer of files, flags and ``-X`` that names them by path."""

    def __init__(self, tree: dict[str, Any]):
        self.tree = tree
        self._view: typed_view.Settings | None = None

    def __getitem__(self, path: str) -> Any:
        return get_path(self.tree, path)

    def __getstate__(self) -> dict[str, Any]:
        return {"tree": self.tree, "_view": None}  # the view is built again where it is used

    @property
    def view(self) -> typed_view.Settings:
        """Every setting as a typed, frozen attribute (built once, on first use)."""
        if self._view is None:
            self._view = _typed(typed_view.Settings, self.tree)
        return self._view

    def topic(self, logical: str) -> str:
        """The configured name of a logical topic such as 'publications' or 'dead_letter'."""
        return getattr(self.view.topics, logical).name

    def kafka_client(self) -> dict[str, str]:
        """librdkafka settings shared by every client (pass-through table plus bootstrap)."""
        conf = {k: str(v) for k, v in self.view.kafka.client.items()}
        conf["bootstrap.servers"] = self.bootstrap_servers()
        return conf

    def bootstrap_servers(self) -> str:
        """The configured servers, else the local broker's address, else the usual port."""
        explicit = self.view.kafka.bootstrap_servers
        if explicit:
            return explicit
        return running_address(self.state_dir()) or "127.0.0.1:9092"

    def state_dir(self) -> Path:
        """The local broker's directory: the setting, else geops under XDG_STATE_HOME."""
        raw = self.view.broker.state_dir
        if raw:
            return Path(raw).expanduser()
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "geops"

    def with_overrides(self, values: Mapping[str, Any]) -> Config:
        """A copy with some paths set to new raw values, parsed as their settings parse them."""
        tree = copy.deepcopy(self.tree)
        for path, raw in values.items():
            set_path(tree, path, BY_PATH[path].convert(raw) if path in BY_PATH else raw)
        return Config(tree)
