"""The paper's figures (Fig. 4-8) from the physical runs' CSVs, and Fig. 9 from the simulation:
matplotlib only; reading the rows is ``bench.harness.csv_tables``, tabulating them
``bench.paper.results``.

Every figure function takes the results directory, writes ``<name>.png`` and ``<name>.csv``
(the numbers drawn) there and returns the PNG's path, or None with a logged note when the data
it needs is missing (a quick run has one pipeline only, for instance). Only the runs of the
main plan count for Fig. 4-7: the Fig. 8 runs (``run_id`` with a label such as ``-n1000``)
differ in size and are left out there.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.harness.csv_tables import Row, csv_number, read_rows, write_csv
from bench.harness.plots import pyplot
from bench.paper.plan import DYNAMIC_LB_STAL, RUN_MODES, STATIC_STAL
from bench.paper.results import fig8_rows, mode_order, pipeline_order, plan_runs, point_table

plt = pyplot()
Log = Callable[[str], None]

# Colour by balancing, line and marker by join location (STRL dashed).
_COLOURS = {"static": "0.35", "LB": "tab:blue", "DB": "tab:orange", "adaptive": "tab:green"}
FIG6_MODES = (STATIC_STAL, DYNAMIC_LB_STAL)


def mode_style(mode: str) -> dict[str, Any]:
    join, balancing = RUN_MODES.get(mode, ("STAL", "static"))
    return {"color": _COLOURS[balancing], "linestyle": "--" if join == "STRL" else "-",
            "marker": "s" if join == "STRL" else "o", "markersize": 4, "label": mode}


def _panels(count: int, rows: int = 1, width: float = 4.2, height: float = 3.4):
    fig, axes = plt.subplots(rows, count, figsize=(width * count, height * rows), squeeze=False)
    return fig, axes


def _legend_below(fig, axes: Iterable, columns: int) -> float:
    """One legend for all ``axes`` under the panels; returns the figure fraction it takes."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if not seen:
        return 0.0
    ncol = max(1, min(len(seen), 3 * columns))
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=ncol, fontsize=8,
               frameon=False)
    return (0.25 * math.ceil(len(seen) / ncol) + 0.1) / fig.get_figheight()


def _save(fig, path: Path, log: Log, bottom: float = 0.0) -> Path:
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    log(f"figures: wrote {path.name}")
    return path


def _errorbars(ax, table: list[dict[str, Any]], pipeline: str, column: str,
               scale: float = 1.0) -> None:
    for mode in mode_order(r["mode"] for r in table if r["pipeline"] == pipeline):
        pts = sorted((r for r in table if r["pipeline"] == pipeline and r["mode"] == mode),
                     key=lambda r: r["skew"])
        pts = [r for r in pts if not math.isnan(r[f"{column}_mean"])]
        if not pts:
            continue
        mean = [r[f"{column}_mean"] * scale for r in pts]
        low = [m - r[f"{column}_min"] * scale for m, r in zip(mean, pts, strict=True)]
        high = [r[f"{column}_max"] * scale - m for m, r in zip(mean, pts, strict=True)]
        ax.errorbar([r["skew"] for r in pts], mean, yerr=[low, high], capsize=3,
                    **mode_style(mode))


def _by_skew_figure(results_dir: Path, name: str, table: list[dict[str, Any]],
                    panels: Sequence[tuple[str, str, float]], title: str, log: Log) -> Path:
    """One column per pipeline, one row per (column, y label, scale) in ``panels``."""
    pipes = pipeline_order(r["pipeline"] for r in table)
    fig, axes = _panels(len(pipes), len(panels))
    for i, (column, label, scale) in enumerate(panels):
        for j, pipeline in enumerate(pipes):
            ax = axes[i][j]
            _errorbars(ax, table, pipeline, column, scale)
            ax.set_title(pipeline)
            ax.set_xlabel("skew coefficient")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
    bottom = _legend_below(fig, axes.flat, len(pipes))
    fig.suptitle(title)
    write_csv(results_dir / f"{name}.csv", table)
    return _save(fig, results_dir / f"{name}.png", log, bottom)


