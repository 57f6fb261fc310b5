"""The durations record the test order comes from (``tests/durations.json``, read by
``tests/conftest.py``) names test files that exist, with their seconds."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_durations_record_names_existing_test_files():
    recorded = json.loads((ROOT / "tests" / "durations.json").read_text())
    assert recorded
    missing = [path for path in recorded if not (ROOT / path).is_file()]
    assert not missing, f"renamed or removed; record the durations again: {missing}"
    assert all(isinstance(s, int | float) and s >= 0 for s in recorded.values())
