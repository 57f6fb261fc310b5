"""`geops bench load` times geops subscribe's stages before and now, and checks they agree."""

from __future__ import annotations

from bench.load.run import format_table, run_load_bench


def test_load_bench_agrees_and_reports_every_stage():
    rows = run_load_bench(subscriptions=400, seed=1, log=lambda _m: None)
    stages = {r.stage for r in rows}
    assert stages == {"parse JSON", "geometries", "read file", "encode", "file to records"}
    assert all(r.features == 400 and r.seconds > 0 for r in rows)
    table = format_table(rows)
    assert "GeoJSON (now)" in table and "ratio" in table.splitlines()[0]
