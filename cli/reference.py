"""The command-line reference (`docs/cli.md`), generated from the argparse definitions so it
cannot drift from them: ``python -m cli.reference > docs/cli.md``; a test checks that the file
is current."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator

WIDTH = "100"  # argparse wraps help at $COLUMNS


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(command words, parser) of every command and subcommand, parents first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, (*path, name))


def reference() -> str:
    """The Markdown reference: one section per command with its `--help`."""
    from cli.main import build_parser

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parts = ["# Command-line reference", "",
                 "Generated from the argparse definitions by `python -m cli.reference > "
                 "docs/cli.md` (`tests/cli/test_reference.py` checks it is current). Settings "
                 "that several commands share, with their environment variables and config "
                 "keys: [configuration.md](configuration.md).", ""]
        for words, parser in commands(build_parser()):
            title = " ".join(("geops", *words))
            parts += [f"## `{title}`", "", "```", parser.format_help().rstrip(), "```", ""]
        return "\n".join(parts)
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


if __name__ == "__main__":
    sys.stdout.write(reference())
