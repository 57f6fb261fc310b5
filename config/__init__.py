"""The geops configuration: one default file, overridden by a user file, the environment and flags.

Every scalar setting is declared once in ``SETTINGS`` with its TOML path, environment variable,
command-line flag and parser, so that a bad value is always reported with the name the user
typed. Two tables are free-form pass-throughs: ``kafka.client`` (librdkafka properties for every
client) and ``spark.conf`` (Spark properties).
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from config.choices import (
    DISTRIBUTOR_MODES,
    FIRST_PERIODS,
    JOINS,
    METRICS,
    PARTITIONERS,
    POLICIES,
    STRATEGIES,
)
from config.embedded import running_address

# Read through importlib.resources, so that it loads from a zip too (``geops app`` ships the
# packages to a cluster's executors as one).
DEFAULT_FILE: Traversable = resources.files(__package__) / "default.toml"
TOPICS = ("publications", "subscriptions", "matches", "metrics", "control", "dead_letter", "status")


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message names the setting."""


# The longest duration any setting takes: longer ones are surely typos, and they would overflow
# the millisecond longs of Spark's trigger and the timeouts of threading waits.
MAX_DURATION_S = 366 * 24 * 3600.0
MAX_PORT = 65535
MAX_INT32 = 2**31 - 1      # Kafka's partition count, Avro int fields (P, W in the metrics)
# Static partitions and join workers: far beyond any real deployment, small enough that the
# partitioners' per-partition arrays fit in memory (a typo like 10**11 would exhaust it).
MAX_APP_SHAPE = 100_000


def parse_duration(text: str | float | int) -> float:
    """Seconds from '500ms', '10s', '2m', '1h' or a bare number of seconds (at most a year)."""
    if isinstance(text, bool):
        raise ValueError(f"expected a duration such as 500ms or 10s, got {text!r}")
    if isinstance(text, int | float):
        if not text >= 0:
            raise ValueError(f"a duration cannot be negative: {text!r}")
        seconds = float(text)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(text))
        if not m:
            raise ValueError(f"expected a duration such as 500ms or 10s, got {text!r}")
        scale = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]
        seconds = float(m.group(1)) * scale
    if seconds > MAX_DURATION_S:
        raise ValueError(f"a duration must be at most 366 days ({MAX_DURATION_S:.0f} s), got "
                         f"{text!r}")
    return seconds


def _int(text: Any) -> int:
    if isinstance(text, bool):
        raise ValueError(f"expected an integer, got {text!r}")
    if isinstance(text, int):
        return text
    try:
        return int(str(text).strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {text!r}") from None


def _float(text: Any) -> float:
    if isinstance(text, bool):
        raise ValueError(f"expected a number, got {text!r}")
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"expected a finite number, got {text!r}")
    return value


def _str(text: Any) -> str:
    if not isinstance(text, str):
        raise ValueError(f"expected a string, got {text!r}")
    return text


def _positive(value: Any) -> None:
    if not value > 0:
        raise ValueError(f"must be positive, got {value}")


def _at_least(low: float) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value < low:
            raise ValueError(f"must be at least {low}, got {value}")

    return check


def _between(low: int, high: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value < low:
            raise ValueError(f"must be at least {low}, got {value}")
        if value > high:
            raise ValueError(f"must be at most {high}, got {value}")

    return check


def _seconds_between(low: float, high: float) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not low <= value <= high:
            raise ValueError(f"must be between {low:g} s and {high:g} s, got {value:g} s")

    return check


def _nonempty(value: Any) -> None:
    if not str(value).strip():
        raise ValueError("must not be empty")


def parse_memory(text: Any) -> str:
    """A JVM memory size such as 4g, 512m or 0: digits and a unit k, m, g or t."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt])?b?\s*", str(text), re.IGNORECASE)
    if isinstance(text, bool) or not m or (m.group(2) is None and int(m.group(1)) != 0):
        raise ValueError(f"expected a memory size such as 4g or 512m, got {text!r}")
    return f"{int(m.group(1))}{(m.group(2) or '').lower()}"


def parse_bytes(text: Any) -> int:
    """A size in bytes written as a memory size (4m, 512k, 0)."""
    size = parse_memory(text)
    unit = size[-1] if size[-1].isalpha() else ""
    return int(size.rstrip("kmgt")) << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[unit]


def _optional_memory(text: Any) -> str:
    """A JVM memory size, or empty for Spark's own default."""
    return "" if isinstance(text, str) and not text.strip() else parse_memory(text)


def _positive_memory(value: str) -> None:
    if value and int(re.match(r"\d+", value).group()) == 0:
        raise ValueError(f"must be above zero, got {value}")


@dataclass(frozen=True)
class Setting:
    """One scalar setting: where it lives in the file, its env var and flag, how to parse it."""

    path: str
    group: str
    env: str
    flag: str
    parse: Callable[[Any], Any]
    help: str
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], None] | None = None

    def convert(self, raw: Any) -> Any:
        value = self.parse(raw)
        if self.choices is not None:
            folded = {c.lower(): c for c in self.choices}
            if str(value).lower() not in folded:
                raise ValueError(f"expected one of {', '.join(self.choices)}, got {raw!r}")
            value = folded[str(value).lower()]
        if self.check is not None:
            self.check(value)
        return value


