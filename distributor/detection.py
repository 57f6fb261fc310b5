"""Load imbalance detection (Section 3.2): MLDC over the threshold plus three extra conditions.

Every condition is evaluated every period, whether or not the others hold, so the status can
show which one blocked a redistribution:

- ``over_threshold``: MLDC > threshold;
- ``enough_items``: at least M stream items were processed in the period being judged (under
  the assignment in force), so loads are never judged on a handful of items: not right after
  a start or a rebalance, and not on the trickle at the end of a stream;
- ``cooled_down``: the last assignment change (command, restore or adoption) is at least N
  periods old, so commands are at least N*D seconds apart;
- ``improves_enough``: MLDC - MLDC_new > miMLDC for the policy's proposal; None when it could
  not be computed (no load, or the assignment in force is not fully known).
"""

from __future__ import annotations

from dataclasses import dataclass

from distributor.params import Params


@dataclass(frozen=True)
class Verdict:
    """The four conditions of one period and a one-line account of them."""

    over_threshold: bool
    enough_items: bool
    cooled_down: bool
    improves_enough: bool | None
    reason: str

    @property
    def rebalance(self) -> bool:
        """True only when all four conditions hold."""
        return (self.over_threshold and self.enough_items and self.cooled_down
                and self.improves_enough is True)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def judge(params: Params, mldc: float | None, mldc_predicted: float | None, period_items: int,
          periods_since_change: int | None) -> Verdict:
    """Evaluate the conditions; ``periods_since_change`` is None when nothing changed yet."""
    over = mldc is not None and mldc > params.threshold
    enough = period_items >= params.min_items
    cooled = periods_since_change is None or periods_since_change >= params.wait_periods
    improves = None if mldc is None or mldc_predicted is None else (
        mldc - mldc_predicted > params.min_improvement)
    since = "no change yet" if periods_since_change is None else (
        f"{periods_since_change} period(s) since the last change")
    parts = [
        ("over threshold", over, f"MLDC {_fmt(mldc)} vs threshold {params.threshold}"),
        ("enough items", enough, f"{period_items} items in period vs M={params.min_items}"),
        ("cooled down", cooled, f"{since} vs N={params.wait_periods}"),
        ("improves enough", improves,
         f"MLDC {_fmt(mldc)} -> {_fmt(mldc_predicted)} vs miMLDC={params.min_improvement}"),
    ]
    words = {True: "held", False: "FAILED", None: "unknown"}
    reason = "; ".join(f"{name} {words[ok]} ({detail})" for name, ok, detail in parts)
    return Verdict(over, enough, cooled, improves, reason)
