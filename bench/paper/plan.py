"""Which runs make up the paper's evaluation here, and their sizes.

A mode is a join location plus a balancing: Static modes keep the initial assignment (the
distributor only observes and reports MLDC), Dynamic modes let it command rebalances using
processing time (LB) or item counts (DB). ``Adaptive STAL`` lets the self-tuning
distributor (``--mode adaptive``) decide; ``Dynamic LB STAL replicate`` is Dynamic
LB STAL with the distributor's ``--policy replicate`` (hot partitions get several owners) where
every other mode uses the paper's ``greedy``. Neither is one of the paper's six; they run only
when asked for (``--modes``).

A plan may add **hot-spot points**: the skewed share of the stream in K partitions
of the hot worker (``geops generate --hot-partitions K``), e.g. ``HOT_SPOT``, the W = 2 stream
with 80 % of its items in one partition that the hot-partition simulation predicts
(``bench.studies.hot_partitions.CONCENTRATED``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from config import choices
from geops.strategies import KINDS


def mode_name(join: str, balancing: str) -> str:
    """The name of the mode with a join location (``choices.JOINS``) and a balancing: static,
    a load metric (``choices.METRICS``) or adaptive, e.g. 'Static STAL', 'Dynamic LB STRL'."""
    join = choices.JOINS.check(join)
    if balancing in ("static", "adaptive"):
        return f"{balancing.capitalize()} {join}"
    return f"Dynamic {choices.METRICS.check(balancing)} {join}"


def mode_key(mode: str) -> str:
    """A mode's name as it stands in run ids: without spaces ('DynamicLBSTAL')."""
    return mode.replace(" ", "")


STATIC_STRL, STATIC_STAL = mode_name("STRL", "static"), mode_name("STAL", "static")
DYNAMIC_LB_STAL, DYNAMIC_DB_STAL = mode_name("STAL", "LB"), mode_name("STAL", "DB")
DYNAMIC_LB_STRL, DYNAMIC_DB_STRL = mode_name("STRL", "LB"), mode_name("STRL", "DB")
# The paper's six, in the order of its figures: join location and balancing.
MODES: dict[str, tuple[str, str]] = {
    STATIC_STRL: ("STRL", "static"),
    STATIC_STAL: ("STAL", "static"),
    DYNAMIC_LB_STAL: ("STAL", "LB"),
    DYNAMIC_DB_STAL: ("STAL", "DB"),
    DYNAMIC_LB_STRL: ("STRL", "LB"),
    DYNAMIC_DB_STRL: ("STRL", "DB"),
}
ADAPTIVE = mode_name("STAL", "adaptive")
REPLICATE = f"{DYNAMIC_LB_STAL} replicate"
# Every mode a physical run can have: the paper's six, then ours.
RUN_MODES: dict[str, tuple[str, str]] = {**MODES, ADAPTIVE: ("STAL", "adaptive"),
                                         REPLICATE: ("STAL", "LB")}
# The distributor's --policy per mode: the paper's greedy unless named here.
PAPER_POLICY = "greedy"
MODE_POLICIES: dict[str, str] = {REPLICATE: "replicate"}
# (hot partitions K, skew): the W = 2 concentrated hot spot run physically, 80 % of the items in one
# partition of the hot worker (the simulation's "W = 2 one-partition case")
HOT_SPOT = (1, 0.8)
PIPELINES = choices.STRATEGIES.names
SKEWS = (0.5, 0.6, 0.7, 0.8, 0.9)
BALANCED = 0.5  # one hot worker of two
# Hash partitioning spreads a spatially skewed stream evenly: RIhPS can only be balanced.
HASH_SKEWS = (0.5,)


@dataclass(frozen=True)
class Sizes:
    """Workload and batch sizes of one pipeline (batches long enough that the join dominates
    Spark's fixed per-batch cost on this machine, streams long enough for >= 60 s)."""

    subscriptions: int
    publications: int
    max_records_per_trigger: int


@dataclass(frozen=True)
class RunSpec:
    """One physical run."""

    pipeline: str
    mode: str
    skew: float
    repeat: int
    sizes: Sizes
    workers: int = 2
    hot_workers: int = 1
    partitions: int = 64
    partitioner: str = "kdbtree"
    label: str = ""  # tells apart runs that differ in something else (e.g. static size)
    first_period: str | None = None  # the distributor's first period, if not the settings'
    hot_partitions: int | None = None  # the skewed share in K partitions (a hot-spot point)

    @property
    def join(self) -> str:
        return RUN_MODES[self.mode][0]

    @property
    def balancing(self) -> str:
        return RUN_MODES[self.mode][1]

    @property
    def policy(self) -> str:
        """The distributor's ``--policy``."""
        return MODE_POLICIES.get(self.mode, PAPER_POLICY)

    @property
    def run_id(self) -> str:
        mode = mode_key(self.mode)
        hot = f"-hp{self.hot_partitions}" if self.hot_partitions is not None else ""
        rid = f"{self.pipeline}-{mode}-s{round(self.skew * 100):02d}{hot}-r{self.repeat}"
        return f"{rid}-{self.label}" if self.label else rid


