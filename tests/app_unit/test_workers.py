"""How many join workers the app runs as executors come and go (``app.batch.workers``)."""

from types import SimpleNamespace

from app.batch.workers import WorkerCount


def count(workers: int) -> WorkerCount:
    return WorkerCount(SimpleNamespace(master="spark://host:7077"), workers)


def test_workers_follow_the_cores_the_executors_carry_up_to_the_configured_number():
    follow = count(2)
    assert [follow.target(c) for c in (1, 2, 1, 2, 3)] == [2, 2, 1, 2, 2]
    four = count(4)
    assert [four.target(c) for c in (8, 6, 2, 8)] == [4, 3, 1, 4]


def test_no_executor_keeps_the_workers_and_local_mode_never_changes_them(monkeypatch):
    follow = count(2)
    monkeypatch.setattr("app.batch.workers.executor_cores", lambda sc: 0)
    assert follow.now(2) == 2
    local = WorkerCount(SimpleNamespace(master="local[2]"), 2)
    assert not local.enabled and local.now(2) == 2
