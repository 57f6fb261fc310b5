"""Decoding consumed messages into records (no broker: stand-in messages)."""

from __future__ import annotations

from kafkaio.dump import decoded_messages, decoded_records
from schemas import codec


class Msg:
    def __init__(self, value: bytes | None, error: object = None):
        self._value, self._error = value, error

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> object:
        return self._error


def test_errors_tombstones_and_bad_bytes_are_skipped():
    good = codec().encode("Publication", {"id": 7, "geometry": b"", "event_time": 2})
    msgs = [Msg(b"not avro"), Msg(None), Msg(good, error="a broker error"), Msg(good)]
    ((msg, name, record),) = decoded_messages(msgs)
    assert msg is msgs[-1] and name == "Publication" and record["id"] == 7
    assert [n for n, _ in decoded_records(msgs)] == ["Publication"]
