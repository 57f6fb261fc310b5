"""CSV files, plots and a README.md for what `geops bench live` measured."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.batches import SMALL_BATCH
from bench.harness.csv_tables import write_csv, write_rounded
from bench.harness.machine import command_line, describe
from bench.harness.phase import batch_rows, timeline_rows
from bench.harness.plots import pyplot
from bench.harness.tables import markdown, number, percent, ratio
from bench.live import calc
from schemas.assignment import initial_assignment

Log = Any


def verdict_rows(verdicts: Sequence[calc.Verdict]) -> list[dict]:
    return [{"step": i, "rate": v.rate, "sustainable": v.sustainable, "end_lag": v.end_lag,
             "lag_growth_2nd_half": v.growth, "processed_rate": v.achieved, "reason": v.reason}
            for i, v in enumerate(verdicts, 1)]


def write_raw(path: Path, phases: Sequence[Any]) -> None:
    """Every matched publication's latency (``path`` ends in ``.xz``: a minute at full rate
    stays well under the 2 MB a file of the tree may hold)."""
    write_csv(path, ({"phase": p.label, "publication_id": i, "event_time_ms": e,
                      "match_kafka_ts_ms": t, "latency_ms": t - e}
                     for p in phases for i, e, t in zip(p.ids.tolist(), p.event_ms.tolist(),
                                                        p.match_ms.tolist(), strict=True)),
              ["phase", "publication_id", "event_time_ms", "match_kafka_ts_ms", "latency_ms"])


def plot_latency_vs_load(path: Path, phases: Sequence[Any], max_rate: float) -> None:
    plt = pyplot()
    levels = [p for p in phases if p.label.endswith("of max")]
    sweep = [p for p in phases if "trigger" in p.label]
    ncols = 2 if sweep else 1
    fig, axes = plt.subplots(1, ncols, figsize=(6 * ncols, 4.2), squeeze=False)
    ax = axes[0][0]
    sums = [p.summary() for p in levels]
    x = [p.offer.rate for p in levels]
    for key, style in (("p50_ms", "o-"), ("p95_ms", "s-"), ("p99_ms", "^-"), ("max_ms", "x:")):
        ax.plot(x, [(s[key] or np.nan) / 1000 for s in sums], style, label=key[:-3])
    ax.axhline(2.0, color="grey", lw=0.8, ls="--", label="p99 target 2 s")
    ax.set_xlabel(f"offered rate, publications/s (max sustainable {max_rate:,.0f})")
    ax.set_ylabel("latency event time -> match (s)")
    ax.set_title(f"latency vs offered load (trigger {levels[0].trigger if levels else '?'})")
    ax.grid(alpha=0.3)
    ax.legend()
    if sweep:
        ax = axes[0][1]
        group = [p for p in phases if p.level == 0.7]
        labels = [p.trigger for p in group]
        sums = [p.summary() for p in group]
        xs = np.arange(len(group))
        for k, (key, off) in enumerate((("p50_ms", -0.2), ("p99_ms", 0.0), ("max_ms", 0.2))):
            ax.bar(xs + off, [(s[key] or 0) / 1000 for s in sums], 0.2, label=key[:-3],
                   color=f"C{k}")
        ax.set_xticks(xs, labels)
        ax.axhline(2.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("trigger interval (70% of max rate)")
        ax.set_ylabel("latency (s)")
        ax.set_title("effect of the trigger interval")
        ax.grid(alpha=0.3, axis="y")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_timelines(path: Path, phases: Sequence[Any], marks: bool = False) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(phases), 1, figsize=(10, 2.6 * len(phases)), squeeze=False)
    for ax, p in zip(axes[:, 0], phases, strict=True):
        rows = timeline_rows(p)
        t = [r["second"] for r in rows]
        ax.plot(t, [r["lag"] if r["lag"] is not None else np.nan for r in rows], color="C0",
                label="lag (records)")
        ax.set_ylabel("lag (records)", color="C0")
        ax2 = ax.twinx()
        ax2.plot(t, [(r["p50_ms"] or np.nan) / 1000 for r in rows], color="C1", label="p50")
        ax2.plot(t, [(r["p99_ms"] or np.nan) / 1000 for r in rows], color="C3", label="p99")
        ax2.set_ylabel("latency (s)")
        ax2.set_ylim(bottom=0)
        for name, ms in (p.marks.items() if marks else ()):
            ax.axvline((ms - p.offer.t0_ms) / 1000, color="k", ls="--", lw=0.8)
            ax.text((ms - p.offer.t0_ms) / 1000, ax.get_ylim()[1] * 0.9, f" {name}",
                    fontsize=8)
        ax.set_title(f"{p.label}: {p.offer.rate:,.0f} pub/s, trigger {p.trigger}", fontsize=10)
        ax.grid(alpha=0.3)
        ax2.legend(loc="upper right", fontsize=8)
    axes[-1][0].set_xlabel("seconds into the phase (latency by publication event time)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _setup(spec: Any) -> str:
    a = spec.app
    return (f"{a.strategy} {a.join}, W = {a.workers}, P = {a.partitions} ({a.partitioner}), "
            f"master {a.master or f'local[{a.workers}]'}, trigger {a.trigger}; "
            f"{spec.subscriptions:,} subscriptions, a pool of {spec.pool:,} publication "
            f"geometries (seed {spec.seed}{_mix(spec)}) cycled with fresh ids, event time = "
            "time of sending")


def _mix(spec: Any) -> str:
    """The workload's mix where it is not the generator's default."""
    from geops.workload.generate import DEFAULT_POINT_SHARE

    parts = []
    if getattr(spec, "point_share", DEFAULT_POINT_SHARE) != DEFAULT_POINT_SHARE:
        parts.append(f"{spec.point_share:.0%} points")
    if getattr(spec, "relation", None) is not None:
        parts.append(f"every subscription {spec.relation.name}")
    return "".join(f"; {p}" for p in parts)


def _search_md(max_rate: float, verdicts: Sequence[calc.Verdict], spec: Any) -> list[str]:
    if not verdicts:
        return [f"Maximum sustainable rate given on the command line: **{max_rate:,.0f} "
                "publications/s** (no search).", ""]
    lines = [f"**Maximum sustainable rate: {max_rate:,.0f} publications/s** (steps of "
             f"{spec.step_s:.0f} s; sustainable = lag at the end of the step ≤ "
             f"{spec.max_lag_s:g} s of input and growth over its second half ≤ "
             f"{spec.max_growth_s:g} s of input; the app drains between steps).", "",
             *markdown(["step", "offered pub/s", "verdict", "lag at end", "processed pub/s",
                        "why"],
                       [[i, f"{v.rate:,.0f}", "ok" if v.sustainable else "unsustainable",
                         number(v.end_lag), number(v.achieved), v.reason]
                        for i, v in enumerate(verdicts, 1)], "rrlrrl")]
    return [*lines, ""]


def _backlog_md(max_rate: float, backlog: dict | None, producer_cpu: float | None
                ) -> list[str]:
    if not backlog or not backlog["rate"]:
        return []
    return [f"**Backlog throughput of the same app: {backlog['rate']:,.0f} publications/s** "
            f"({backlog['records']:,} written at once, drained over {backlog['batches']} "
            f"batches); **maximum sustainable rate / backlog throughput = "
            f"{max_rate / backlog['rate']:.2f}**."
            + ("" if producer_cpu is None else
               f" The producer (this benchmark's process, records encoded ahead but for id and "
               f"time) used {producer_cpu:.0%} of a core during the search."), ""]


def _cost_md(cost: dict | None, idle: dict | None) -> list[str]:
    """The batch function's fixed and per-record cost, and the idle app's CPU."""
    lines = []
    if cost and cost.get("fixed_ms") is not None:
        lines.append(f"**Cost of a batch** (the batch function, `BatchSummary.duration_ms`, "
                     f"least squares over the {cost['batches']} batches with records): "
                     f"**{cost['fixed_ms']:,.0f} ms fixed + {cost['us_per_record']:,.0f} µs "
                     f"per record** (R² {cost['r2']:.2f}). Spark's own part of a trigger "
                     "(offsets, its offset and commit logs, planning, the call into Python: "
                     "~38 ms in `docs/results/live/costs`) comes on top.")
    elif cost:
        lines.append(f"**Cost of a batch**: no line, the sizes of the {cost['batches']} "
                     "batches with records span less than a factor of 4.")
    if cost and cost.get("small_median_ms") is not None:
        lines.append(f"Batches of at most {SMALL_BATCH:,} records "
                     f"({cost['small_batches']}): median {cost['small_median_ms']:,.0f} ms "
                     f"for a median of {cost['small_median_records']:,.0f} records.")
    if idle:
        lines.append(f"**Idle** for {idle['seconds']:.0f} s at the end: the app's processes "
                     f"used {idle['app']:.1%} of a core, the broker {idle['broker']:.1%}.")
    return [" ".join(lines), ""] if lines else []


def latency_table(sums: Sequence[dict]) -> list[str]:
    header = ["phase", "trigger", "offered pub/s", "processed pub/s", "matched", "p50 ms",
              "p95 ms", "p99 ms", "max ms", "lag max", "batch ms (mean)", "batch interval ms",
              "job ms", "write ms", "load avg"]
    return markdown(header, ([s["label"], s["trigger"], f"{s['offered_rate']:,.0f}",
                              f"{s['processed_rate']:,.0f}", f"{s['matched']:,}",
                              *(number(s[k]) for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms",
                                                       "lag_max", "batch_ms_mean",
                                                       "batch_interval_ms", "job_ms_mean",
                                                       "write_ms_mean")),
                              number(s.get("loadavg_1m"), ".1f")] for s in sums),
                    "ll" + "r" * 13)


def window_table(wins: Sequence[dict]) -> list[str]:
    """Markdown rows of ``calc.windows``' latency windows."""
    return markdown(["window", "seconds", "matched", "p50 ms", "p95 ms", "p99 ms", "max ms"],
                    ([w["window"], f"{w['seconds']:.1f}", f"{w['count']:,}",
                      *(number(w[k]) for k in ("p50", "p95", "p99", "max"))] for w in wins),
                    "l" + "r" * 6)


