"""Reading the results tables: plain, gzipped, or both (a resumed compressed directory); writing
and appending them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.harness.csv_tables import (
    append_csv,
    gzip_beside,
    iter_rows,
    read_rows,
    stored,
    write_csv,
    write_rounded,
)
from bench.paper.results import point_table

RUNS = [{"run_id": f"r{i}", "repeat": i, "x": i * 1.5} for i in range(3)]


def test_a_gzipped_table_reads_as_the_plain_one(tmp_path: Path) -> None:
    path = tmp_path / "loads.csv"
    write_csv(path, RUNS)
    plain = read_rows(path)
    gzip_beside(path)
    assert read_rows(path) == plain == [{"run_id": f"r{i}", "repeat": str(i),
                                         "x": str(i * 1.5)} for i in range(3)]
    assert stored(path) == [tmp_path / "loads.csv.gz"]


def test_rows_appended_after_compression_follow_the_stored_ones(tmp_path: Path) -> None:
    path = tmp_path / "loads.csv"
    write_csv(path, RUNS[:2])
    gzip_beside(path)
    write_csv(path, RUNS[2:])   # the harness appends new runs to a plain loads.csv
    assert [r["run_id"] for r in read_rows(path)] == ["r0", "r1", "r2"]


def test_a_table_stored_in_parts_reads_in_part_order(tmp_path: Path) -> None:
    for i in (2, 10, 1):  # numbered, not sorted by name
        part = tmp_path / f"loads.part-{i}.csv"
        write_csv(part, [{"run_id": f"r{i}", "repeat": "0", "x": "1"}])
        gzip_beside(part)
    write_csv(tmp_path / "loads.csv", [{"run_id": "new", "repeat": "0", "x": "1"}])
    assert [r["run_id"] for r in read_rows(tmp_path / "loads.csv")] == ["r1", "r2", "r10", "new"]


def test_a_table_recompressed_with_xz_reads_as_the_plain_one(tmp_path: Path) -> None:
    """How docs/results keeps its tables: ``name.csv.xz``, or parts ``name.part-N.csv.xz``."""
    write_csv(tmp_path / "loads.csv.xz", RUNS)
    for i in (2, 1):
        write_csv(tmp_path / f"batches.part-{i}.csv.xz", [{"run_id": f"r{i}"}])
    assert read_rows(tmp_path / "loads.csv") == read_rows(tmp_path / "loads.csv.xz")
    assert [r["run_id"] for r in read_rows(tmp_path / "loads.csv")] == ["r0", "r1", "r2"]
    assert [r["run_id"] for r in read_rows(tmp_path / "batches.csv")] == ["r1", "r2"]


def test_rows_of_some_runs_only(tmp_path: Path) -> None:
    path = tmp_path / "loads.csv"
    write_csv(path, RUNS)
    gzip_beside(path)
    assert [r["run_id"] for r in iter_rows(path, {"r0", "r2"})] == ["r0", "r2"]


def test_a_missing_or_empty_table_has_no_rows(tmp_path: Path) -> None:
    assert read_rows(tmp_path / "runs.csv") == []
    write_csv(tmp_path / "empty.csv", [])
    assert read_rows(tmp_path / "empty.csv") == []


def test_point_table_ignores_empty_cells() -> None:
    table = [{"pipeline": "sPS", "mode": "Static STAL", "skew": "0.5", "x": v}
             for v in ("1", "", "3")]
    (point,) = point_table(table, ["x"])
    assert (point["n"], point["x_mean"], point["x_min"], point["x_max"]) == (3, 2.0, 1.0, 3.0)
    (empty,) = point_table(table[1:2], ["x"])
    assert math.isnan(empty["x_mean"])


@pytest.mark.parametrize("name", ["runs.csv", "runs.csv.gz"])
def test_appended_rows_follow_the_header_and_a_new_column_widens_it(tmp_path: Path,
                                                                   name: str) -> None:
    path = tmp_path / name
    append_csv(path, RUNS[:1])
    append_csv(path, [{"x": 9, "run_id": "r9", "repeat": 9}])   # the header's order is kept
    append_csv(path, [{"run_id": "r10", "repeat": 10, "x": 1, "load": 0.5}])
    assert read_rows(path) == [
        {"run_id": "r0", "repeat": "0", "x": "0.0", "load": ""},
        {"run_id": "r9", "repeat": "9", "x": "9", "load": ""},
        {"run_id": "r10", "repeat": "10", "x": "1", "load": "0.5"}]


def test_measurements_are_rounded_and_no_rows_leave_a_header(tmp_path: Path) -> None:
    write_rounded(tmp_path / "a.csv", [{"x": 1 / 3}, {"y": 2}])
    assert read_rows(tmp_path / "a.csv") == [{"x": "0.333333", "y": ""}, {"x": "", "y": "2"}]
    write_rounded(tmp_path / "b.csv", [])
    assert (tmp_path / "b.csv").read_bytes() == b"empty\r\n"
