"""`geops bench live --scenario moving`: a hot spot that moves between workers mid-stream,
live, with the distributor (``--distributor-mode``, adaptive by default) following it, against
an ideal run of the same stream on balanced assignments.

The workload is `geops generate --moving-hotspot`'s (``SkewSpec(moving=True)``): the pool's
first half puts ``--skew`` of its stream items in the partitions of workers 0..H-1, the second
half in those of workers W/2..W/2+H-1 (initial assignment). The run offers 70 % of the maximum
sustainable rate of the first half's stream (searched as in the rebalance scenario, or
``--max-rate``) as one stream of ``(--shifts + 1) x --duration``, switching pools every
``--duration`` (hot on worker 0, then 1, then 0, ...), the distributor running throughout.

The ideal run (a second app on fresh topics, no distributor) offers each phase's stream for
``--duration`` at the same rate on the assignment the distributor's policy proposes for that
phase's per-partition processing times as measured in the run (second half of the phase),
commanded before the phase and moved while a few unmeasured batches run: the same stream,
balanced from its first publication, no move inside the measurement. Capacity on both sides is
publications per busy second (``window_throughput``).
"""

from __future__ import annotations

import os
from functools import partial

import numpy as np

from bench.harness.batches import window_throughput
from bench.harness.deployment import Session
from bench.harness.environment import Bench
from bench.harness.phase import PhaseResult, nice, phase
from bench.harness.publisher import Log, Publisher, now_ms
from bench.live import calc, moving_calc, report
from bench.live.search import find_max_rate
from bench.live.spec import LiveSpec
from distributor.policies import make_policy
from geops.workload import SkewSpec, Workload, generate_workload


def moving_pools(spec: LiveSpec, log: Log) -> tuple[Workload, tuple[np.ndarray, np.ndarray]]:
    """The workload of ``spec.pool`` publications whose hot spot moves half-way, and its two
    pools (hot on workers 0..H-1, hot on workers W/2..W/2+H-1)."""
    skew = SkewSpec(workers=spec.app.workers, hot_workers=spec.hot_workers,
                    partitions=spec.app.partitions, partitioner=spec.app.partitioner,
                    target=spec.skew, moving=True)
    log(f"generating the workload: {spec.subscriptions:,} subscriptions, a pool of "
        f"{spec.pool:,} publications (seed {spec.seed}), skew {spec.skew} on {spec.hot_workers}"
        f" of {spec.app.workers} workers, the second half on the other side")
    workload = generate_workload(seed=spec.seed, subscriptions=spec.subscriptions,
                                 publications=spec.pool, skew=skew,
                                 point_share=spec.point_share, relation=spec.relation)
    assert workload.skew is not None and workload.skew.moved_at is not None
    return workload, moving_calc.split_pools(workload.publications.geoms,
                                             workload.skew.moved_at)


def _publisher(s: Session, pools: tuple[np.ndarray, np.ndarray]) -> Publisher:
    return Publisher(s.cfg.kafka_client(), s.cfg.topic("publications"), pools[0], pools[1:])


def _hot(spec: LiveSpec, k: int) -> str:
    return "w" + "+w".join(str(w) for w in moving_calc.hot_workers_of_phase(
        k, spec.app.workers, spec.hot_workers))


def run_moving(spec: LiveSpec, log: Log) -> dict:
    """The moving hot spot with the distributor, then the ideal run; writes the results."""
    phases = spec.shifts + 1
    with Bench(spec, log) as bench:
        workload, pools = moving_pools(spec, log)
        partitions = workload.skew.num_partitions
        s = bench.session("moving", workload, loads=True)
        s.start_app()
        pub = _publisher(s, pools)
        s.warm_up(pub, spec.start_rate)
        best, verdicts = find_max_rate(spec, s, pub, log)
        rate = nice(0.7 * best)
        log(f"starting the distributor (--mode {spec.distributor_mode})")
        s.start_distributor(spec.distributor_mode)
        s.wait_distributor()
        shifts_ms: list[int] = []
        shift_load: list[float] = []

        def shift(k: int) -> None:
            pub.use(moving_calc.pool_of_phase(k))
            shifts_ms.append(now_ms())
            shift_load.append(os.getloadavg()[0])
            log(f"shift {k}: the hot spot moves to {_hot(spec, k)}")

        run = phase(s, pub, f"moving hot spot ({spec.distributor_mode})", rate,
                    phases * spec.duration_s, log, 0.7,
                    events=[(k * spec.duration_s, partial(shift, k))
                            for k in range(1, phases)])
        with s.monitor.lock:
            commands = sorted(s.monitor.data.commands, key=lambda c: c["time"])
            moves = sorted(s.monitor.data.moves, key=lambda m: m["time"])
            loads = list(s.monitor.data.loads)
        pub.close()
        bench.end(s)
        distributor_log = (s.dir / "distributor.log").read_text(errors="replace")
        policy = make_policy(s.cfg.view.distributor.policy)  # the distributor's

        end_ms = run.offer.t1_ms + int(run.drain_s * 1000) + 1000
        bounds = moving_calc.phase_bounds(run.offer.t0_ms, shifts_ms, end_ms)
        s = bench.session("ideal", workload)
        s.start_app()
        pub = _publisher(s, pools)
        s.warm_up(pub, spec.start_rate)
        ideal: list[PhaseResult] = []
        plans = []
        for k, (a, _) in enumerate(bounds):
            measured = moving_calc.partition_loads(loads, a + spec.duration_s * 500,
                                                   a + spec.duration_s * 1000, partitions)
            owners, mldc = moving_calc.ideal_owners(policy, measured, spec.app.workers)
            plans.append({"owners": owners, "mldc": mldc})
            s.command(k + 1, owners, f"bench live ideal, phase {k}: policy {policy.name} "
                                     f"for the run's loads, MLDC {mldc}")
            pub.use(moving_calc.pool_of_phase(k))
            s.warm_up(pub, rate, batches=2, epoch=k + 1)
            ideal.append(phase(s, pub, f"ideal phase {k} (hot {_hot(spec, k)})", rate,
                               spec.duration_s, log, 0.7))
        with s.monitor.lock:
            ideal_moves = sorted(s.monitor.data.moves, key=lambda m: m["time"])
        pub.close()
        bench.end(s)
    run.marks = {f"shift {k}": t for k, t in enumerate(shifts_ms, 1)}
    run.marks.update({f"e{c['epoch']}": c["time"] for c in commands})
    result = summarise(spec, run, ideal, bounds, commands, moves, shift_load, loads, partitions)
    result.update({"max_rate": best, "verdicts": verdicts, "rate": rate, "plans": plans,
                   "ideal_moves": ideal_moves, "policy": policy.name,
                   "distributor_log": distributor_log})
    report.write_moving(spec, result, log)
    return result