LEGEND = ("Latency: the publication's event time (set when the benchmark's producer sent it) "
          "to the Kafka timestamp of its Match record (when the app produced it), over every "
          "publication that matched at least one subscription. Lag: the publications topic's "
          "end offsets minus the end offsets of the app's latest BatchSummary, sampled every "
          "second. Batch ms: BatchSummary.duration_ms; job ms / write ms: its Spark job and "
          "its write of matches and metrics; batch interval: between batch starts. Load avg: "
          "the machine's 1-minute load average when the level ended (2 cores; other work on "
          "the machine shows up here).")


def write_steady(spec: Any, result: dict, log: Log) -> None:
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    phases = result["phases"]
    sums = [p.summary() for p in phases]
    write_rounded(out / "search.csv", verdict_rows(result["verdicts"]))
    write_rounded(out / "latency.csv", sums)
    write_rounded(out / "timeline.csv", [r for p in phases for r in timeline_rows(p)])
    write_rounded(out / "batches.csv", [r for p in phases for r in batch_rows(p)])
    write_raw(out / "latency_raw.csv.xz", phases)
    plot_latency_vs_load(out / "latency_vs_load.png", phases, result["max_rate"])
    plot_timelines(out / "timeline.png", phases)
    lines = ["# geops bench live: steady live stream", "",
             f"{_setup(spec)}. Machine: {describe()}.", "",
             "```", command_line(spec.command), "```", "",
             *_search_md(result["max_rate"], result["verdicts"], spec),
             *_backlog_md(result["max_rate"], result.get("backlog"),
                          result.get("producer_cpu")),
             f"Each level{' and rate' if spec.rates else ''} offered for "
             f"{spec.duration_s:.0f} s:", "",
             *latency_table(sums), "", LEGEND, "",
             *_cost_md(result.get("cost"), result.get("idle")),
             "Files: `search.csv` (the search steps), `latency.csv` (this table), "
             "`timeline.csv` (per second: offered, processed, lag, latency p50/p99), "
             "`batches.csv` (every BatchSummary), `latency_raw.csv.xz` (every matched "
             "publication's latency), `latency_vs_load.png`, `timeline.png`.", ""]
    (out / "README.md").write_text("\n".join(lines))
    log(f"wrote {out}/README.md and its CSVs and plots")