def fig4_throughput(results_dir: Path, log: Log = print) -> Path | None:
    """Fig. 4: throughput vs skew, one panel per pipeline, one line per mode (min-max bars)."""
    runs = plan_runs(read_rows(results_dir / "runs.csv"))
    if not runs:
        log("figures: no runs in runs.csv; Fig. 4 skipped")
        return None
    table = point_table(runs, ["throughput"])
    return _by_skew_figure(results_dir, "fig4_throughput", table,
                           [("throughput", "throughput (publications/s)", 1.0)],
                           "Throughput vs skew (mean of repeats, bars: min-max)", log)


def fig5_latency(results_dir: Path, log: Log = print) -> Path | None:
    """Fig. 5: mean latency (top) and p99 latency (bottom) vs skew, in seconds."""
    runs = [r for r in plan_runs(read_rows(results_dir / "runs.csv"))
            if csv_number(r.get("latency_mean_ms")) is not None]
    if not runs:
        log("figures: no run with a latency in runs.csv; Fig. 5 skipped")
        return None
    table = point_table(runs, ["latency_mean_ms", "latency_p99_ms"])
    return _by_skew_figure(results_dir, "fig5_latency", table,
                           [("latency_mean_ms", "mean latency (s)", 1e-3),
                            ("latency_p99_ms", "p99 latency (s)", 1e-3)],
                           "Latency vs skew (mean of repeats, bars: min-max)", log)


def _pick_runs(runs: list[Row], pipeline: str, modes: Sequence[str]) -> dict[float, list[Row]]:
    """Per skew, one run of each of ``modes`` of the lowest repeat that has them all."""
    out: dict[float, list[Row]] = {}
    for skew in sorted({float(r["skew"]) for r in runs if r["pipeline"] == pipeline}):
        for repeat in sorted({int(r["repeat"]) for r in runs}):
            chosen = [next((r for r in runs if r["pipeline"] == pipeline and r["mode"] == m
                            and float(r["skew"]) == skew and int(r["repeat"]) == repeat), None)
                      for m in modes]
            if all(chosen):
                out[skew] = chosen
                break
    return out


