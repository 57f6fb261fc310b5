"""Entry point of the `geops` command: one subcommand per module listed in COMMANDS.

Each module in ``cli/`` exposes ``register(subparsers)``, which adds its subcommand(s) and sets
``func`` (taking the parsed arguments, returning an exit code) as the parser default.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from config import ConfigError

# Order is the order of `geops --help`.
COMMANDS = (
    "cli.broker",
    "cli.topics",
    "cli.produce",
    "cli.tail",
    "cli.generate",
)

EXIT_OK = 0
EXIT_FAILED = 1      # the work failed (broker unreachable, app crashed, ...)
EXIT_USAGE = 2       # bad command line or configuration
EXIT_REJECTED = 3    # the work was done but some input records were rejected


class CommandError(Exception):
    """An expected failure with a message for the user (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="geops",
        description="Kafka-native geospatial publish/subscribe on Spark "
                    "that balances its own load.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"geops {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CommandError as exc:
        print(f"geops {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"geops {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