def write_modes(spec: Any, results: dict[str, dict], log: Log) -> None:
    """The page of ``run.run_modes``: per mode its backlog throughput and latency at each
    rate, and each figure over the first mode's."""
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for mode, result in results.items():
        backlog = result["backlog"]["rate"] if result["backlog"] else None
        for k, p in enumerate(result["phases"]):
            rows.append({"mode": mode, "rate_index": k, "backlog_rate": backlog, **p.summary()})
    write_rounded(out / "modes.csv", rows)
    write_raw(out / "latency_raw.csv.xz", [p for r in results.values() for p in r["phases"]])
    first = spec.modes[0]

    def over(key: str, row: dict) -> str:
        """``row``'s figure over the first mode's at the same rate."""
        base = next(r for r in rows if r["mode"] == first and r["rate_index"] == row["rate_index"])
        if row["mode"] == first or not row[key] or not base[key]:
            return "-"
        return ratio(row[key] / base[key])

    table = markdown(["mode", "offered pub/s", "processed pub/s", "backlog pub/s", "p50 ms",
                      "p99 ms", "max ms", f"p50 / {first}", f"p99 / {first}",
                      f"backlog / {first}", "load avg"],
                     ([r["mode"], f"{r['offered_rate']:,.0f}", f"{r['processed_rate']:,.0f}",
                       number(r["backlog_rate"]), number(r["p50_ms"]), number(r["p99_ms"]),
                       number(r["max_ms"]), over("p50_ms", r), over("p99_ms", r),
                       over("backlog_rate", r), number(r.get("loadavg_1m"), ".1f")]
                      for r in rows), "l" + "r" * 10)
    lines = ["# geops bench live: the app's modes side by side", "",
             f"{_setup(spec)}. Machine: {describe()}. The modes ran one after the other on "
             f"the same broker and workload: each its backlog of {spec.backlog:,} "
             f"publications written at once, then each rate for {spec.duration_s:.0f} s.", "",
             "```", command_line(spec.command), "```", "", *table, "", LEGEND, "",
             "Files: `modes.csv` (this table), `latency_raw.csv.xz` (every matched "
             "publication's latency).", ""]
    (out / "README.md").write_text("\n".join(lines))
    for line in table:
        log(line)
    log(f"wrote {out}/README.md and its CSVs")


