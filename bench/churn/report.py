"""CSV files, plots and a README.md for what `geops bench churn` measured."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.churn import calc
from bench.harness.csv_tables import write_csv, write_rounded
from bench.harness.latency import latency_summary
from bench.harness.machine import command_line, describe
from bench.harness.phase import batch_rows, timeline_rows
from bench.harness.plots import pyplot
from bench.harness.tables import markdown, number

Log = Any
MEAN_KEYS = ("offered_rate", "sent_rate", "processed_rate", "busy_share", "per_busy_s",
             "pub_per_cpu_s", "app_cpu_ms_per_1k", "app_cpu_s", "broker_cpu_s",
             "batch_ms_mean", "lag_max", "change_write_rate", "loadavg_1m")
# the targets set for subscription churn, reported against (not asserted)
TARGET_COST = 0.10        # 1,000 changes/s cost at most 10 % of throughput (sPIS STAL)
TARGET_TTE_TRIGGERS = 2.0  # p99 time-to-effect at most 2 triggers


def cell_rows(levels: Sequence[Any], trigger_ms: float) -> list[dict]:
    """One row per strategy, join and change rate: throughput means over rounds with their
    ratio to 0 changes/s, latency and time-to-effect percentiles over the rounds pooled."""
    rows = [lv.row(trigger_ms) for lv in levels]
    out = calc.with_ratios(rows, MEAN_KEYS)
    for r in out:
        same = [lv for lv in levels if (lv.strategy, lv.join, lv.change_rate)
                == (r["strategy"], r["join"], r["change_rate"])]
        lat = latency_summary(np.concatenate([lv.phase.latency[lv.event_mask()]
                                                   for lv in same]))
        r.update({"matched": lat["count"], "p50_ms": lat["p50"], "p99_ms": lat["p99"],
                  "max_ms": lat["max"]})
        with_changes = [lv for lv in same if lv.changes is not None and lv.effect is not None]
        if with_changes:
            written = np.concatenate([lv.changes.written_ms for lv in with_changes])
            effect = calc.Effect(
                np.concatenate([lv.effect.effect_ms for lv in with_changes]),
                np.concatenate([lv.effect.batches for lv in with_changes]))
            r.update(calc.effect_summary(written, effect, trigger_ms))
    return out


EFFECT_COLUMNS = ["strategy", "join", "round", "change_rate", "partition", "offset",
                  "written_ms", "effect_ms", "time_to_effect_ms", "batches"]


def write_effects(path: Path, levels: Sequence[Any]) -> None:
    """Every change: when it was written, its offset, when it took effect, batches waited."""
    write_csv(path, _effect_rows(levels), EFFECT_COLUMNS)


def _effect_rows(levels: Sequence[Any]) -> Iterator[dict]:
    for lv in levels:
        c, e = lv.changes, lv.effect
        if c is None or e is None:
            continue
        for p, o, t, eff, b in zip(c.partitions.tolist(), c.offsets.tolist(),
                                   c.written_ms.tolist(), e.effect_ms.tolist(),
                                   e.batches.tolist(), strict=True):
            done = not np.isnan(eff)
            yield dict(zip(EFFECT_COLUMNS, [
                lv.strategy, lv.join, lv.round, lv.change_rate, p, o, t,
                int(eff) if done else "", int(eff - t) if done else "", int(b) if done else ""],
                strict=True))


def _x(rate: float) -> float:
    return max(rate, 10.0)  # 0 changes/s drawn at 10 on the log axis


def plot(path: Path, cells: Sequence[dict], trigger_ms: float) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    groups = sorted({(r["strategy"], r["join"]) for r in cells})
    for k, g in enumerate(groups):
        rs = sorted((r for r in cells if (r["strategy"], r["join"]) == g),
                    key=lambda r: r["change_rate"])
        xs = [_x(r["change_rate"]) for r in rs]
        name = f"{g[0]} {g[1]}"
        axes[0].plot(xs, [r["throughput_ratio"] or np.nan for r in rs], "o-", color=f"C{k}",
                     label=f"{name} processed")
        axes[0].plot(xs, [r["capacity_ratio"] or np.nan for r in rs], "s--", color=f"C{k}",
                     label=f"{name} per busy s")
        axes[0].plot(xs, [r["cpu_ratio"] or np.nan for r in rs], "^:", color=f"C{k}",
                     label=f"{name} per app CPU s")
        axes[1].plot(xs, [(r["p50_ms"] or np.nan) / 1000 for r in rs], "o--", color=f"C{k}",
                     label=f"{name} p50")
        axes[1].plot(xs, [(r["p99_ms"] or np.nan) / 1000 for r in rs], "^-", color=f"C{k}",
                     label=f"{name} p99")
        ch = [r for r in rs if r.get("tte_p99_triggers") is not None]
        axes[2].plot([_x(r["change_rate"]) for r in ch], [r["tte_p50_triggers"] for r in ch],
                     "o--", color=f"C{k}", label=f"{name} p50")
        axes[2].plot([_x(r["change_rate"]) for r in ch], [r["tte_p99_triggers"] for r in ch],
                     "^-", color=f"C{k}", label=f"{name} p99")
    axes[0].axhline(1 - TARGET_COST, color="grey", lw=0.8, ls=":", label="target 0.9")
    axes[0].set_ylabel("publications/s vs 0 changes/s")
    axes[0].set_title("throughput ratio (same run)")
    axes[1].set_ylabel("latency event time -> match (s)")
    axes[1].set_title("publication latency")
    axes[2].axhline(TARGET_TTE_TRIGGERS, color="grey", lw=0.8, ls=":", label="target p99 2")
    axes[2].set_ylabel(f"time to effect (triggers of {trigger_ms:.0f} ms)")
    axes[2].set_title("change written -> first batch using it")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("subscription changes/s (0 drawn at 10)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_effect_cdf(path: Path, levels: Sequence[Any], trigger_ms: float) -> None:
    plt = pyplot()
    groups = sorted({(lv.strategy, lv.join) for lv in levels})
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4), squeeze=False)
    for ax, g in zip(axes[0], groups, strict=True):
        rates = sorted({lv.change_rate for lv in levels if lv.change_rate > 0})
        for k, rate in enumerate(rates):
            same = [lv for lv in levels if (lv.strategy, lv.join) == g and
                    lv.change_rate == rate and lv.effect is not None]
            if not same:
                continue
            ms = np.concatenate([lv.effect.effect_ms - lv.changes.written_ms for lv in same])
            ms = np.sort(ms[~np.isnan(ms)]) / trigger_ms
            if len(ms):
                ax.plot(ms, np.arange(1, len(ms) + 1) / len(ms), color=f"C{k}",
                        label=f"{rate:,.0f} changes/s")
        ax.axvline(TARGET_TTE_TRIGGERS, color="grey", lw=0.8, ls=":")
        ax.set_xlabel(f"time to effect (triggers of {trigger_ms:.0f} ms)")
        ax.set_ylabel("share of changes")
        ax.set_title(f"{g[0]} {g[1]}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def table(cells: Sequence[dict]) -> list[str]:
    header = ["strategy", "join", "changes/s", "written/s", "offered pub/s", "processed pub/s",
              "ratio", "pub per busy s", "ratio", "busy", "pub per app CPU s", "ratio", "p50 ms",
              "p99 ms", "time to effect p50 / p99 ms", "p50 / p99 triggers", "p99 batches",
              "not in effect", "load avg"]
    return markdown(header, [_cells(r) for r in sorted(
        cells, key=lambda r: (r["strategy"], r["join"], r["change_rate"]))], "ll" + "r" * 17)


def _cells(r: dict) -> list[str]:
    """One level's row of ``table``: time to effect only where changes were written."""
    tte = (["-"] * 4 if r.get("tte_p50_ms") is None else
           [f"{number(r['tte_p50_ms'])} / {number(r['tte_p99_ms'])}",
            f"{r['tte_p50_triggers']:.2f} / {r['tte_p99_triggers']:.2f}",
            number(r["tte_p99_batches"], ".0f"), f"{r['censored']:,} of {r['changes']:,}"])
    return [r["strategy"], r["join"], f"{r['change_rate']:,.0f}",
            number(r["change_write_rate"]), number(r["offered_rate"]),
            number(r["processed_rate"]), number(r["throughput_ratio"], ".3f"),
            number(r["per_busy_s"]), number(r["capacity_ratio"], ".3f"),
            number(r["busy_share"], ".0%"), number(r["pub_per_cpu_s"]),
            number(r["cpu_ratio"], ".3f"), number(r["p50_ms"]), number(r["p99_ms"]), *tte,
            number(r["loadavg_1m"], ".1f")]