# About 75-80 s of streaming in the fastest mode, measured here with the code of 2026-11-25
# (a balanced Dynamic LB STAL run per pipeline), so that a faster machine still streams >= 60 s;
# the same number of batches per run as before (~20-33), each a few seconds of join work.
FULL_SIZES = choices.STRATEGIES.table({
    "sPS": Sizes(10_000, 440_000, 13_200),
    "sPIS": Sizes(10_000, 756_000, 36_000),
    "RIhPS": Sizes(10_000, 420_000, 21_000),
    "RIsPS": Sizes(10_000, 672_000, 32_000),
})
QUICK_SIZES = Sizes(2_000, 12_000, 3_000)
# The paper's method streams each run for at least this long; shorter runs are diluted more by
# the skewed start before a rebalance (the harness warns, --scale lengthens them).
MIN_STREAM_S = 60.0


def scaled(sizes: dict[str, Sizes], factor: float) -> dict[str, Sizes]:
    """``sizes`` for a machine ``factor`` times faster than the one FULL_SIZES were measured on:
    publications and records per batch grow alike, so a run keeps its number of batches and each
    batch its share of fixed per-batch cost (subscriptions stay: the static side is the same)."""
    if factor <= 0:
        raise ValueError(f"scale must be positive, got {factor}")
    return {name: replace(s, publications=max(1, round(s.publications * factor)),
                          max_records_per_trigger=max(1, round(s.max_records_per_trigger * factor)))
            for name, s in sizes.items()}


def full_plan(repeats: int = 3, pipelines: tuple[str, ...] = PIPELINES,
              modes: tuple[str, ...] = tuple(MODES), skews: tuple[float, ...] = SKEWS,
              sizes: dict[str, Sizes] | None = None,
              hot_spots: tuple[tuple[int, float], ...] = ()) -> list[RunSpec]:
    """Every pipeline x mode x skew x repeat; a hashing pipeline (RIhPS) only at the skews
    hashing allows. Each (K, skew) of ``hot_spots`` adds a point whose skewed share falls in K
    partitions (spatial pipelines only: hashing spreads it)."""
    sizes = sizes or FULL_SIZES
    runs = []
    for repeat in range(repeats):
        for pipeline in pipelines:
            allowed = skews if KINDS[pipeline].spatial else HASH_SKEWS
            points = [(None, s) for s in skews if s in allowed]
            if KINDS[pipeline].spatial:
                points += list(hot_spots)
            for hot, skew in points:
                for mode in modes:
                    runs.append(RunSpec(pipeline, mode, skew, repeat, sizes[pipeline],
                                        hot_partitions=hot))
    return runs


# Labels of the first-period A/B; the Dynamic runs' label ends with the first period.
AB_LABEL = "ab"
FIRST_PERIODS = choices.FIRST_PERIODS.names


def first_period_plan(repeats: int = 3, pipelines: tuple[str, ...] = PIPELINES,
                      skews: tuple[float, ...] = (0.9,),
                      sizes: dict[str, Sizes] | None = None) -> list[RunSpec]:
    """A/B of the distributor's first period: per point, Static STAL and Dynamic LB STAL with
    each first period, back to back on the same stream, so their ratios share one time window.
    """
    runs = []
    for spec in full_plan(repeats, pipelines, (STATIC_STAL, DYNAMIC_LB_STAL), skews, sizes):
        if spec.balancing == "static":
            runs.append(replace(spec, label=AB_LABEL))
        else:
            runs += [replace(spec, label=f"{AB_LABEL}-{fp}", first_period=fp)
                     for fp in FIRST_PERIODS]
    return runs


def quick_plan() -> list[RunSpec]:
    """CI's check of the harness: one pipeline, Dynamic LB STAL at the balanced and the skewed
    end and Static STAL at the skewed end, the three runs the targets' ratios need."""
    return [replace(spec, sizes=QUICK_SIZES, partitions=16)
            for spec in full_plan(1, ("sPIS",), (STATIC_STAL, DYNAMIC_LB_STAL), (0.5, 0.9),
                                  {"sPIS": QUICK_SIZES})
            if not (spec.mode == STATIC_STAL and spec.skew == 0.5)]
