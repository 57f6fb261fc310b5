"""Entry point of the `geops` command: one subcommand per module listed in COMMANDS.

Each module in ``cli/`` exposes ``register(subparsers)``, which adds its subcommand(s) and sets
``func`` (taking the parsed arguments, returning an exit code) as the parser default.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from config.errors import GeopsError, one_line
from config.exitcodes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE

# Order is the order of `geops --help`.
COMMANDS = (
    "cli.broker",
    "cli.topics",
    "cli.produce",
    "cli.tail",
    "cli.app",
    "cli.distributor",
    "cli.generate",
    "cli.match",
    "cli.stats",
    "cli.dashboard",
    "cli.bench",
)

class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: what is wrong and where to look.

    argparse prints the whole usage before the error, which buries the one line that matters
    (for `geops app`, dozens of lines); subparsers inherit this class.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args.raw_argv = argv  # for commands that pass their options on (geops app)
    try:
        return int(args.func(args) or 0)
    except GeopsError as exc:  # an expected failure: its one line and its exit code
        print(one_line(exc, f"geops {args.command}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"geops {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MemoryError:  # sizes the machine cannot hold, e.g. a typo in a count
        print(f"geops {args.command}: out of memory; try smaller sizes or counts",
              file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
