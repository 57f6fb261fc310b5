"""The settings on the command line: each command's parser gets the flags of the setting groups
it uses, and the parsed flags go to ``load`` above the file and the environment."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping

from config.loading import load
from config.resolved import Config
from config.settings import SETTINGS, Setting


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
