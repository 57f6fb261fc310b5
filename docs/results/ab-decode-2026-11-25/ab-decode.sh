#!/usr/bin/env bash
# A/B of the one-pass publication decoder end to end: sPIS and RIsPS at skew 0.9, Static STAL vs
# Dynamic LB STAL, the frozen matrix code (f2e4a7f) vs main (one-pass decode), alternating which
# checkout goes first per (repeat, pipeline). Usage: [MAIN=..] [FROZEN=..] ab-decode.sh MAIN_COMMIT REPEATS...
# (run here as: ab-decode.sh 233dc98 1 2 3; FROZEN is a worktree of f2e4a7f with its own .venv)
# It calls the harness's run_plan directly because `geops bench paper --full` would also run
# Fig. 8's redistribution runs and render figures after every call.
set -u
main=${MAIN:-/work/main} frozen=${FROZEN:-/work/bench-frozen}
ab=$main/docs/results/ab-decode-2026-11-25
main_commit=$1; shift
run() {  # checkout dir, repeats, pipeline
  local dir=$1 repeats=$2 pipeline=$3 side
  side=$([ "$dir" = "$frozen" ] && echo frozen-f2e4a7f || echo onepass-$main_commit)
  echo "== $(date -u +%T) $side repeat $((repeats - 1)) $pipeline"
  (cd "$dir" && .venv/bin/python -c "
from pathlib import Path
from bench.paper.harness import run_plan
from bench.paper.plan import FULL_SIZES, MIN_STREAM_S, full_plan
from bench.paper.runner import DistributorSettings
plan = full_plan($repeats, ('$pipeline',), ('Static STAL', 'Dynamic LB STAL'), (0.9,), FULL_SIZES)
run_plan(plan, Path('$ab/$side'), Path('/tmp/bench-runs'), DistributorSettings(),
         log=lambda m: print(m, flush=True), min_stream_s=MIN_STREAM_S)
") || exit 1
}
for repeats in "$@"; do
  if [ $((repeats % 2)) = 1 ]; then
    run "$frozen" "$repeats" sPIS; run "$main" "$repeats" sPIS
    run "$main" "$repeats" RIsPS; run "$frozen" "$repeats" RIsPS
  else
    run "$main" "$repeats" sPIS; run "$frozen" "$repeats" sPIS
    run "$frozen" "$repeats" RIsPS; run "$main" "$repeats" RIsPS
  fi
done
echo "== $(date -u +%T) done"
