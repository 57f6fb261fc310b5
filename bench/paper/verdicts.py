"""The verdicts of the results README: the targets the project set, the paper's claims, how
complete a matrix is, how its Dynamic LB STAL runs rebalanced, the first-period A/B and the
simulation's claims, each computed from the rows of the results CSVs (``bench.paper.results``).

Comparisons of modes use only the repeats every compared point has (see ``_common``).
``bench.paper.paper_report`` renders these as Markdown.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from bench.harness.csv_tables import Row, csv_number
from bench.paper.plan import (
    AB_LABEL,
    BALANCED,
    DYNAMIC_DB_STAL,
    DYNAMIC_DB_STRL,
    DYNAMIC_LB_STRL,
    FIRST_PERIODS,
    MIN_STREAM_S,
    STATIC_STRL,
    full_plan,
)
from bench.paper.plan import DYNAMIC_LB_STAL as LB
from bench.paper.plan import STATIC_STAL as STATIC
from bench.paper.results import fig8_rows, pipeline_order

HIGH_SKEW = 0.7         # "every skew >= 0.7" in the targets
GAIN_REQUIRED = 1.4     # Dynamic LB STAL / Static STAL at the highest skew
KEEP_REQUIRED = 0.9     # Dynamic LB STAL at the highest skew / at the balanced skew
LB_DB_PAIRS = ((LB, DYNAMIC_DB_STAL), (DYNAMIC_LB_STRL, DYNAMIC_DB_STRL))
STAL_STRL_PAIRS = ((STATIC, STATIC_STRL), (LB, DYNAMIC_LB_STRL), (DYNAMIC_DB_STAL, DYNAMIC_DB_STRL))


Point = tuple[str, str, float]               # (pipeline, mode, skew)
Repeats = dict[Point, dict[int, float]]      # a value per repeat of each point


def _per_repeat(rows: Iterable[Row], column: str) -> Repeats:
    """``column`` of each repeat per (pipeline, mode, skew)."""
    out: Repeats = defaultdict(dict)
    for r in rows:
        value = csv_number(r.get(column))
        if value is not None:
            out[(r["pipeline"], r["mode"], float(r["skew"]))][int(r["repeat"])] = value
    return out


def _common(values: Repeats, points: Iterable[Point]) -> tuple[dict[Point, float], int]:
    """Mean of each point over the repeats all of them have, and how many: while the matrix
    is partial, a point with an extra repeat would tilt a comparison by however much that
    repeat ran faster or slower than the others."""
    points = list(points)
    common = set.intersection(*(set(values.get(p, {})) for p in points)) if points else set()
    if not common:
        return {}, 0
    return {p: statistics.fmean(values[p][i] for i in common) for p in points}, len(common)


def _paired(values: Repeats, a: Point, b: Point) -> tuple[float | None, int]:
    """Mean of ``a`` over mean of ``b`` on the repeats both points have, and how many."""
    means, n = _common(values, (a, b))
    return (means[a] / means[b], n) if n else (None, 0)


def _ratio_row(target: str, pipeline: str, skew: float | str, comparison: str,
               paired: tuple[float | None, int], required: float, note: str = ""
               ) -> dict[str, Any]:
    ratio, n = paired
    met = None if ratio is None or note else ratio >= required
    return {"target": target, "pipeline": pipeline, "skew": skew, "comparison": comparison,
            "ratio": ratio, "n": n, "required": required, "met": met, "note": note}


def targets(runs: Sequence[Row]) -> list[dict[str, Any]]:
    """The targets the project set, one row per pipeline (and skew / pair where they apply); each a
    ratio of mean throughputs over the repeats both compared points have."""
    values = _per_repeat(runs, "throughput")
    out: list[dict[str, Any]] = []
    pipes = pipeline_order(p for p, _, _ in values)
    for pipe in pipes:
        both = [s for (p, m, s) in values if p == pipe and m == LB and (p, STATIC, s) in values]
        if both:
            top = max(both)
            note = "only the balanced skew was run" if top <= BALANCED else ""
            out.append(_ratio_row("gain at the highest skew", pipe, top, f"{LB} / {STATIC}",
                                  _paired(values, (pipe, LB, top), (pipe, STATIC, top)),
                                  GAIN_REQUIRED, note))
        own = [s for (p, m, s) in values if p == pipe and m == LB]
        if own:
            top = max(own)
            paired = _paired(values, (pipe, LB, top), (pipe, LB, BALANCED))
            note = ("only the balanced skew was run" if top <= BALANCED else
                    "no run at the balanced skew" if (pipe, LB, BALANCED) not in values else
                    "no repeat run at both skews" if paired[0] is None else "")
            out.append(_ratio_row("kept at the highest skew", pipe, top,
                                  f"{LB} at {top} / at {BALANCED}", paired, KEEP_REQUIRED, note))
    for target, pairs in (("LB >= DB at skew >= 0.7", LB_DB_PAIRS[:1]),
                          ("STAL >= STRL at skew >= 0.7", STAL_STRL_PAIRS)):
        for pipe in pipes:
            for a, b in pairs:
                for s in sorted(s for (p, m, s) in values if p == pipe and m == a
                                and s >= HIGH_SKEW - 1e-9 and (p, b, s) in values):
                    out.append(_ratio_row(target, pipe, s, f"{a} / {b}",
                                          _paired(values, (pipe, a, s), (pipe, b, s)), 1.0))
    return out


def coverage(runs: Iterable[Row]) -> str:
    """How much of the full plan (every pipeline x mode x skew x 3 repeats) the runs cover,
    and which (repeat, skew) groups are still to run, so a partial matrix says what it lacks."""
    recorded = {r["run_id"] for r in runs}
    plan = full_plan()
    missing: dict[int, dict[float, int]] = defaultdict(lambda: defaultdict(int))
    per_repeat: dict[int, int] = defaultdict(int)
    for spec in plan:
        per_repeat[spec.repeat] += 1
        if spec.run_id not in recorded:
            missing[spec.repeat][spec.skew] += 1
    done = len(plan) - sum(sum(m.values()) for m in missing.values())
    text = f"Of the full plan's {len(plan)} runs, {done} are recorded"
    if not missing:
        return text + "."

    def group(repeat: int, skews: dict[float, int]) -> str:
        if sum(skews.values()) == per_repeat[repeat]:
            return f"repeat {repeat}: all {per_repeat[repeat]} runs"
        return f"repeat {repeat}: " + ", ".join(f"skew {s} ({n} run{'s' * (n != 1)})"
                                                for s, n in sorted(skews.items()))
    return text + "; still to run: " + "; ".join(
        group(rep, skews) for rep, skews in sorted(missing.items())) + "."


def streaming(runs: Iterable[Row]) -> str:
    """How long the runs streamed (first batch start to last batch end), and which ran under
    the full plan's minimum: a short run is dominated by its start and the skewed first
    batches, so its throughput says less."""
    streamed = sorted(((float(r["last_end_ms"]) - float(r["first_start_ms"])) / 1000,
                       r["run_id"]) for r in runs
                      if r.get("first_start_ms") and r.get("last_end_ms"))
    if not streamed:
        return ""
    seconds = [t for t, _ in streamed]
    text = (f"The runs streamed {seconds[0]:.0f}–{seconds[-1]:.0f} s each (median "
            f"{statistics.median(seconds):.0f} s, first batch start to last batch end); ")
    short = [f"{rid} ({t:.0f} s)" for t, rid in streamed if t < MIN_STREAM_S]
    if not short:
        return text + f"every one at least the {MIN_STREAM_S:.0f} s the full plan asks for."
    more = f" and {len(short) - 6} more" if len(short) > 6 else ""
    return (text + f"{len(short)} under the {MIN_STREAM_S:.0f} s the full plan asks for: "
            + ", ".join(short[:6]) + more + ".")


def _verdict(good: int, total: int) -> str:
    if total == 0:
        return "no data"
    return "holds" if good == total else "does not hold" if good == 0 else "partly"


def _best(values: Repeats, higher: bool) -> tuple[str, int, int, list[str]]:
    """Is Dynamic LB STAL the best mode at every (pipeline, skew) where it ran with others?
    The modes of a point are compared on the repeats all of them have."""
    points: dict[tuple[str, float], list[Point]] = defaultdict(list)
    for p, m, s in values:
        points[(p, s)].append((p, m, s))
    good, total, others = 0, 0, []
    for (p, s), keys in sorted(points.items()):
        means, _ = _common(values, keys)
        if (p, LB, s) not in means or len(means) < 2:
            continue
        best = (max if higher else min)(means, key=means.__getitem__)[1]
        total += 1
        if best == LB:
            good += 1
        else:
            others.append(f"{p} {s}: {best}")
    return _verdict(good, total), good, total, others


def _pairs(values: Repeats, pairs: Sequence[tuple[str, str]]
           ) -> tuple[str, int, int, list[str]]:
    """Does the first mode of each pair beat the second at every (pipeline, skew)?"""
    good, total, misses = 0, 0, []
    for (p, m, s) in sorted(values):
        for a, b in pairs:
            if m != a:
                continue
            means, n = _common(values, ((p, a, s), (p, b, s)))
            if not n:
                continue
            total += 1
            va, vb = means[(p, a, s)], means[(p, b, s)]
            if va > vb:
                good += 1
            else:
                misses.append(f"{p} {s}: {a} {va:,.0f} vs {b} {vb:,.0f} (n={n})")
    return _verdict(good, total), good, total, misses


def _gain_growth(values: Repeats) -> tuple[str, list[str]]:
    """Does Dynamic LB STAL / Static STAL grow from the lowest to the highest skew?"""
    grows, total, lines = 0, 0, []
    for pipe in pipeline_order(p for p, _, _ in values):
        ratios = {}
        for p, m, s in values:
            if p == pipe and m == LB:
                ratio, _ = _paired(values, (p, LB, s), (p, STATIC, s))
                if ratio is not None:
                    ratios[s] = ratio
        if len(ratios) < 2:
            continue
        skews = sorted(ratios)
        total += 1
        grows += ratios[skews[-1]] > ratios[skews[0]]
        lines.append(f"{pipe} " + ", ".join(f"{s}: {ratios[s]:.2f}" for s in skews))
    return _verdict(grows, total), lines


def rebalance_runs(runs: Iterable[Row], status: Iterable[Row]) -> list[dict[str, Any]]:
    """Per Dynamic LB STAL run: rebalances, its MLDC before and after the first rebalance."""
    periods: dict[str, list[Row]] = defaultdict(list)
    for s in status:
        periods[s["run_id"]].append(s)
    out = []
    for run in runs:
        if run["mode"] != LB:
            continue
        own = sorted(periods.get(run["run_id"], []), key=lambda s: int(s["period"]))
        values = [(int(s["period"]), csv_number(s["mldc"]), s["decision"]) for s in own]
        first = next((k for k, _, d in values if d == "rebalance"), None)
        before = [m for k, m, _ in values if m is not None and (first is None or k <= first)]
        after = [m for k, m, _ in values if m is not None and first is not None and k > first]
        threshold = csv_number(own[0]["threshold"]) if own else None
        rebalances = int(run["rebalances"])
        over_after = sum(m > threshold for m in after) if threshold is not None else 0
        if not own:
            kind = "no status"
        elif rebalances == 0:
            needed = threshold is not None and any(m > threshold for m in before)
            kind = "no rebalance, MLDC went over" if needed else "no rebalance needed"
        elif rebalances == 1:
            kind = "one rebalance, then under" if not over_after else (
                "one rebalance, then over at times")
        else:
            kind = "several rebalances"
        out.append({"run_id": run["run_id"], "pipeline": run["pipeline"],
                    "skew": float(run["skew"]), "repeat": int(run["repeat"]),
                    "rebalances": rebalances, "first_rebalance_period": first,
                    "max_mldc_before": max(before, default=None),
                    "max_mldc_after": max(after, default=None),
                    "periods_after": len(after), "periods_after_over": over_after,
                    "threshold": threshold, "kind": kind})
    return out


def _best_claim(claim: str, values: Repeats, higher: bool, word: str, points: str,
                elsewhere: str) -> dict[str, str]:
    """The claim that Dynamic LB STAL is the best mode, with how often it is and where not."""
    verdict, good, total, others = _best(values, higher)
    return {"claim": claim, "finding": f"{word} at {good} of {total}{points}"
            + (f"; {elsewhere}{'; '.join(others)}" if others else ""), "verdict": verdict}


def _pairs_claim(claim: str, values: Repeats, pairs: Sequence[tuple[str, str]],
                 points: str) -> dict[str, str]:
    """The claim that the first mode of each pair beats the second, and where it does not."""
    verdict, good, total, misses = _pairs(values, pairs)
    return {"claim": claim, "finding": f"higher at {good} of {total}{points}"
            + (f"; not at {'; '.join(misses)}" if misses else ""), "verdict": verdict}


def claims(runs: Sequence[Row], status: Sequence[Row], moves: Sequence[Row]
           ) -> list[dict[str, str]]:
    """Each claim of the paper, what our runs show, and a verdict computed from them."""
    thr = _per_repeat(runs, "throughput")
    out = [_best_claim("Dynamic LB STAL has the highest throughput (every pipeline, skew)", thr,
                       True, "best", " (pipeline, skew) points", "elsewhere the best is "),
           _best_claim("Dynamic LB STAL has the lowest mean latency (paper: except RIsPS at its "
                       "lowest skew)", _per_repeat(runs, "latency_mean_ms"), False, "lowest",
                       " points", "elsewhere the lowest is ")]
    verdict, lines = _gain_growth(thr)
    out.append({"claim": "Its gain over Static STAL grows with the skew",
                "finding": "Dynamic LB STAL / Static STAL by skew: " + "; ".join(lines)
                if lines else "fewer than two skews with both modes",
                "verdict": verdict})
    out += [_pairs_claim("LB beats DB (throughput)", thr, LB_DB_PAIRS, " comparable points"),
            _pairs_claim("STAL beats STRL (throughput)", thr, STAL_STRL_PAIRS,
                         " comparable points")]
    reb = rebalance_runs(runs, status)
    needing = [r for r in reb if r["kind"] not in ("no rebalance needed", "no status")]
    ok = sum(r["kind"] == "one rebalance, then under" for r in needing)
    kinds: dict[str, int] = defaultdict(int)
    for r in reb:
        kinds[r["kind"]] += 1
    out.append({"claim": "One rebalance, then MLDC stays under the threshold (Dynamic LB STAL)",
                "finding": f"{ok} of {len(needing)} runs that rebalanced or went over the "
                           f"threshold; all runs: "
                           + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())),
                "verdict": _verdict(ok, len(needing))})
    sizes = fig8_rows(moves)
    durations = [r["duration_s_mean"] for r in sizes]
    grows = all(b > a for a, b in itertools.pairwise(durations))
    out.append({"claim": "Redistribution time grows with the static data size",
                "finding": ", ".join(f"{r['subscriptions']:,} subscriptions: "
                                     f"{r['duration_s_mean']:.2f} s ({r['mb_moved_mean']:.1f} MB,"
                                     f" n={r['moves']})" for r in sizes) or "no moves",
                "verdict": "no data" if len(sizes) < 2 else "holds" if grows
                else "does not hold"})
    return out


def simulation_claims(sims: Sequence[Row]) -> list[dict[str, str]]:
    """The paper's throughput claims, judged on the simulated runs (``simulation.csv``)."""
    thr = _per_repeat(sims, "throughput")
    verdict, growth = _gain_growth(thr)
    return [_best_claim("Dynamic LB STAL has the highest throughput", thr, True, "best", "",
                        "elsewhere "),
            {"claim": "Its gain over Static STAL grows with the skew",
             "finding": "; ".join(growth) or "–", "verdict": verdict},
            _pairs_claim("LB beats DB", thr, LB_DB_PAIRS, ""),
            _pairs_claim("STAL beats STRL", thr, STAL_STRL_PAIRS, "")]