def targets(cells: Sequence[dict]) -> list[str]:
    """One line per target, computed from the cells (no assertion)."""
    out = []
    base = next((r for r in cells if (r["strategy"], r["join"], r["change_rate"])
                 == ("sPIS", "STAL", 0.0)), None)
    for r in cells:
        if (r["strategy"], r["join"], r["change_rate"]) == ("sPIS", "STAL", 1000.0):
            for key, what in (("throughput_ratio", "processed publications/s"),
                              ("capacity_ratio", "publications per busy second"),
                              ("cpu_ratio", "publications per app CPU second")):
                v = r.get(key)
                if v is not None:
                    out.append(f"- 1,000 changes/s, sPIS STAL, {what}: {v:.3f} of 0 changes/s"
                               f" (target ≥ {1 - TARGET_COST:.2f}, a cost of at most "
                               f"{TARGET_COST:.0%}) → "
                               f"**{'met' if v >= 1 - TARGET_COST else 'missed'}**"
                               + (_kept_up(base) if key == "throughput_ratio" else ""))
    for r in sorted(cells, key=lambda r: (r["strategy"], r["join"], r["change_rate"])):
        v = r.get("tte_p99_triggers")
        if v is not None:
            out.append(f"- p99 time to effect, {r['strategy']} {r['join']} at "
                       f"{r['change_rate']:,.0f} changes/s: {v:.2f} triggers (target ≤ "
                       f"{TARGET_TTE_TRIGGERS:g}) → "
                       f"**{'met' if v <= TARGET_TTE_TRIGGERS else 'missed'}**")
    return out


