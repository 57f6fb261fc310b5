"""The Dynamic Distributor's parameters (the paper's Table 1) plus metric, mode, when the
first period ends, how long it waits for the app to report a commanded epoch, and the three
tunables of mode adaptive (``distributor.adaptive``; Table 1's do not apply there).

Their defaults are the ``[distributor]`` table of config/default.toml, the one place Table 1 is
written down. The period D is not here: the engine counts periods, and only the loop that calls
``Engine.end_period`` every D seconds needs to know how long one is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import config
from config.choices import DISTRIBUTOR_MODES, FIRST_PERIODS, METRICS
from distributor.errors import InvalidParams

DEFAULTS = config.defaults()["distributor"]
# When the first period ends: as soon as M items are in (our default), or after the full D as
# every later period (the paper). Judging a skewed start ~D sooner is what lets one rebalance pay
# off in a short run; later periods, and every condition, are the paper's.


@dataclass(frozen=True)
class Params:
    """Table 1's values (mode dynamic uses them) and mode adaptive, as configured by default;
    ``metric`` LB = processing time, DB = item counts."""

    metric: str = DEFAULTS["metric"]
    mode: str = DEFAULTS["mode"]
    threshold: float = DEFAULTS["threshold"]
    min_items: int = DEFAULTS["min_items"]
    wait_periods: int = DEFAULTS["wait_periods"]
    min_improvement: float = DEFAULTS["min_improvement"]
    first_period: str = DEFAULTS["first_period"]
    # Periods the engine waits for the app to report an epoch it commanded (or restored) before
    # it gives up on it and re-synchronises with the epoch the app does report. Not the paper's:
    # its distributor trusts every command to be applied.
    resync_periods: int = DEFAULTS["resync_periods"]
    # Mode adaptive only (distributor.adaptive): the smallest saving worth a rebalance, as a
    # share of a batch's duration; how many times over the predicted saving must pay for the
    # move; how far (total variation of the per-partition load shares) a batch may be from
    # the current load pattern before it starts a new one.
    min_saving: float = DEFAULTS["min_saving"]
    safety_margin: float = DEFAULTS["safety_margin"]
    stability_tolerance: float = DEFAULTS["stability_tolerance"]

    def __post_init__(self) -> None:
        for name, allowed in (("metric", METRICS), ("mode", DISTRIBUTOR_MODES),
                              ("first_period", FIRST_PERIODS)):
            if getattr(self, name) not in allowed:
                raise InvalidParams(f"{name} must be one of {allowed.names}, got "
                                    f"{getattr(self, name)!r}")
        for name in ("threshold", "min_improvement", "min_saving", "safety_margin",
                     "stability_tolerance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    0 <= value < float("inf")):
                raise InvalidParams(f"{name} must be a finite number >= 0, got {value!r}")
        for name in ("min_items", "wait_periods"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidParams(f"{name} must be an integer >= 0, got {value!r}")
        value = self.resync_periods
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidParams(f"resync_periods must be an integer >= 1, got {value!r}")
        if self.mode == "adaptive" and self.metric != "LB":
            raise InvalidParams("mode adaptive (the default) decides on processing time: it needs "
                                f"metric LB, got {self.metric!r}; mode dynamic (Table 1) takes DB")
        if not 0 < self.stability_tolerance <= 1:
            raise InvalidParams(f"stability_tolerance must be in (0, 1], got "
                                f"{self.stability_tolerance!r}")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Params:
        """Params from the ``[distributor]`` table as the config resolves it.

        Keys that are not parameters of the engine (``period``, ``policy``) are left to the
        caller; missing keys take the Table 1 defaults.
        """
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in settings.items() if k in names})
