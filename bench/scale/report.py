"""Plots and the results table of `geops bench scale` from its runs.csv."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.harness.csv_tables import read_rows
from bench.harness.plots import pyplot
from bench.harness.tables import markdown
from bench.scale.calc import batch_size, phases, relative_to_reference, to_float

COLUMNS = (
    ("strategy", "strategy", "{}"), ("subscriptions", "subscriptions", "{:,.0f}"),
    ("driver_memory", "driver mem", "{}"), ("batch_records", "per batch", "{:,.0f}"),
    ("status", "status", "{}"),
    ("first_batch_s", "first batch s", "{:.1f}"), ("router_at_s", "router at", "{:.1f}"),
    ("static_at_s", "static at", "{:.1f}"), ("streaming_at_s", "streaming at", "{:.1f}"),
    ("static_build_s", "static build s", "{:.1f}"),
    ("bytes_per_subscription", "static B/sub", "{:.0f}"),
    ("throughput_busy", "pub/s (busy)", "{:,.0f}"), ("throughput_busy_rel", "× 10k", "{:.2f}"),
    ("batch_us_per_candidate", "µs/cand. (batch)", "{:.2f}"),
    ("batch_us_per_candidate_rel", "× 10k", "{:.2f}"),
    ("join_us_per_candidate", "µs/cand. (join)", "{:.2f}"),
    ("join_us_per_candidate_rel", "× 10k", "{:.2f}"),
    ("driver_python_hwm_mb", "driver py MB", "{:,.0f}"), ("jvm_hwm_mb", "JVM MB", "{:,.0f}"),
    ("python_workers_rss_peak_mb", "py workers MB", "{:,.0f}"),
    ("move_partitions", "moved", "{:.0f}"), ("move_bytes", "move MB", "{}"),
    ("move_ms", "move ms", "{:,.0f}"), ("load1_mean", "load", "{:.1f}"),
)


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    v = row.get(key)
    if v is None or v == "":
        return "-"
    if key == "move_bytes":
        return f"{float(v) / 1e6:.1f}"
    num = to_float(v)
    if fmt == "{}" or num is None:
        return str(v)
    return fmt.format(num)


def table(rows: list[dict[str, Any]]) -> str:
    """The runs as a Markdown table, one row each."""
    return "\n".join(markdown([h for _, h, _ in COLUMNS],
                              ([_cell(r, k, f) for k, _, f in COLUMNS] for r in rows)))


def plots(rows: list[dict[str, Any]], out: Path) -> None:
    plt = pyplot()
    ok = [r for r in rows if r.get("status") == "ok"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for strategy in sorted({r["strategy"] for r in ok}):
        last = {int(r["subscriptions"]): r for r in ok if r["strategy"] == strategy}
        rs = [last[k] for k in sorted(last)]  # one point per size: its last run
        n = [int(r["subscriptions"]) for r in rs]

        def line(ax: Any, k: str, style: str, label: str, rs: list = rs, n: list = n,
                 strategy: str = strategy) -> None:
            ys = [to_float(r.get(k)) or float("nan") for r in rs]
            if any(y == y for y in ys):  # a series with no value (no 10k reference) is left out
                ax.plot(n, ys, style, label=f"{strategy} {label}")
        line(axes[0], "first_batch_s", "o-", "first batch")
        line(axes[0], "static_build_s", "s--", "static build")
        line(axes[1], "batch_us_per_candidate_rel", "o-", "batch")
        line(axes[1], "join_us_per_candidate_rel", "s--", "join")
        line(axes[1], "throughput_busy_rel", "^:", "throughput")
        line(axes[2], "jvm_hwm_mb", "o-", "JVM")
        line(axes[2], "driver_python_hwm_mb", "s--", "driver Python")
        line(axes[2], "python_workers_rss_peak_mb", "^:", "workers")
    axes[0].axhline(60, color="grey", lw=0.8)
    axes[0].set_title("seconds from launch (target ≤ 60 s at 1M)")
    axes[1].axhline(1.5, color="grey", lw=0.8)
    axes[1].set_title("relative to 10k (cost target ≤ 1.5)")
    axes[2].set_title("peak memory, MB")
    for ax in axes:
        if any(not ln.get_label().startswith("_") for ln in ax.get_lines()):  # has data
            ax.set_xscale("log")
            ax.legend(fontsize=7)
        ax.set_xlabel("subscriptions")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "scale.png", dpi=110)
    plt.close(fig)

    moves = [r for r in ok if to_float(r.get("move_ms")) is not None]
    if moves:
        fig, ax = plt.subplots(figsize=(6, 4))
        for strategy in sorted({r["strategy"] for r in moves}):
            rs = sorted((r for r in moves if r["strategy"] == strategy),
                        key=lambda r: int(r["subscriptions"]))
            ax.plot([to_float(r["move_bytes"]) / 1e6 for r in rs],
                    [to_float(r["move_ms"]) for r in rs], "o-", label=strategy)
            for r in rs:
                ax.annotate(f"{int(r['subscriptions']) // 1000}k",
                            (to_float(r["move_bytes"]) / 1e6, to_float(r["move_ms"])), fontsize=7)
        ax.set_xlabel("MB moved (a quarter of the partitions)")
        ax.set_ylabel("move duration, ms")
        ax.set_title("redistribution of one move (Fig. 8 to 1M)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "moves.png", dpi=110)
        plt.close(fig)


def with_phases(rows: list[dict[str, Any]], workdir: Path | None) -> list[dict[str, Any]]:
    """Rows with the start-up phases read from their app logs under ``workdir`` where a row
    has none yet."""
    out = []
    for r in rows:
        r = dict(r)
        log = workdir / r.get("prefix", "") / "app.log" if workdir and r.get("prefix") else None
        if to_float(r.get("streaming_at_s")) is None and log is not None and log.exists():
            r.update(phases(log.read_text(errors="replace"), to_float(r.get("first_batch_s"))))
        out.append(r)
    return out


def write_report(out: Path, reference: int, command: str, workdir: Path | None = None) -> None:
    rows = relative_to_reference(with_phases(read_rows(out / "runs.csv"), workdir), reference)
    for r in rows:
        r["batch_records"] = batch_size(r)
    (out / "table.md").write_text(f"<!-- {command} -->\n" + table(rows) + "\n")
    plots(rows, out)
