"""The geops configuration: one default file, overridden by a user file, the environment and flags.

The package's modules, each with one job:

- ``values``: parsers and range checks of single values (durations, memory sizes, ...)
- ``settings``: the registry, every setting with its TOML path, variable, flag and parser
- ``resolved``: ``Config``, the validated tree the other packages read
- ``loading``: ``load``, resolving defaults < file < environment < flags
- ``arguments``: the settings' command-line flags
- ``errors``: ``GeopsError``, the base of every geops error, and ``one_line``, its message
- ``choices``, ``exitcodes``, ``embedded``: enumerated choices, exit codes, the local broker's
  address record

This module re-exports what the other packages use.
"""

from config.arguments import add_arguments, from_args
from config.errors import ConfigError, GeopsError, one_line
from config.loading import DEFAULT_FILE, defaults, load
from config.resolved import Config
from config.settings import BY_PATH, SETTINGS, TOPICS, Setting
from config.values import parse_bytes, parse_duration, parse_memory

__all__ = [
    "BY_PATH",
    "DEFAULT_FILE",
    "SETTINGS",
    "TOPICS",
    "Config",
    "ConfigError",
    "GeopsError",
    "Setting",
    "add_arguments",
    "defaults",
    "from_args",
    "load",
    "one_line",
    "parse_bytes",
    "parse_duration",
    "parse_memory",
]
