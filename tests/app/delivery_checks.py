"""Runs of `geops app` as their own process group, and what a read_committed reader sees of
their output: shared by the delivery tests (driver, task, broker and worker failures)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import config
from kafkaio.dump import by_schema

# Small batches, so a workload of 1,500 publications makes 15 or more of them and a fault can
# be placed at a given batch whatever the timing; a short idle stop ends the last run.
APP_FLAGS = ["app", "--workers", "2", "--strategy", "sPIS", "--partitions", "8",
             "--trigger", "200ms", "--max-records-per-trigger", "100", "--stop-after-idle", "4s"]


def run_app(flags: list[str], env: dict[str, str], log: Path, timeout: float = 150.0,
            cwd: Path | None = None) -> int:
    """Run `geops app` with ``APP_FLAGS`` and ``flags`` (in ``cwd``) until it exits; its exit
    code (negative: killed by that signal). Whatever it leaves of its process group is
    killed."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", *APP_FLAGS, *flags],
                                env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the app did not exit in {timeout:.0f} s; log "
                                 f"{log}:\n{log.read_text()[-3000:]}") from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def visible_output(cfg: config.Config) -> tuple[dict[int, list[dict]], list[dict]]:
    """What a read_committed consumer sees: the Match records by publication id, and the
    BatchSummary records."""
    found: dict[int, list[dict]] = defaultdict(list)
    for rec in by_schema(cfg.kafka_client(), cfg.topic("matches")).get("Match", []):
        found[rec["publication_id"]].append(rec)
    return dict(found), by_schema(cfg.kafka_client(), cfg.topic("metrics")).get(
        "BatchSummary", [])


def duplicated_batches(got: dict[int, list[dict]], summaries: list[dict]
                       ) -> tuple[set[int], set[int]]:
    """The batches with a Match record visible more than once, and those summarised more
    than once."""
    matches = {r["batch_id"] for recs in got.values() if len(recs) > 1 for r in recs}
    counts = Counter(s["batch_id"] for s in summaries)
    return matches, {b for b, n in counts.items() if n > 1}


def assert_matches_oracle(got: dict[int, list[dict]], oracle: dict[int, tuple[int, ...]]
                          ) -> None:
    """Every matching publication is there with the oracle's subscriptions (each copy)."""
    assert set(got) == set(oracle), (f"missing {sorted(set(oracle) - set(got))[:10]}, "
                                     f"unexpected {sorted(set(got) - set(oracle))[:10]}")
    wrong = [p for p, recs in got.items()
             if any(tuple(r["subscription_ids"]) != oracle[p] for r in recs)]
    assert not wrong, f"publications matched other subscriptions than the oracle's: {wrong[:10]}"


def assert_exactly_once(cfg: config.Config, oracle: dict[int, tuple[int, ...]],
                        batches: bool = True) -> None:
    """One Match record per matching publication, equal to the oracle's, and (``batches``: a
    micro-batch app's) one summary per batch, batch ids without a gap."""
    got, summaries = visible_output(cfg)
    assert_matches_oracle(got, oracle)
    twice = {p: [r["batch_id"] for r in recs] for p, recs in got.items() if len(recs) > 1}
    assert not twice, (f"{len(twice)} publications have more than one Match: "
                       f"{list(twice.items())[:5]}")
    if batches:
        ids = sorted(s["batch_id"] for s in summaries)
        assert ids == list(range(len(ids))), ids
