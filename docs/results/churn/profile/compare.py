"""Functions whose py-spy samples grew from 0 to 1,000 changes/s (inclusive counts).

``python docs/results/churn/profile/compare.py workers|driver`` in this directory's parent
reads ``profile/c0-<kind>.txt.gz`` and ``profile/c1000-<kind>.txt.gz`` (``py-spy record -f raw
-r 200 -d 25``) and prints the 45 frames whose samples grew the most.
"""

from __future__ import annotations

import collections
import gzip
import sys
from pathlib import Path


def load(path: Path) -> tuple[int, collections.Counter]:
    """(samples, inclusive samples per 'function (file)' frame) of a raw py-spy profile."""
    total, inclusive = 0, collections.Counter()
    with gzip.open(path, "rt") as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            n = int(count)
            total += n
            frames = {frame.rsplit(":", 1)[0] + ")" if " (" in frame else frame
                      for frame in stack.split(";")}
            for frame in frames:
                inclusive[frame] += n
    return total, inclusive


def main(kind: str) -> None:
    here = Path(__file__).parent
    t0, before = load(here / f"c0-{kind}.txt.gz")
    t1, after = load(here / f"c1000-{kind}.txt.gz")
    print(f"samples: {t0} at 0 changes/s, {t1} at 1,000")
    for frame in sorted(set(before) | set(after), key=lambda k: before[k] - after[k])[:45]:
        print(f"{before[frame]:6d} {after[frame]:6d} {after[frame] - before[frame]:+6d}  "
              f"{frame[:140]}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "workers")
