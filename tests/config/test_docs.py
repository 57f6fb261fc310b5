"""docs/configuration.md lists every setting, so the documentation cannot drift silently."""

from pathlib import Path

import config

DOC = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()


def test_every_setting_is_documented():
    missing = [s.path for s in config.SETTINGS
               if f"`{s.path}`" not in DOC or f"`{s.flag}`" not in DOC or f"`{s.env}`" not in DOC]
    assert not missing, f"add these to docs/configuration.md: {missing}"
