"""Integers packed as bytes for a record's bulk columns: fixed-width little-endian offsets
above a base (frame of reference), as narrow as the largest offset allows.

An Avro array of longs costs a Python call per value to write and to read; these bytes are one
NumPy call each way, and smaller too (subscription ids within 65,536 of each other take two
bytes each, where Avro's varints take up to three).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

WIDTHS = (1, 2, 4, 8)  # bytes per value: NumPy's "<u1" to "<u8"


class IntFrame(NamedTuple):
    """How a column of integers is packed: ``base`` and the bytes per value."""

    base: int
    width: int

    @classmethod
    def of(cls, values: np.ndarray) -> IntFrame:
        """The narrowest frame that holds ``values`` (int64); an empty column's is one byte
        wide (it packs to no bytes)."""
        v = np.asarray(values, np.int64)
        if not len(v):
            return cls(0, 1)
        base = int(v.min())
        top = int(v.max()) - base
        return cls(base, next(w for w in WIDTHS if top <= np.iinfo(f"u{w}").max))

    def pack(self, values: np.ndarray) -> bytes:
        """``values`` (within the frame) as bytes."""
        v = np.asarray(values, np.int64)
        # int64 arithmetic wraps for a spread past 2**63; the unsigned view keeps it exact
        return (v.view(np.uint64) - np.uint64(self.base % 2**64)).astype(
            f"<u{self.width}").tobytes()

    def unpack(self, data: bytes) -> np.ndarray:
        """The int64 values of ``data`` packed in this frame; ``ValueError`` when ``data`` is
        not a whole number of values or the width is not one of ``WIDTHS``."""
        if self.width not in WIDTHS:
            raise ValueError(f"packed integers of {self.width} bytes; "
                             f"one of {', '.join(map(str, WIDTHS))}")
        if len(data) % self.width:
            raise ValueError(f"{len(data)} bytes are not whole values of {self.width} bytes")
        raw = np.frombuffer(data, f"<u{self.width}").astype(np.uint64)
        return (raw + np.uint64(self.base % 2**64)).view(np.int64)