def summarise(spec: LiveSpec, run: PhaseResult, ideal: list[PhaseResult],
              bounds: list[tuple[float, float]], commands: list[dict], moves: list[dict],
              shift_load: list[float], loads: list[tuple[int, int, int]],
              partitions: int) -> dict:
    """Per phase: rebalances, how unbalanced the phase began (MLDC up to its first command
    under the owners in force), capacity of the run and of the ideal, latency before and
    after the phase's first rebalance; the commands with their moves; the verdict."""
    per_phase = moving_calc.count_per_phase([c["time"] for c in commands], bounds)
    run_cap = [window_throughput(run.batches, a, b) for a, b in bounds]
    ideal_cap = [window_throughput(p.batches, p.offer.t0_ms,
                                              p.offer.t1_ms + int(p.drain_s * 1000) + 1000)
                 for p in ideal]
    ratio = moving_calc.ideal_ratio(run_cap, ideal_cap)
    moved = {m["epoch"]: m for m in moves}
    t0 = run.offer.t0_ms
    rows, windows = [], []
    load_avg = [*shift_load, run.load]
    for k, (a, b) in enumerate(bounds):
        end = min(b, run.offer.t1_ms)   # publications' event times end with the stream
        first = next((c for c in commands if a <= c["time"] < b), None)
        move = moved.get(first["epoch"]) if first else None
        named = [(f"phase {k} {name}", x, y) for name, x, y in calc.rebalance_windows(
            a, end, first["time"] if first else None, move["time"] if move else None)]
        windows += calc.windows(run.event_ms, run.latency, named)
        whole = calc.windows(run.event_ms, run.latency, [("", a, end)])[0]
        unbalanced = moving_calc.shift_mldc(loads, commands, a, first["time"] if first else end,
                                            partitions, spec.app.workers)
        lat = ideal[k].summary()
        rows.append({
            "phase": k, "hot": _hot(spec, k), "start_s": (a - t0) / 1000,
            "seconds": (end - a) / 1000, "mldc_at_start": unbalanced,
            "rebalances": per_phase[k],
            "first_command_s": (first["time"] - a) / 1000 if first else None,
            "batches": run_cap[k]["batches"], "records": run_cap[k]["records"],
            "busy_share": run_cap[k]["busy_share"], "per_busy_s": run_cap[k]["per_busy_s"],
            "ideal_batches": ideal_cap[k]["batches"],
            "ideal_busy_share": ideal_cap[k]["busy_share"],
            "ideal_per_busy_s": ideal_cap[k]["per_busy_s"], "ratio": ratio["phases"][k],
            "p50_ms": whole["p50"], "p99_ms": whole["p99"],
            "ideal_p50_ms": lat["p50_ms"], "ideal_p99_ms": lat["p99_ms"],
            "loadavg_1m": load_avg[k] if k < len(load_avg) else None})
    command_rows = []
    for c in commands:
        k = next((i for i, (a, b) in enumerate(bounds) if a <= c["time"] < b), None)
        m = moved.get(c["epoch"])
        command_rows.append({
            "epoch": c["epoch"], "phase": k, "time_s": (c["time"] - t0) / 1000,
            "after_shift_s": None if k is None else (c["time"] - bounds[k][0]) / 1000,
            "moves": len(c["moves"]), "replicated": len(c.get("replicas") or []),
            "mldc_before": c["mldc_before"], "mldc_predicted": c["mldc_predicted"],
            "moved_partitions": len(m["partitions_moved"]) if m else None,
            "moved_bytes": m["bytes"] if m else None,
            "move_ms": m["duration_ms"] if m else None, "reason": c["reason"]})
    return {"run": run, "ideal": ideal, "bounds": bounds, "phases": rows,
            "windows": windows, "commands": command_rows, "ratio": ratio,
            "per_phase": per_phase,
            "follows": moving_calc.follows_every_shift(
                per_phase, [r["mldc_at_start"] for r in rows]),
            "within": (ratio["overall"] is not None
                       and ratio["overall"] >= moving_calc.MIN_IDEAL_RATIO)}
