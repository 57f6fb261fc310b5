"""Integers packed as bytes above a base (``schemas.int_pack``): every int64 comes back, in the
narrowest width, and bytes of another shape are refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.int_pack import IntFrame

INT64 = st.integers(-(2**63), 2**63 - 1)


@given(st.lists(INT64, max_size=50))
def test_every_int64_comes_back(values):
    v = np.array(values, np.int64)
    frame = IntFrame.of(v)
    back = frame.unpack(frame.pack(v))
    assert back.dtype == np.int64 and back.tolist() == values


@pytest.mark.parametrize(("values", "width"), [
    ([], 1), ([7], 1), ([-3, 252], 1), ([-3, 253], 2), ([10**12, 10**12 + 65_535], 2),
    ([10**12, 10**12 + 65_536], 4), ([0, 2**32], 8), ([-(2**63), 2**63 - 1], 8)])
def test_the_narrowest_width(values, width):
    frame = IntFrame.of(np.array(values, np.int64))
    assert frame.width == width
    assert len(frame.pack(np.array(values, np.int64))) == width * len(values)


def test_bytes_of_another_shape_are_refused():
    with pytest.raises(ValueError, match="5 bytes are not whole values of 2 bytes"):
        IntFrame(0, 2).unpack(b"\x00" * 5)
    with pytest.raises(ValueError, match="packed integers of 3 bytes; one of 1, 2, 4, 8"):
        IntFrame(0, 3).unpack(b"\x00" * 6)
