"""Resolving the configuration from its sources, lowest to highest: config/default.toml, a user
TOML file, the environment and command-line flags. Every value is parsed by its setting, and an
error names the file key, variable or flag it came from."""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Iterable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from config.errors import ConfigError
from config.resolved import Config, get_path, has_path, set_path
from config.settings import BY_PATH, FREE_TABLES, LAUNCH_PROPERTIES, SETTINGS

# Read through importlib.resources, so that it loads from a zip too (``geops app`` ships the
# packages to a cluster's executors as one).
DEFAULT_FILE: Traversable = resources.files(__package__) / "default.toml"
KAFKA_ENV_PREFIX = "GEOPS_KAFKA_"


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(dotted path, value) of every setting in a TOML tree; a free table counts as one."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if path in FREE_TABLES or (path.endswith(".config") and path.startswith("topics.")):
            yield path, value
        elif isinstance(value, Mapping):
            yield from _leaves(value, path + ".")
        else:
            yield path, value


def _read_toml(path: Path | Traversable, label: str) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{label}: file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{label}: {path} is not valid TOML: {exc}") from None
    except OSError as exc:  # a directory, unreadable, ...
        raise ConfigError(f"{label}: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: {path} is not a text file: {exc}") from None


def _merge_file(tree: dict[str, Any], user: Mapping[str, Any], path: Path) -> None:
    for key, value in _leaves(user):
        if key in FREE_TABLES or key.endswith(".config"):
            if not isinstance(value, Mapping):
                raise ConfigError(f"config file {path}: {key} must be a table")
            if key.endswith(".config") and key.rsplit(".", 1)[0] + ".name" not in BY_PATH:
                raise ConfigError(f"config file {path}: unknown setting '{key}'")
            merged = dict(get_path(tree, key)) if has_path(tree, key) else {}
            merged.update(value)
            set_path(tree, key, merged)
            continue
        setting = BY_PATH.get(key)
        if setting is None:
            raise ConfigError(f"config file {path}: unknown setting '{key}'")
        try:
            set_path(tree, key, setting.convert(value))
        except ValueError as exc:
            raise ConfigError(f"config file {path}: {key}: {exc}") from None


def load(
    config_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    kafka_properties: Iterable[str] = (),
) -> Config:
    """Resolve the configuration: defaults < file < environment < flags.

    ``flags`` maps setting paths to raw values given on the command line; ``kafka_properties``
    are ``key=value`` strings from ``-X``.
    """
    environ = os.environ if environ is None else environ
    tree: dict[str, Any] = {}
    defaults = _read_toml(DEFAULT_FILE, "default configuration")
    for key, value in _leaves(defaults):
        set_path(tree, key, BY_PATH[key].convert(value) if key in BY_PATH else value)
    for key in FREE_TABLES:
        if not has_path(tree, key):
            set_path(tree, key, {})

    config_file = config_file or environ.get("GEOPS_CONFIG") or None
    if config_file:
        path = Path(config_file).expanduser()
        _merge_file(tree, _read_toml(path, "--config"), path)

    for setting in SETTINGS:
        if setting.env in environ:
            try:
                set_path(tree, setting.path, setting.convert(environ[setting.env]))
            except ValueError as exc:
                raise ConfigError(f"{setting.env} ({setting.path}): {exc}") from None
    client = dict(tree["kafka"]["client"])
    for name, value in environ.items():
        if name.startswith(KAFKA_ENV_PREFIX):
            client[name[len(KAFKA_ENV_PREFIX):].lower().replace("_", ".")] = value

    for path, raw in (flags or {}).items():
        setting = BY_PATH[path]
        try:
            set_path(tree, path, setting.convert(raw))
        except ValueError as exc:
            raise ConfigError(f"{setting.flag} ({path}): {exc}") from None
    for item in kafka_properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-X expects key=value (a librdkafka property), got {item!r}")
        client[key.strip()] = value
    tree["kafka"]["client"] = client
    for key, path in LAUNCH_PROPERTIES.items():
        if key in tree["spark"]["conf"]:
            s = BY_PATH[path]
            raise ConfigError(f"[spark.conf] \"{key}\": set {path} instead ({s.flag}, {s.env}); "
                              f"Spark reads it only when its JVM starts")
    return Config(tree)


@functools.cache
def defaults() -> Config:
    """The settings of config/default.toml alone (no user file, environment or flags), e.g. the
    paper's Table 1 in ``[distributor]``, for code that needs a default before any is resolved.
    Shared: read it, do not change it."""
    return load(environ={})