def _kept_up(base: dict | None) -> str:
    """What the processed ratio measures: throughput only if the app could not keep up."""
    if base is None or base.get("processed_rate") is None:
        return ""
    return (f"; at 0 changes/s it processed {base['processed_rate']:,.0f} of "
            f"{base['offered_rate']:,.0f} pub/s offered: the cost in throughput only where it "
            f"could not keep up (offer more than it takes)")


LEGEND = (
    "Each level offers the same publication rate for the level's duration; subscription "
    "changes are written during all but its last seconds (the change window) and everything "
    "below is measured over that window. Changes: {mix} of new ids, updates of live ids (a "
    "new geometry and another relation; no DISJOINT) and tombstones of live ids, written by a "
    "second producer in the benchmark's process. Processed pub/s: records of the batches that "
    "ended in the window / its length (the same small shortfall at every level, the last "
    "batch's records); ratio: to the same run's 0 changes/s. Pub per busy s: those records / "
    "the summed duration of those batches, an estimate of what the app could process if it "
    "were never idle (at an offered load below the maximum, processed pub/s stays at the "
    "offered rate until the app saturates, so this is the more sensitive measure of the cost "
    "of the changes); busy: that duration / the window. Pub per app CPU s: the level's "
    "publications / the CPU seconds (user + system) the app's processes (the `geops app` tree: "
    "driver, JVM, Python workers) used from the start of the level to the end of its drain, "
    "changes included; other work on the machine changes it much less than it changes "
    "wall-clock times. Latency: the event time (set when the producer sent the publication) to "
    "the Kafka timestamp of its Match record, for the "
    "publications sent in the window. Time to effect: a change written at t (its record's "
    "timestamp) to offset o of the subscriptions topic takes effect in the first batch whose "
    "BatchSummary.subscription_offsets exceed o; the time is that batch's start_time − t (can "
    "be a few ms below zero: a batch stamps its start, then reads the subscriptions' end "
    "offsets), in ms and in triggers (ms / trigger interval); batches: how many batches "
    "started after the write up to that one (1 = the next). Not in effect: changes no batch "
    "used before the benchmark stopped following the level. Means are over the rounds; "
    "percentiles pool the rounds. Load avg: the machine's 1-minute load average at the end "
    "of each level, mean over the rounds.")


def write(spec: Any, levels: Sequence[Any], log: Log) -> None:
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    trig = spec.trigger_ms
    cells = cell_rows(levels, trig)
    write_rounded(out / "churn.csv", cells)
    write_rounded(out / "levels.csv", [lv.row(trig) for lv in levels])
    write_rounded(out / "batches.csv", [r for lv in levels for r in batch_rows(lv.phase)])
    write_rounded(out / "timeline.csv", [r for lv in levels for r in timeline_rows(lv.phase)])
    write_effects(out / "effects_raw.csv.xz", levels)
    plot(out / "churn.png", cells, trig)
    plot_effect_cdf(out / "effect_cdf.png", levels, trig)
    a = spec.app
    order = ", ".join(f"{r:,.0f}" for _, r in calc.level_order(spec.change_rates,
                                                                      spec.rounds))
    mix = "/".join(f"{m / sum(spec.mix):.0%}" for m in spec.mix)
    lines = [
        "# geops bench churn: a live stream while subscriptions change", "",
        f"W = {a.workers}, P = {a.partitions} ({a.partitioner}), master "
        f"{a.master or f'local[{a.workers}]'}, trigger {a.trigger}; {spec.subscriptions:,} "
        f"subscriptions at start, a pool of {spec.pool:,} publication geometries (seed "
        f"{spec.seed}) cycled with fresh ids at {spec.rate:,.0f} publications/s. Per cell "
        f"(strategy × join) one app; levels of {spec.duration_s:.0f} s (changes during the "
        f"first {spec.window_s:.0f} s) in the order {order} changes/s "
        f"({spec.rounds} round{'s' if spec.rounds != 1 else ''}, odd rounds reversed) after a "
        f"warm-up of {spec.warmup_s:.0f} s that is not kept, the app drained between levels. "
        f"Machine: {describe()}.", "",
        "```", command_line(spec.command), "```", "",
        *table(cells), "", "Targets (reported, not asserted):", "",
        *targets(cells), "", LEGEND.format(mix=mix), "",
        "Files: `churn.csv` (this table), `levels.csv` (every level of every round), "
        "`effects_raw.csv.xz` (every change: offset, written, in effect, batches), "
        "`batches.csv` (every BatchSummary of the levels), `timeline.csv` (per second of each "
        "level: offered, processed, lag, latency), `churn.png`, `effect_cdf.png`.", ""]
    (out / "README.md").write_text("\n".join(lines))
    log(f"wrote {out}/README.md and its CSVs and plots")
    for line in targets(cells):
        log("  " + line[2:].replace("**", ""))