def fig6_throughput_time_sps(results_dir: Path, log: Log = print) -> Path | None:
    """Fig. 6: sPS per-batch throughput (records / batch duration) over time, per skew.

    The dashed line is the time-weighted mean of the solid one (sum of records / sum of batch
    durations). One repeat is shown: the lowest that has both modes.
    """
    picked = _pick_runs(plan_runs(read_rows(results_dir / "runs.csv")), "sPS", FIG6_MODES)
    if not picked:
        log("figures: no sPS run with both Static STAL and Dynamic LB STAL; Fig. 6 skipped")
        return None
    ids = {r["run_id"]: r for runs in picked.values() for r in runs}
    batches: dict[str, list[Row]] = defaultdict(list)
    for b in read_rows(results_dir / "batches.csv"):
        if b["run_id"] in ids and float(b["duration_ms"]) > 0:
            batches[b["run_id"]].append(b)
    fig, axes = _panels(1, len(picked), width=8, height=2.6)
    rows: list[dict[str, Any]] = []
    for i, (skew, runs) in enumerate(sorted(picked.items())):
        ax = axes[i][0]
        for run in runs:
            own = sorted(batches[run["run_id"]], key=lambda b: int(b["batch_id"]))
            if not own:
                continue
            t0 = min(float(b["start_ms"]) for b in own)
            xs = [(float(b["end_ms"]) - t0) / 1000 for b in own]
            ys = [float(b["records"]) / (float(b["duration_ms"]) / 1000) for b in own]
            mean = (sum(float(b["records"]) for b in own)
                    / (sum(float(b["duration_ms"]) for b in own) / 1000))
            style = mode_style(run["mode"])
            ax.plot(xs, ys, color=style["color"], label=run["mode"], linewidth=1)
            ax.axhline(mean, color=style["color"], linestyle="--", linewidth=1)
            rows += [{"run_id": run["run_id"], "mode": run["mode"], "skew": skew,
                      "repeat": run["repeat"], "batch_id": b["batch_id"], "time_s": x,
                      "throughput": y, "mean_throughput": mean}
                     for b, x, y in zip(own, xs, ys, strict=True)]
        ax.set_title(f"sPS, skew {skew} (repeat {runs[0]['repeat']})", fontsize=9)
        ax.set_ylabel("publications/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[-1][0].set_xlabel("time since the first batch started (s)")
    write_csv(results_dir / "fig6_throughput_time_sps.csv", rows)
    return _save(fig, results_dir / "fig6_throughput_time_sps.png", log)


def fig7_mldc_time(results_dir: Path, log: Log = print) -> Path | None:
    """Fig. 7: sPS MLDC per distributor period over time, Static STAL vs Dynamic LB STAL.

    The dashed line is the threshold; a triangle marks a period that commanded a rebalance.
    Time is counted from the run's first status.
    """
    picked = _pick_runs(plan_runs(read_rows(results_dir / "runs.csv")), "sPS", FIG6_MODES)
    ids = {r["run_id"] for runs in picked.values() for r in runs}
    statuses: dict[str, list[Row]] = defaultdict(list)
    for s in read_rows(results_dir / "status.csv"):
        if s["run_id"] in ids:
            statuses[s["run_id"]].append(s)
    if not any(csv_number(s["mldc"]) is not None for own in statuses.values() for s in own):
        log("figures: no sPS MLDC statuses for Static STAL and Dynamic LB STAL; Fig. 7 skipped")
        return None
    fig, axes = _panels(1, len(picked), width=8, height=2.6)
    rows: list[dict[str, Any]] = []
    for i, (skew, runs) in enumerate(sorted(picked.items())):
        ax = axes[i][0]
        threshold = None
        for run in runs:
            own = sorted(statuses[run["run_id"]], key=lambda s: int(s["period"]))
            if not own:
                continue
            t0 = float(own[0]["time_ms"])
            pts = [((float(s["time_ms"]) - t0) / 1000, csv_number(s["mldc"]), s) for s in own]
            pts = [(t, m, s) for t, m, s in pts if m is not None]
            threshold = csv_number(own[0]["threshold"])
            style = mode_style(run["mode"])
            ax.plot([t for t, _, _ in pts], [m for _, m, _ in pts], color=style["color"],
                    label=run["mode"], linewidth=1, marker=".")
            hits = [(t, m) for t, m, s in pts if s["decision"] == "rebalance"]
            if hits:
                ax.plot(*zip(*hits, strict=True), linestyle="", marker="v", color="tab:red",
                        markersize=7, label="rebalance commanded")
            rows += [{"run_id": run["run_id"], "mode": run["mode"], "skew": skew,
                      "repeat": run["repeat"], "period": s["period"], "time_s": t, "mldc": m,
                      "threshold": s["threshold"], "decision": s["decision"]}
                     for t, m, s in pts]
        if threshold is not None:
            ax.axhline(threshold, color="black", linestyle="--", linewidth=1,
                       label="threshold")
        ax.set_title(f"sPS, skew {skew} (repeat {runs[0]['repeat']})", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("MLDC")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1][0].set_xlabel("time since the distributor's first period (s)")
    write_csv(results_dir / "fig7_mldc_time.csv", rows)
    return _save(fig, results_dir / "fig7_mldc_time.png", log)


def fig8_redistribution(results_dir: Path, log: Log = print) -> Path | None:
    """Fig. 8: redistribution time vs static data size (sPS, Dynamic LB STAL, skew 0.7)."""
    rows = fig8_rows(read_rows(results_dir / "moves.csv"))
    if not rows:
        log("figures: no sPS Dynamic LB STAL skew 0.7 move in moves.csv; Fig. 8 skipped")
        return None
    fig, axes = _panels(1)
    ax = axes[0][0]
    xs = [r["subscriptions"] for r in rows]
    mean = [r["duration_s_mean"] for r in rows]
    ax.errorbar(xs, mean, yerr=[[m - r["duration_s_min"] for m, r in zip(mean, rows,
                                                                            strict=True)],
                                [r["duration_s_max"] - m for m, r in zip(mean, rows,
                                                                            strict=True)]],
                marker="o", capsize=3, color="tab:blue", label="redistribution time")
    ax.set_xscale("log")
    ax.set_xlabel("subscriptions (static data)")
    ax.set_ylabel("redistribution time (s)", color="tab:blue")
    ax.grid(alpha=0.3)
    twin = ax.twinx()
    twin.plot(xs, [r["mb_moved_mean"] for r in rows], marker="s", linestyle="--",
              color="tab:gray", label="MB moved")
    twin.set_ylabel("MB moved (mean)", color="tab:gray")
    ax.set_title(f"sPS, skew 0.7 ({rows[0]['source']})", fontsize=9)
    write_csv(results_dir / "fig8_redistribution.csv", rows)
    return _save(fig, results_dir / "fig8_redistribution.png", log)


def fig9_simulation(results_dir: Path, log: Log = print) -> Path | None:
    """Fig. 9: simulated throughput vs skew at W = 16 (top) and, at the highest skew, the
    simulated MLDC over time of Static STAL vs Dynamic LB STAL (bottom, first repeat)."""
    sims = read_rows(results_dir / "simulation.csv")
    if not sims:
        log("figures: no simulation.csv; Fig. 9 skipped")
        return None
    table = point_table(sims, ["throughput"])
    pipes = pipeline_order(r["pipeline"] for r in table)
    mldc_rows = read_rows(results_dir / "simulation_mldc.csv")
    fig, axes = _panels(len(pipes), 2)
    for j, pipeline in enumerate(pipes):
        ax = axes[0][j]
        _errorbars(ax, table, pipeline, "throughput")
        ax.set_title(f"{pipeline} (simulated, W=16)")
        ax.set_xlabel("skew coefficient (3 hot workers of 16)")
        ax.set_ylabel("throughput (publications/s)")
        ax.grid(alpha=0.3)
        own = [r for r in mldc_rows if r["pipeline"] == pipeline and r["mode"] in FIG6_MODES]
        ax = axes[1][j]
        if own:
            skew = max(float(r["skew"]) for r in own)
            repeat = min(int(r["repeat"]) for r in own)
            for mode in FIG6_MODES:
                pts = [(float(r["time_s"]), float(r["mldc"])) for r in own
                       if r["mode"] == mode and float(r["skew"]) == skew
                       and int(r["repeat"]) == repeat and r["mldc"] != ""]
                if pts:
                    ax.plot(*zip(*pts, strict=True), color=mode_style(mode)["color"],
                            marker=".", linewidth=1, label=mode)
            ax.axhline(float(own[0]["threshold"]), color="black", linestyle="--",
                       linewidth=1, label="threshold")
            ax.set_title(f"{pipeline}: simulated MLDC, skew {skew}, repeat {repeat}",
                         fontsize=9)
            ax.legend(fontsize=7)
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("MLDC (LB: processing time)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    bottom = _legend_below(fig, axes[0], len(pipes))
    write_csv(results_dir / "fig9_simulation.csv", table)
    return _save(fig, results_dir / "fig9_simulation.png", log, bottom)


FIGURES: tuple[Callable[[Path, Log], Path | None], ...] = (
    fig4_throughput, fig5_latency, fig6_throughput_time_sps, fig7_mldc_time,
    fig8_redistribution, fig9_simulation)


def make_all(results_dir: Path, log: Log = print) -> list[Path]:
    """Draw every figure the data allows; returns the PNGs written."""
    results_dir = Path(results_dir)
    return [p for p in (figure(results_dir, log) for figure in FIGURES) if p is not None]
