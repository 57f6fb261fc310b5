"""Judging control records for one app, and picking the newest command (no broker needed)."""

from types import SimpleNamespace

import pytest

import kafkaio.control
from kafkaio.control import newest_command
from schemas import codec
from schemas.assignment import (
    FOREIGN,
    MALFORMED,
    NOT_NEWER,
    TOMBSTONE,
    UNFIT,
    CommandRejected,
    command_for,
)


def command(epoch: int, app_id: str = "app", assignment=(0, 1, 1, 0)) -> bytes:
    return codec().encode("RebalanceCommand", {
        "app_id": app_id, "epoch": epoch, "assignment": list(assignment), "moves": [],
        "metric": "LB", "mldc_before": 1.0, "mldc_predicted": 0.0, "reason": "test", "time": 0})


@pytest.mark.parametrize(("value", "kwargs", "kind"), [
    (None, {}, TOMBSTONE),
    (b"\x00not avro", {}, MALFORMED),
    (command(3, app_id="other"), {}, FOREIGN),
    (command(3), {"newer_than": 3}, NOT_NEWER),
    (command(3, assignment=(0, 5, 1, 0)), {"partitions": 4, "workers": 2}, UNFIT),
    (command(3), {"partitions": 5, "workers": 2}, UNFIT),
])
def test_records_that_are_no_command_for_the_app_say_why(value, kwargs, kind) -> None:
    with pytest.raises(CommandRejected) as info:
        command_for(value, "app", **kwargs)
    assert info.value.kind == kind


def test_a_command_for_every_app_or_ours_is_accepted() -> None:
    assert command_for(command(2, app_id=""), "app", newer_than=1)["epoch"] == 2
    rec = command_for(command(2), "app", partitions=4, workers=2)
    assert rec["assignment"] == [0, 1, 1, 0]


def test_newest_command_takes_the_highest_epoch_and_reports_the_rest(monkeypatch) -> None:
    values = [command(2), None, command(5), b"junk", command(4), command(5, assignment=(1,) * 4),
              command(9, app_id="other")]
    msgs = [SimpleNamespace(value=lambda v=v: v, topic=lambda: "control", partition=lambda: 0,
                            offset=lambda i=i: i) for i, v in enumerate(values)]
    monkeypatch.setattr(kafkaio.control, "read_to_end", lambda *a, **k: iter(msgs))
    skipped = []
    newest = newest_command({}, "control", "app",
                            skipped=lambda why, where: skipped.append((why.kind, where)))
    assert newest["epoch"] == 5 and newest["assignment"] == [0, 1, 1, 0]  # the first of equals
    assert skipped == [(TOMBSTONE, "control[0]@1"), (MALFORMED, "control[0]@3"),
                       (NOT_NEWER, "control[0]@4"), (NOT_NEWER, "control[0]@5"),
                       (FOREIGN, "control[0]@6")]
    assert newest_command({}, "control", "app", newer_than=5) is None