def _ab_variant(run_id: str) -> str | None:
    """Static STAL, or the first period of a Dynamic LB STAL run, of the first-period A/B."""
    if run_id.endswith(f"-{AB_LABEL}"):
        return STATIC
    return next((fp for fp in FIRST_PERIODS if run_id.endswith(f"-{AB_LABEL}-{fp}")), None)



def first_period_points(runs: Iterable[Row], batches: Iterable[Row]) -> list[dict[str, Any]]:
    """Per (pipeline, skew) of the first-period A/B: the throughputs of Static STAL
    (``static``) and of Dynamic LB STAL with each first period (``dynamic``), the ratio of
    their means (``ratio``, None without both) and, per first period, the seconds each run that
    rebalanced stayed on epoch 0 (``epoch0_s``: first batch to the first batch under the new
    assignment). [] when no run belongs to the A/B."""
    runs = list(runs)
    groups: dict[tuple[str, float, str], list[float]] = defaultdict(list)
    for r in runs:
        variant = _ab_variant(r["run_id"])
        if variant is not None:
            groups[(r["pipeline"], float(r["skew"]), variant)].append(float(r["throughput"]))
    if not groups:
        return []
    first: dict[str, float] = {}
    switch: dict[str, float] = {}
    for b in batches:
        rid, start = b["run_id"], float(b["start_ms"])
        first[rid] = min(first.get(rid, start), start)
        if int(b["epoch"]) > 0:
            switch[rid] = min(switch.get(rid, start), start)
    skewed: dict[tuple[str, float, str], list[float]] = defaultdict(list)
    for r in runs:
        variant = _ab_variant(r["run_id"])
        if variant in FIRST_PERIODS and r["run_id"] in switch:
            skewed[(r["pipeline"], float(r["skew"]), variant)].append(
                (switch[r["run_id"]] - first[r["run_id"]]) / 1000)
    order = pipeline_order(p for p, _, _ in groups)
    out = []
    for pipeline, skew in sorted({(p, s) for p, s, _ in groups},
                                 key=lambda k: (order.index(k[0]), k[1])):
        static = groups.get((pipeline, skew, STATIC), [])
        dynamic = {fp: groups.get((pipeline, skew, fp), []) for fp in FIRST_PERIODS}
        out.append({
            "pipeline": pipeline, "skew": skew, "static": static, "dynamic": dynamic,
            "ratio": {fp: statistics.mean(dyn) / statistics.mean(static)
                      if dyn and static else None for fp, dyn in dynamic.items()},
            "epoch0_s": {fp: skewed.get((pipeline, skew, fp), []) for fp in FIRST_PERIODS}})
    return out