def _kafka_topic(name: Any) -> None:
    """Kafka's rule for topic names: 1..249 of ASCII letters, digits, '.', '_' and '-'."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", name) or name in (".", ".."):
        raise ValueError(f"a Kafka topic name is 1 to 249 of the characters a-z, A-Z, 0-9, "
                         f"'.', '_' and '-' (not '.' or '..'), got {name!r}")


def _topic_settings() -> list[Setting]:
    out = []
    for t in TOPICS:
        dashed = t.replace("_", "-")
        out.append(
            Setting(f"topics.{t}.name", "topics", f"GEOPS_{t.upper()}_TOPIC", f"--{dashed}-topic",
                    _str, f"name of the {dashed} topic", check=_kafka_topic)
        )
        out.append(
            Setting(f"topics.{t}.partitions", "topic-partitions", f"GEOPS_{t.upper()}_PARTITIONS",
                    f"--{dashed}-partitions", _int, f"partitions of the {dashed} topic",
                    check=_between(1, MAX_INT32))
        )
    return out


SETTINGS: tuple[Setting, ...] = (
    Setting("kafka.bootstrap_servers", "kafka", "GEOPS_BOOTSTRAP_SERVERS", "--bootstrap-servers",
            _str, "Kafka bootstrap servers (default: the local broker if running)"),
    Setting("kafka.outage_limit", "kafka", "GEOPS_OUTAGE_LIMIT", "--outage-limit",
            parse_duration, "how long Kafka may not answer before a process gives up "
            "(retried with back-off until then)", check=_positive),
    Setting("kafka.replication_factor", "topic-partitions", "GEOPS_REPLICATION_FACTOR",
            "--replication-factor", _int, "replication factor of created topics (0 = the "
            "broker's default.replication.factor)", check=_between(0, 32767)),
    *_topic_settings(),
    Setting("broker.port", "broker", "GEOPS_BROKER_PORT", "--port", _int,
            "client port of the local broker (0 = any free port)", check=_between(0, MAX_PORT)),
    Setting("broker.nodes", "broker", "GEOPS_BROKER_NODES", "--nodes", _int,
            "KRaft nodes of the local broker, each broker and controller (3 = a cluster with "
            "replication factor 3 and min.insync.replicas 2)", check=_between(1, 5)),
    Setting("broker.heap", "broker", "GEOPS_BROKER_HEAP", "--heap", parse_memory,
            "heap of each local broker node's JVM, e.g. 512m", check=_positive_memory),
    Setting("broker.state_dir", "state", "GEOPS_STATE_DIR", "--state-dir", _str,
            "directory for the local broker's data and logs and the default checkpoints"),
    Setting("app.app_id", "app", "GEOPS_APP_ID", "--app-id", _str,
            "name of this app instance in metrics and matches"),
    Setting("app.strategy", "app", "GEOPS_APP_STRATEGY", "--strategy", _str,
            "subscription partitioning strategy", choices=STRATEGIES.names),
    Setting("app.join", "app", "GEOPS_APP_JOIN", "--join", _str,
            "where the join runs: static-local or stream-local", choices=JOINS.names),
    Setting("app.workers", "app", "GEOPS_APP_WORKERS", "--workers", _int,
            "join workers W (0 = all executor cores)", check=_between(0, MAX_APP_SHAPE)),
    Setting("app.partitions", "app", "GEOPS_APP_PARTITIONS", "--partitions", _int,
            "static partitions P", check=_between(1, MAX_APP_SHAPE)),
    Setting("app.partitioner", "app", "GEOPS_APP_PARTITIONER", "--partitioner", _str,
            "spatial partitioner", choices=PARTITIONERS.names),
    Setting("app.trigger", "app", "GEOPS_APP_TRIGGER", "--trigger", parse_duration,
            "micro-batch trigger interval, e.g. 500ms", check=_positive),
    Setting("app.max_records_per_trigger", "app", "GEOPS_APP_MAX_RECORDS_PER_TRIGGER",
            "--max-records-per-trigger", _int, "records per micro-batch (0 = no limit)",
            check=_at_least(0)),
    Setting("app.checkpoint", "app", "GEOPS_APP_CHECKPOINT", "--checkpoint", _str,
            "checkpoint directory (default: <state-dir>/checkpoints/<app-id>)"),
    Setting("app.stop_after_idle", "app", "GEOPS_APP_STOP_AFTER_IDLE", "--stop-after-idle",
            parse_duration, "stop once no input arrived for this long after the query started "
            "(0 = never)"),
    Setting("app.on_data_loss", "app", "GEOPS_APP_ON_DATA_LOSS", "--on-data-loss", _str,
            "when offsets the query must read no longer exist: fail, or continue from the "
            "nearest valid offsets and record what was skipped", choices=("fail", "continue")),
    Setting("app.delivery", "app", "GEOPS_APP_DELIVERY", "--delivery", _str,
            "how a micro-batch's matches and metrics reach Kafka: exactly-once (one "
            "transaction per batch; a batch run again after a crash is not written twice) or "
            "at-least-once (flushed; a batch run again writes again)",
            choices=("exactly-once", "at-least-once")),
    Setting("app.fold_bytes", "app", "GEOPS_APP_FOLD_BYTES", "--fold-bytes", parse_bytes,
            "subscription changes pending as deltas before they are folded into the static "
            "partitions (also at least a tenth of the static side; a change that waited 20 "
            "batches is folded anyway), e.g. 4m"),
    Setting("spark.master", "spark", "GEOPS_SPARK_MASTER", "--master", _str,
            "Spark master when spark-submit was not given one"),
    Setting("spark.ui", "spark", "GEOPS_SPARK_UI", "--spark-ui", _str,
            "the Spark UI of the app, at spark.ui.port of [spark.conf] (4040; the next free "
            "port when it is taken)", choices=("on", "off")),
    Setting("spark.driver_memory", "spark", "GEOPS_SPARK_DRIVER_MEMORY", "--driver-memory",
            parse_memory, "heap of the driver JVM (in local mode also the executors'), given to "
            "spark-submit at launch, e.g. 4g", check=_positive_memory),
    Setting("spark.executor_memory", "spark", "GEOPS_SPARK_EXECUTOR_MEMORY", "--executor-memory",
            _optional_memory, "heap of each executor JVM on a cluster (empty: Spark's default, 1g; "
            "local mode: unused)",
            check=_positive_memory),
    Setting("spark.driver_max_result_size", "spark", "GEOPS_SPARK_DRIVER_MAX_RESULT_SIZE",
            "--driver-max-result-size", parse_memory, "largest result of one Spark job the driver "
            "accepts (0 = no limit)"),
    Setting("spark.driver_java_options", "spark", "GEOPS_SPARK_DRIVER_JAVA_OPTIONS",
            "--driver-java-options", _str, "extra JVM options of the driver, given to "
            "spark-submit at launch"),
    Setting("distributor.metric", "distributor", "GEOPS_DISTRIBUTOR_METRIC", "--metric", _str,
            "load metric: LB (processing time) or DB (item counts)", choices=METRICS.names),
    Setting("distributor.mode", "distributor", "GEOPS_DISTRIBUTOR_MODE", "--mode", _str,
            "adaptive (the default) commands rebalances when the predicted saving pays for "
            "the move; dynamic by the paper's Table 1; observe only reports",
            choices=DISTRIBUTOR_MODES.names),
    Setting("distributor.policy", "distributor", "GEOPS_DISTRIBUTOR_POLICY", "--policy", _str,
            "redistribution policy", choices=POLICIES.names),
    Setting("distributor.threshold", "distributor", "GEOPS_DISTRIBUTOR_THRESHOLD", "--threshold",
            _float, "MLDC threshold", check=_at_least(0.0)),
    Setting("distributor.min_items", "distributor", "GEOPS_DISTRIBUTOR_MIN_ITEMS", "--min-items",
            _int, "M: items processed before redistributing", check=_at_least(0)),
    Setting("distributor.wait_periods", "distributor", "GEOPS_DISTRIBUTOR_WAIT_PERIODS",
            "--wait-periods", _int, "N: periods between redistributions", check=_at_least(0)),
    Setting("distributor.period", "distributor", "GEOPS_DISTRIBUTOR_PERIOD", "--period",
            parse_duration, "D: monitoring period, e.g. 10s", check=_positive),
    Setting("distributor.min_improvement", "distributor", "GEOPS_DISTRIBUTOR_MIN_IMPROVEMENT",
            "--min-improvement", _float, "miMLDC: required MLDC improvement",
            check=_at_least(0.0)),
    Setting("distributor.first_period", "distributor", "GEOPS_DISTRIBUTOR_FIRST_PERIOD",
            "--first-period", _str, "when the first period ends: min-items (as soon as M items "
            "are in) or full (after D, as the paper)", choices=FIRST_PERIODS.names),
    Setting("distributor.resync_periods", "distributor", "GEOPS_DISTRIBUTOR_RESYNC_PERIODS",
            "--resync-periods", _int, "periods to wait for the app to report a commanded epoch "
            "before re-synchronising with the epoch it does report", check=_at_least(1)),
    Setting("distributor.min_saving", "distributor", "GEOPS_DISTRIBUTOR_MIN_SAVING",
            "--min-saving", _float, "adaptive: the smallest saving worth a rebalance, as a "
            "share of a batch's duration", check=_at_least(0.0)),
    Setting("distributor.safety_margin", "distributor", "GEOPS_DISTRIBUTOR_SAFETY_MARGIN",
            "--safety-margin", _float, "adaptive: how many times over the predicted saving "
            "must pay for the move", check=_at_least(0.0)),
    Setting("distributor.stability_tolerance", "distributor",
            "GEOPS_DISTRIBUTOR_STABILITY_TOLERANCE", "--stability-tolerance", _float,
            "adaptive: how far (total variation of the per-partition load shares) a batch may "
            "be from the current load pattern before it starts a new one",
            check=_at_least(0.0)),
    Setting("distributor.stop_after_idle", "distributor", "GEOPS_DISTRIBUTOR_STOP_AFTER_IDLE",
            "--stop-after-idle", parse_duration,
            "stop once no metrics of the app arrived for this long (0 = never)"),
    Setting("dashboard.host", "dashboard", "GEOPS_DASHBOARD_HOST", "--host", _str,
            "address the dashboard listens on (127.0.0.1: this machine only)",
            check=_nonempty),
    Setting("dashboard.port", "dashboard", "GEOPS_DASHBOARD_PORT", "--port", _int,
            "port of the dashboard (0 = any free port)", check=_between(0, MAX_PORT)),
    Setting("dashboard.period", "dashboard", "GEOPS_DASHBOARD_PERIOD", "--period",
            parse_duration, "the page updates once a period, and each time series gets a "
            "point per period", check=_seconds_between(0.2, 60)),
    Setting("dashboard.history", "dashboard", "GEOPS_DASHBOARD_HISTORY", "--history",
            parse_duration, "how far back the time series reach (read back from Kafka at "
            "start)", check=_seconds_between(10, 2 * 3600)),
    Setting("dashboard.map_window", "dashboard", "GEOPS_DASHBOARD_MAP_WINDOW", "--map-window",
            parse_duration, "the map colours each partition by its load over this last "
            "stretch and shows its publications", check=_seconds_between(0.2, 600)),
)
BY_PATH = {s.path: s for s in SETTINGS}
FREE_TABLES = ("kafka.client", "spark.conf")
KAFKA_ENV_PREFIX = "GEOPS_KAFKA_"
# Spark properties with a setting of their own: Spark reads them only when its JVM starts, so
# ``geops app`` gives them to spark-submit (app/launch.py); in [spark.conf] they would do nothing.
LAUNCH_PROPERTIES = {"spark.driver.memory": "spark.driver_memory",
                     "spark.executor.memory": "spark.executor_memory",
                     "spark.driver.maxResultSize": "spark.driver_max_result_size",
                     "spark.driver.extraJavaOptions": "spark.driver_java_options"}


def _get(tree: Mapping[str, Any], path: str) -> Any:
    node: Any = tree
    for part in path.split("."):
        node = node[part]
    return node


def _set(tree: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if path in FREE_TABLES or (path.endswith(".config") and path.startswith("topics.")):
            yield path, value
        elif isinstance(value, Mapping):
            yield from _leaves(value, path + ".")
        else:
            yield path, value


class Config:
    """Resolved, validated settings. Read with ``cfg["app.strategy"]`` or the helpers."""

    def __init__(self, tree: dict[str, Any]):
        self.tree = tree

    def __getitem__(self, path: str) -> Any:
        return _get(self.tree, path)

    def topic(self, logical: str) -> str:
        """The configured name of a logical topic such as 'publications' or 'dead_letter'."""
        return self[f"topics.{logical}.name"]

    def kafka_client(self) -> dict[str, str]:
        """librdkafka settings shared by every client (pass-through table plus bootstrap)."""
        conf = {k: str(v) for k, v in self["kafka.client"].items()}
        conf["bootstrap.servers"] = self.bootstrap_servers()
        return conf

    def bootstrap_servers(self) -> str:
        explicit = self["kafka.bootstrap_servers"]
        if explicit:
            return explicit
        return running_address(self.state_dir()) or "127.0.0.1:9092"

    def state_dir(self) -> Path:
        raw = self["broker.state_dir"]
        if raw:
            return Path(raw).expanduser()
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "geops"

    def with_overrides(self, values: Mapping[str, Any]) -> Config:
        tree = copy.deepcopy(self.tree)
        for path, raw in values.items():
            _set(tree, path, BY_PATH[path].convert(raw) if path in BY_PATH else raw)
        return Config(tree)


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
            merged = dict(_get(tree, key)) if _has(tree, key) else {}
            merged.update(value)
            _set(tree, key, merged)
            continue
        setting = BY_PATH.get(key)
        if setting is None:
            raise ConfigError(f"config file {path}: unknown setting '{key}'")
        try:
            _set(tree, key, setting.convert(value))
        except ValueError as exc:
            raise ConfigError(f"config file {path}: {key}: {exc}") from None


def _has(tree: Mapping[str, Any], path: str) -> bool:
    try:
        _get(tree, path)
    except KeyError:
        return False
    return True


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
        _set(tree, key, BY_PATH[key].convert(value) if key in BY_PATH else value)
    for key in FREE_TABLES:
        if not _has(tree, key):
            _set(tree, key, {})

    config_file = config_file or environ.get("GEOPS_CONFIG") or None
    if config_file:
        path = Path(config_file).expanduser()
        _merge_file(tree, _read_toml(path, "--config"), path)

    for setting in SETTINGS:
        if setting.env in environ:
            try:
                _set(tree, setting.path, setting.convert(environ[setting.env]))
            except ValueError as exc:
                raise ConfigError(f"{setting.env} ({setting.path}): {exc}") from None
    client = dict(tree["kafka"]["client"])
    for name, value in environ.items():
        if name.startswith(KAFKA_ENV_PREFIX):
            client[name[len(KAFKA_ENV_PREFIX):].lower().replace("_", ".")] = value

    for path, raw in (flags or {}).items():
        setting = BY_PATH[path]
        try:
            _set(tree, path, setting.convert(raw))
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


def add_arguments(parser: argparse.ArgumentParser, groups: Iterable[str]) -> None:
    """Add --config, -X and the flags of the given setting groups to a parser."""
    wanted = set(groups)
    parser.add_argument("--config", metavar="FILE",
                        help="TOML file overriding config/default.toml (env: GEOPS_CONFIG)")
    if "kafka" in wanted:
        parser.add_argument("-X", dest="kafka_properties", action="append", default=[],
                            metavar="KEY=VALUE",
                            help="librdkafka property for every client, e.g. "
                                 "-X security.protocol=SASL_SSL (repeatable)")
    for setting in SETTINGS:
        if setting.group in wanted:
            parser.add_argument(setting.flag, dest=_dest(setting), default=None,
                                metavar=_metavar(setting),
                                help=f"{setting.help} [env: {setting.env}]")


def from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Config:
    """Resolve the configuration from parsed arguments made by ``add_arguments``."""
    flags = {s.path: getattr(args, _dest(s)) for s in SETTINGS
             if getattr(args, _dest(s), None) is not None}
    return load(getattr(args, "config", None), environ, flags,
                getattr(args, "kafka_properties", None) or ())


def _dest(setting: Setting) -> str:
    return "cfg__" + setting.path.replace(".", "__")


def _metavar(setting: Setting) -> str:
    if setting.choices:
        return "{" + ",".join(setting.choices) + "}"
    return setting.path.rsplit(".", 1)[-1].upper()