def write_rebalance(spec: Any, result: dict, log: Log) -> None:
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    p = result["phase"]
    bounds = calc.rebalance_windows(p.offer.t0_ms, p.offer.t1_ms, p.marks.get("command"),
                                    p.marks.get("moved"))
    wins = calc.windows(p.event_ms, p.latency, bounds)
    write_rounded(out / "rebalance.csv", wins)
    write_rounded(out / "search.csv", verdict_rows(result["verdicts"]))
    write_rounded(out / "timeline.csv", timeline_rows(p))
    write_rounded(out / "batches.csv", batch_rows(p))
    write_rounded(out / "moves.csv", [{"epoch": m["epoch"], "time_ms": m["time"],
                                    "partitions_moved": len(m["partitions_moved"]),
                                    "bytes": m["bytes"], "duration_ms": m["duration_ms"]}
                                   for m in result["moves"]])
    write_raw(out / "latency_raw.csv.xz", [p])
    plot_timelines(out / "timeline.png", [p], marks=True)
    sm = p.summary()
    t0 = p.offer.t0_ms
    lines = ["# geops bench live --scenario rebalance", "",
             f"{_setup(spec)}; the stream is skewed: {spec.skew:.0%} of its items in the "
             f"partitions of {spec.hot_workers} of {spec.app.workers} workers. Machine: "
             f"{describe()}.", "", "```", command_line(spec.command), "```", "",
             *_search_md(result["max_rate"], result["verdicts"], spec),
             f"Offered {p.offer.rate:,.0f} publications/s (70 % of that) for "
             f"{spec.duration_s:.0f} s; the distributor (Table 1 defaults: LB, threshold 0.5, "
             f"M = 1,000, D = 10 s) started {(p.marks['distributor'] - t0) / 1000:.0f} s in."]
    for c in result["commands"][:1]:
        lines.append(f"It commanded a rebalance at +{(c['time'] - t0) / 1000:.1f} s "
                     f"({len(c['moves'])} moves, MLDC {c['mldc_before']:.2f} -> "
                     f"{c['mldc_predicted']:.2f} predicted).")
    for m in result["moves"][:1]:
        lines.append(f"The app moved {len(m['partitions_moved'])} partitions "
                     f"({m['bytes'] / 1e6:.2f} MB) in {m['duration_ms']:.0f} ms, reported at "
                     f"+{(m['time'] - t0) / 1000:.1f} s.")
    if not result["commands"]:
        lines.append("**The distributor did not rebalance during the phase.**")
    lines += ["", "Windows by publication event time (during = from the command to 5 s after "
              "the app reported the move):", "", *window_table(wins)]
    before = next((w for w in wins if w["window"] == "before"), None)
    during = next((w for w in wins if w["window"] == "during"), None)
    if before and during and before["p99"] and during["p99"]:
        ratio = during["p99"] / before["p99"]
        lines += ["", f"p99 during / before = **{ratio:.2f}** (target ≤ 2)."]
    lines += ["", "Whole phase:", "", *latency_table([sm]), "", LEGEND, "",
              "Files: `rebalance.csv` (the windows), `timeline.csv`, `batches.csv`, "
              "`moves.csv`, `search.csv`, `latency_raw.csv.xz`, `timeline.png` (dashed lines: "
              "distributor start, command, move).", ""]
    (out / "README.md").write_text("\n".join(lines))
    log(f"wrote {out}/README.md and its CSVs and plots")
    for w in wins:
        log(f"  {w['window']:>12}: p50 {number(w['p50'])} p95 {number(w['p95'])} p99 "
            f"{number(w['p99'])} max {number(w['max'])} ms ({w['count']:,} matched)")


