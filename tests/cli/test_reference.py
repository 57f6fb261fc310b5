"""docs/cli.md is the argparse definitions' help, current."""

from pathlib import Path

from cli.reference import reference

DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def test_the_cli_reference_is_current():
    assert DOC.read_text() == reference(), (
        "docs/cli.md is out of date: python -m cli.reference > docs/cli.md")


def test_every_command_has_a_section():
    text = reference()
    for name in ("geops broker start", "geops app", "geops dashboard", "geops bench live"):
        assert f"## `{name}`" in text
