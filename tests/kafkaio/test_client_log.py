"""librdkafka's lines reach logging once per window, however often a client repeats them."""

from __future__ import annotations

import logging

from kafkaio.clients import RepeatFilter


def _record(text: str) -> logging.LogRecord:
    return logging.LogRecord("geops.kafka.librdkafka", logging.ERROR, __file__, 1,
                             "%s [%s] %s", ("FAIL", "rdkafka#consumer-2", text), None)


def test_a_repeated_line_is_shown_once_per_window_then_with_its_count():
    now = [0.0]
    repeats = RepeatFilter(window=30.0, clock=lambda: now[0])
    refused = "Connect to ipv4#127.0.0.1:9 failed: Connection refused"
    shown = [r for r in (_record(refused) for _ in range(500)) if repeats.filter(r)]
    assert len(shown) == 1
    assert repeats.filter(_record("Disconnected"))  # another line is shown at once
    now[0] = 31.0
    again = _record(refused)
    assert repeats.filter(again)
    assert again.getMessage().endswith("(499 more times in the 31 s before)")
    assert not repeats.filter(_record(refused))
    # the time an attempt took is no difference
    assert repeats.filter(_record("Connect failed (after 0ms in state CONNECT)"))
    assert not repeats.filter(_record("Connect failed (after 12ms in state CONNECT, 1 identical "
                                      "error(s) suppressed)"))
