"""`geops bench live`: the scenarios (steady, rebalance, soak) built from the harness's
deployments, publisher and phases, and ``main``, which runs the one the command line chose (the
moving hot spot is in ``bench.live.moving``)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

from bench.harness.batches import batch_cost
from bench.harness.deployment import Session
from bench.harness.environment import Bench
from bench.harness.phase import nice, phase, publisher_for
from bench.harness.publisher import Log, Publisher
from bench.harness.tables import number
from bench.live import calc, report
from bench.live.moving import run_moving
from bench.live.search import find_max_rate
from bench.live.spec import LiveSpec
from geops.workload import SkewSpec, Workload, generate_workload


def workload_for(spec: LiveSpec, skewed: bool, log: Log) -> Workload:
    skew = None
    if skewed:
        skew = SkewSpec(workers=spec.app.workers, hot_workers=spec.hot_workers,
                        partitions=spec.app.partitions, partitioner=spec.app.partitioner,
                        target=spec.skew)
    log(f"generating the workload: {spec.subscriptions:,} subscriptions, a pool of "
        f"{spec.pool:,} publications, seed {spec.seed}"
        + (f", skew {spec.skew} on {spec.hot_workers} of {spec.app.workers} workers"
           if skewed else ""))
    return generate_workload(seed=spec.seed, subscriptions=spec.subscriptions,
                             publications=spec.pool, skew=skew, point_share=spec.point_share,
                             relation=spec.relation)


def backlog_throughput(s: Session, pub: Publisher, records: int, log: Log) -> dict:
    """How fast the running app drains ``records`` publications written at once: the same app
    and settings as the live steps, so the maximum sustainable rate can be set against it."""
    log(f"backlog: writing {records:,} publications at once")
    offer = pub.offer(records, 1.0, pub.new_base())  # as fast as the producer goes, within ~1 s
    drained = s.drain()
    batches = s.batches_between(offer.t0_ms, offer.t1_ms + int(drained * 1000) + 1000)
    rate = calc.drain_rate(batches)
    log(f"  backlog: {offer.sent:,} written in {(offer.t1_ms - offer.t0_ms) / 1000:.1f} s, "
        f"drained in {drained:.1f} s; {rate:,.0f} publications/s over {len(batches)} batches")
    return {"records": offer.sent, "rate": rate, "batches": len(batches)}


# -- scenarios -------------------------------------------------------------------------------

def run_steady(spec: LiveSpec, log: Log) -> dict:
    with Bench(spec, log) as bench:
        workload = workload_for(spec, skewed=False, log=log)
        s = bench.session("steady", workload)
        s.start_app()
        pub = publisher_for(s, workload)
        s.warm_up(pub, spec.start_rate)
        backlog = backlog_throughput(s, pub, spec.backlog, log) if spec.backlog else None
        cpu0, wall0 = time.process_time(), time.monotonic()
        best, verdicts = find_max_rate(spec, s, pub, log)
        # this process is mostly the producer (records pre-encoded but for id and time); with
        # the rate given there was no search to measure it over
        producer_cpu = ((time.process_time() - cpu0) / max(time.monotonic() - wall0, 1e-9)
                        if verdicts else None)
        if backlog:
            log(f"maximum sustainable rate / backlog throughput: {best / backlog['rate']:.2f}"
                + (f"; the producer's process used {producer_cpu:.0%} of a core during the "
                   f"search" if producer_cpu is not None else ""))
        phases = []
        for level in spec.levels:
            phases.append(phase(s, pub, f"{level:.0%} of max", nice(level * best),
                                spec.duration_s, log, level))
        for rate in spec.rates:
            phases.append(phase(s, pub, f"{rate:,.0f}/s", rate, spec.duration_s, log))
        idle = idle_cpu(s, spec.idle_s, log) if spec.idle_s else None
        pub.close()
        bench.end(s)
        for trigger in spec.trigger_sweep:
            s = bench.session(f"trigger-{trigger}", workload, trigger=trigger)
            s.start_app()
            pub = publisher_for(s, workload)
            s.warm_up(pub, spec.start_rate)
            phases.append(phase(s, pub, f"70% of max, trigger {trigger}", nice(0.7 * best),
                                spec.duration_s, log, 0.7))
            pub.close()
            bench.end(s)
    cost = batch_cost([b for p in phases for b in p.batches])
    if cost["fixed_ms"] is not None:
        log(f"cost of the batch function over {cost['batches']} batches: "
            f"{cost['fixed_ms']:,.0f} ms + {cost['us_per_record']:,.0f} µs per record "
            f"(R² {cost['r2']:.2f})")
    result = {"max_rate": best, "verdicts": verdicts, "phases": phases, "backlog": backlog,
              "producer_cpu": producer_cpu, "cost": cost, "idle": idle}
    report.write_steady(spec, result, log)
    return result


def run_modes(spec: LiveSpec, log: Log) -> dict:
    """The app in each of ``spec.modes`` in turn on the same workload and broker: its backlog
    throughput (``spec.backlog``), then each of ``spec.rates`` for ``spec.duration_s``;
    written side by side, with each mode's figures over the first mode's."""
    results: dict[str, dict] = {}
    with Bench(spec, log) as bench:
        workload = workload_for(spec, skewed=False, log=log)
        for mode in spec.modes:
            s = bench.session(mode, workload, app=replace(spec.app, mode=mode))
            s.start_app()
            pub = publisher_for(s, workload)
            s.warm_up(pub, spec.start_rate)
            backlog = backlog_throughput(s, pub, spec.backlog, log) if spec.backlog else None
            phases = [phase(s, pub, f"{mode} {rate:,.0f}/s", rate, spec.duration_s, log)
                      for rate in spec.rates]
            pub.close()
            bench.end(s)
            results[mode] = {"backlog": backlog, "phases": phases}
    report.write_modes(spec, results, log)
    return results


def idle_cpu(s: Session, seconds: float, log: Log) -> dict[str, float]:
    """Share of a core the app's processes and the broker use while no publication arrives
    for ``seconds`` (what the trigger costs when the stream is idle)."""
    s.drain()
    before, t0 = s.cpu_seconds(), time.monotonic()
    time.sleep(seconds)  # the measurement itself: CPU over a fixed idle window
    after, took = s.cpu_seconds(), time.monotonic() - t0
    share = {k: (after[k] - before[k]) / took for k in after}
    log(f"idle for {took:.0f} s: the app used {share['app']:.1%} of a core, the broker "
        f"{share['broker']:.1%}")
    return {"seconds": took, **share}


def run_rebalance(spec: LiveSpec, log: Log) -> dict:
    """A skewed stream at 70 % of the rate it sustains while skewed; the distributor starts
    a third of the way in; latency before, during and after its rebalance."""
    with Bench(spec, log) as bench:
        workload = workload_for(spec, skewed=True, log=log)
        s = bench.session("rebalance", workload)
        s.start_app()
        pub = publisher_for(s, workload)
        s.warm_up(pub, spec.start_rate)
        best, verdicts = find_max_rate(spec, s, pub, log)
        rate = nice(0.7 * best)
        at = spec.duration_s / 3

        def start_distributor() -> None:
            log(f"starting the distributor ({at:.0f} s into the phase)")
            s.start_distributor()

        result = phase(s, pub, "rebalance at 70% of max", rate, spec.duration_s, log, 0.7,
                       events=[(at, start_distributor)])
        with s.monitor.lock:
            commands = sorted(s.monitor.data.commands, key=lambda c: c["time"])
            moves = sorted(s.monitor.data.moves, key=lambda m: m["time"])
        result.marks = {"distributor": result.offer.t0_ms + int(at * 1000)}
        if commands:
            result.marks["command"] = commands[0]["time"]
            log(f"rebalance commanded at +{(commands[0]['time'] - result.offer.t0_ms) / 1000:.1f}"
                f" s: {len(commands[0]['moves'])} move(s), MLDC {commands[0]['mldc_before']:.2f}"
                f" -> {commands[0]['mldc_predicted']:.2f}")
        if moves:
            result.marks["moved"] = moves[0]["time"]
            log(f"app moved {len(moves[0]['partitions_moved'])} partition(s) at "
                f"+{(moves[0]['time'] - result.offer.t0_ms) / 1000:.1f} s in "
                f"{moves[0]['duration_ms']:.0f} ms")
        if not commands:
            log("warning: the distributor did not rebalance during the phase")
        pub.close()
        bench.end(s)
    out = {"max_rate": best, "verdicts": verdicts, "phase": result, "commands": commands,
           "moves": moves}
    report.write_rebalance(spec, out, log)
    return out


def run_soak(spec: LiveSpec, log: Log) -> dict:
    """70 % of the maximum sustainable rate with the distributor for ``spec.soak`` seconds;
    lag and the resident memory of every process every 10 s."""
    assert spec.soak is not None
    with Bench(spec, log) as bench:
        workload = workload_for(spec, skewed=spec.scenario == "rebalance", log=log)
        s = bench.session("soak", workload, memory=True)
        s.start_app()
        pub = publisher_for(s, workload)
        s.warm_up(pub, spec.start_rate)
        best, verdicts = find_max_rate(spec, s, pub, log)
        s.start_distributor()
        s.wait_distributor()
        rate = nice(0.7 * best)
        log(f"soak: offering {rate:,.0f} pub/s for {spec.soak:.0f} s with the distributor")
        chunk = 60.0
        offers = []
        t_end = time.monotonic() + spec.soak
        while (left := t_end - time.monotonic()) > 1:
            offers.append(pub.offer(rate, min(chunk, left), pub.new_base()))
            s.check_alive()
            with s.monitor.lock:
                mem = s.monitor.data.memory[-1] if s.monitor.data.memory else {}
            log(f"  soak +{sum(o.seconds for o in offers):.0f} s: lag "
                f"{number(s.monitor.latest_lag())}, RSS "
                + ", ".join(f"{k[:-3]} {v:,.0f} MB" for k, v in mem.items() if k.endswith("_mb")))
        drained = s.drain()
        with s.monitor.lock:
            memory = list(s.monitor.data.memory)
            t0, t1 = offers[0].t0_ms, offers[-1].t1_ms
        samples = s.samples_between(t0, t1)
        batches = s.batches_between(t0, t1 + int(drained * 1000) + 1000)
        memory = [m for m in memory if t0 <= m["time_ms"] <= t1]
        pub.close()
        bench.end(s)
    out = {"max_rate": best, "rate": rate, "verdicts": verdicts, "memory": memory,
           "samples": samples, "batches": batches, "t0_ms": t0, "t1_ms": t1,
           "sent": sum(o.sent for o in offers)}
    report.write_soak(spec, out, log)
    return out


def main(spec: LiveSpec, log: Log) -> None:
    log(f"command: {' '.join(spec.command) or ' '.join(sys.argv)} (pid {os.getpid()})")
    if spec.soak is not None:
        run_soak(spec, log)
    elif spec.scenario == "rebalance":
        run_rebalance(spec, log)
    elif spec.scenario == "moving":
        run_moving(spec, log)
    elif spec.modes:
        run_modes(spec, log)
    else:
        run_steady(spec, log)
