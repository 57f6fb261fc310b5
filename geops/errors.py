"""The errors of the geospatial core: input files, workload parameters and fences it refuses.

Each is a ``ValueError`` too (what the caller passed is unusable), as it was before they
shared a base.
"""

from __future__ import annotations

from collections.abc import Callable

from config.errors import GeopsError


class GeoJSONError(GeopsError, ValueError):
    """The file as a whole is unusable (not JSON, not a FeatureCollection)."""


class DataError(GeopsError, ValueError):
    """A whole input file is unusable (missing, no header, no usable rows)."""


class FenceError(GeopsError, ValueError):
    """A distance fence that cannot be made; the message names the subscription."""


class ParameterError(GeopsError, ValueError):
    """A bad generator parameter. ``text`` may name other parameters as ``{name}``.

    ``render(style)`` spells every parameter with ``style`` (the CLI passes one that turns
    ``hot_workers`` into ``--hot-workers``), so the API and the command report the same check.
    """

    def __init__(self, param: str, text: str):
        self.param = param
        self.text = text
        super().__init__(self.render(lambda name: name))

    def render(self, style: Callable[[str], str]) -> str:
        class Names(dict):
            def __missing__(self, name: str) -> str:
                return style(name)

        return f"{style(self.param)} {self.text.format_map(Names())}"
