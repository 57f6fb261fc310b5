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
    command_for,
    owners_for_workers,
)
from schemas.errors import CommandRejected


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


def test_owners_for_fewer_workers_keep_the_rest_and_fill_the_lightest() -> None:
    owners = [(0,), (1,), (2,), (2,), (0, 2), (1,)]
    weights = [10, 10, 4, 6, 8, 10]
    fitted = owners_for_workers(owners, 2, weights)
    assert all(o and max(o) < 2 for o in fitted)
    assert fitted[0] == (0,) and fitted[1] == (1,) and fitted[4] == (0,)
    load = [sum(weights[p] / len(o) for p, o in enumerate(fitted) if w in o) for w in (0, 1)]
    assert abs(load[0] - load[1]) <= max(weights)


def test_owners_for_more_workers_move_some_partitions_to_the_empty_one() -> None:
    owners = [(0,)] * 4 + [(1,)] * 4
    fitted = owners_for_workers(owners, 3, [1] * 8)
    assert sorted(sum(1 for o in fitted if o == (w,)) for w in range(3)) == [2, 3, 3]
    assert all(fitted[p] == owners[p] or fitted[p] == (2,) for p in range(8))
    assert owners_for_workers(owners, 2, [1] * 8) == owners   # nothing to change


def test_owners_for_one_worker_put_everything_on_it() -> None:
    assert owners_for_workers([(0,), (1, 0), (1,)], 1, [3, 2, 1]) == [(0,), (0,), (0,)]
    with pytest.raises(ValueError, match="at least one worker"):
        owners_for_workers([(0,)], 0, [1])