def write_soak(spec: Any, result: dict, log: Log) -> None:
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = result["t0_ms"]
    mem = result["memory"]
    roles = sorted({k for m in mem for k in m if k.endswith("_mb")})
    # latency per 10 s from the batches' own p50/p99 (no Match record is read back)
    rows = []
    for m in mem:
        t = m["time_ms"]
        bs = [b for b in result["batches"] if t - 10_000 < b["end_time"] <= t and b["records"]]
        p50 = [b["latency_p50_ms"] for b in bs if b.get("latency_p50_ms") is not None]
        p99 = [b["latency_p99_ms"] for b in bs if b.get("latency_p99_ms") is not None]
        rows.append({"second": round((t - t0) / 1000, 1), "lag": m.get("lag"),
                     "batches": len(bs), "records": sum(b["records"] for b in bs),
                     "batch_p50_ms_median": float(np.median(p50)) if p50 else None,
                     "batch_p99_ms_max": float(max(p99)) if p99 else None,
                     **{r: m.get(r) for r in roles}})
    write_rounded(out / "soak.csv", rows)
    lag = calc.growth([r["lag"] for r in rows if r["lag"] is not None])
    lagged = [r for r in rows if r["lag"] is not None]
    slope = calc.slope_per_minute([r["second"] for r in lagged], [r["lag"] for r in lagged])
    grow = {r: calc.growth([m.get(r) for m in mem if m.get(r) is not None]) for r in roles}
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    xs = [r["second"] / 60 for r in rows]
    a1.plot(xs, [r["lag"] if r["lag"] is not None else np.nan for r in rows], label="lag")
    a1.set_ylabel("lag (records)")
    a1.grid(alpha=0.3)
    for r in roles:
        a2.plot(xs, [x[r] if x[r] is not None else np.nan for x in rows], label=r[:-3])
    a2.set_ylabel("RSS / broker disk (MB)")
    a2.set_xlabel("minutes")
    a2.grid(alpha=0.3)
    a2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "soak.png", dpi=100)
    plt.close(fig)
    batches = [b for b in result["batches"] if b["records"]]
    minutes = (result["t1_ms"] - t0) / 60000
    lines = ["# geops bench live --soak", "",
             f"{_setup(spec)}. Machine: {describe()}.", "",
             "```", command_line(spec.command), "```", "",
             *_search_md(result["max_rate"], result["verdicts"], spec),
             f"Offered {result['rate']:,.0f} publications/s (70 %) for {minutes:.1f} minutes "
             f"({result['sent']:,} publications) with the distributor running (Table 1 "
             f"defaults); {len(batches):,} batches. Every 10 s: lag and the resident memory "
             "(VmRSS) of every process, by role (the app's tree walked from `geops app`: "
             "the Python of the driver and of the `geops app` wrapper, the spark-submit JVM, "
             "the Python workers; the broker; the distributor's tree).", "",
             "Growth = mean of the last 20 % of the samples vs the first 20 %:", "",
             *markdown(["series", "first 20 %", "last 20 %", "growth"],
                       [[name, number(g["first"]), number(g["last"]), percent(g["growth"])]
                        for name, g in [("lag (records)", lag), *(
                            (f"{r[:-3]} RSS (MB)" if r != "broker_disk_mb"
                             else "broker disk (MB)", grow[r]) for r in roles)]], "lrrr")]
    lines += ["", f"Lag slope (least squares over the whole soak): "
              f"{'-' if slope is None else f'{slope:+,.1f}'} records per minute.", "",
              "Broker disk: the bytes under the broker's state directory (its logs of every "
              "topic), bounded by the topics' retention (`retention.ms`, deleted per closed "
              "segment, `segment.ms`).", "",
              "Files: `soak.csv` (every 10 s: lag, batches, the batches' own latency p50/p99, "
              "RSS per role, broker disk), `soak.png`.", ""]
    (out / "README.md").write_text("\n".join(lines))
    log(f"wrote {out}/README.md, soak.csv and soak.png")
    log(f"  lag growth {percent(lag['growth'])}, slope {slope} per minute; " + ", ".join(
        f"{r[:-3]} {percent(grow[r]['growth'])}" for r in roles))


def write_moving(spec: Any, result: dict, log: Log) -> None:
    """moving.csv (per phase), windows.csv, commands.csv, timeline/batches/search CSVs, the
    raw latencies, the distributor's log, timeline.png and README.md of the moving hot spot."""
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    run, ideal = result["run"], result["ideal"]
    every = [run, *ideal]
    write_rounded(out / "moving.csv", result["phases"])
    write_rounded(out / "windows.csv", result["windows"])
    write_rounded(out / "commands.csv", result["commands"])
    write_rounded(out / "search.csv", verdict_rows(result["verdicts"]))
    write_rounded(out / "timeline.csv", [r for p in every for r in timeline_rows(p)])
    write_rounded(out / "batches.csv", [r for p in every for r in batch_rows(p)])
    write_rounded(out / "ideal_moves.csv", [{"epoch": m["epoch"], "time_ms": m["time"],
                                          "partitions_moved": len(m["partitions_moved"]),
                                          "bytes": m["bytes"], "duration_ms": m["duration_ms"]}
                                         for m in result["ideal_moves"]])
    write_raw(out / "latency_raw.csv.xz", every)
    with gzip.open(out / "distributor.log.gz", "wt") as fh:
        fh.write(result["distributor_log"])
    plot_timelines(out / "timeline.png", every, marks=True)
    capacity = result["ratio"]
    n = spec.shifts
    lines = ["# geops bench live --scenario moving", "",
             f"{_setup(spec)}; the hot spot moves: {spec.skew:.0%} of the stream items in the "
             f"partitions of {spec.hot_workers} of {spec.app.workers} workers, moving {n} "
             f"time(s) every {spec.duration_s:.0f} s between workers 0..H-1 and W/2..W/2+H-1 "
             f"(initial assignment; `geops generate --moving-hotspot`'s workload, each side "
             f"a pool of half the geometries). Machine: {describe()}.", "",
             "```", command_line(spec.command), "```", "",
             *_search_md(result["max_rate"], result["verdicts"], spec),
             ("The search offered the first side's stream, without the distributor. "
              if result["verdicts"] else "") +
             f"Offered {result['rate']:,.0f} publications/s (70 % of that) as one stream of "
             f"{(n + 1) * spec.duration_s:.0f} s, with `geops distributor --mode "
             f"{spec.distributor_mode} --metric LB` (policy {result['policy']}) running "
             "throughout.", "",
             "**Ideal**: a second app on fresh topics, no distributor, offered each phase's "
             f"stream for {spec.duration_s:.0f} s at the same rate on the owners that policy "
             f"{result['policy']} proposes for that phase's per-partition processing times "
             "measured in the run (second half of the phase), commanded before the phase and "
             "moved during a few unmeasured batches: the same stream, balanced from its first "
             "publication, no move inside the measurement. Capacity = publications per busy "
             "second (records over the sum of BatchSummary.duration_ms; `bench churn`'s "
             "measure): at the same offered rate both keep up, so the processed rate is the "
             "same and only the busy time tells them apart. The ideal's owners per phase: "
             + "; ".join(f"phase {k}: {_plan(plan, spec.app.workers)}"
                         for k, plan in enumerate(result["plans"]))
             + ".", "",
             *markdown(["phase", "hot", "MLDC at start", "rebalances",
                        "first command s after shift", "batches", "busy", "pub per busy s",
                        "ideal pub per busy s", "ratio", "p50 ms", "p99 ms", "ideal p50 ms",
                        "ideal p99 ms", "load avg"],
                       [[r["phase"], r["hot"], ratio(r["mldc_at_start"]), r["rebalances"],
                         number(r["first_command_s"], ".1f"), r["batches"],
                         f"{r['busy_share']:.0%}", number(r["per_busy_s"]),
                         number(r["ideal_per_busy_s"]), ratio(r["ratio"]),
                         *(number(r[k]) for k in ("p50_ms", "p99_ms", "ideal_p50_ms",
                                                  "ideal_p99_ms")),
                         number(r["loadavg_1m"], ".1f")] for r in result["phases"]],
                       "rl" + "r" * 13)]
    lines += ["", f"Over all phases: {number(capacity['run_per_busy_s'])} vs "
              f"{number(capacity['ideal_per_busy_s'])} publications per busy second, ratio "
              f"**{ratio(capacity['overall'])}** (target ≥ 0.90: "
              f"{'met' if result['within'] else 'not met'}). Rebalances per phase "
              f"{result['per_phase']} (phase 0 is the stream's start; target: 1-2 after every "
              f"shift: {'met' if result['follows'] else 'not met'}; a shift after which the "
              "stream ran at an MLDC under Table 1's threshold needs none). MLDC at start: of the "
              "processing times the app reported from the phase's start to its first command "
              "(or end), under the owners in force at its start.", "",
              "Rebalance commands (time from the stream's start; move as the app reported it):",
              "", *markdown(["epoch", "phase", "s", "s after shift", "moves", "replicated",
                             "MLDC before -> predicted", "moved MB", "move ms"],
                            [[c["epoch"], "-" if c["phase"] is None else c["phase"],
                              f"{c['time_s']:.1f}",
                              number(c["after_shift_s"], ".1f"), c["moves"], c["replicated"],
                              f"{c['mldc_before']:.2f} -> {c['mldc_predicted']:.2f}",
                              number(None if c["moved_bytes"] is None
                                     else c["moved_bytes"] / 1e6, ".2f"),
                              number(c["move_ms"])] for c in result["commands"]],
                            "rrrrrrlrr")]
    if not result["commands"]:
        lines.append("| (none) | | | | | | | | |")
    lines += ["", "Latency windows by publication event time in each phase (before the "
              "phase's first command, during = to 5 s after its move, after):", "",
              *window_table(result["windows"])]
    lines += ["", "Whole runs:", "", *latency_table([p.summary() for p in every]), "", LEGEND,
              "", "Files: `moving.csv` (the phase table), `commands.csv` (with the distributor's "
              "reasons), `windows.csv`, `timeline.csv`, `batches.csv` (run and ideal), "
              "`ideal_moves.csv`, `search.csv`, `latency_raw.csv.xz`, `distributor.log.gz` (the "
              "distributor's log: every judgement and why), `timeline.png` (the run with the "
              "shifts and the commands' epochs marked, then the ideal phases).", ""]
    (out / "README.md").write_text("\n".join(lines))
    log(f"wrote {out}/README.md and its CSVs and plots")
    log(f"  rebalances per phase {result['per_phase']}; capacity vs ideal "
        f"{ratio(capacity['overall'])} (per phase "
        + ", ".join(ratio(x) for x in capacity["phases"]) + ")")


def _plan(plan: dict, workers: int) -> str:
    """An ideal phase's owners in a few words: partitions off their initial worker, replicated
    ones, the MLDC they leave."""
    owners = plan["owners"]
    start = initial_assignment(len(owners), workers)
    moved = sum(1 for o, w in zip(owners, start, strict=True) if o[0] != w)
    replicated = sum(1 for o in owners if len(o) > 1)
    mldc = "-" if plan["mldc"] is None else f"{plan['mldc']:.3f}"
    return f"{moved} partition(s) off their initial worker, {replicated} replicated, MLDC {mldc}"
