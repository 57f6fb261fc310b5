"""Launch-time settings reach spark-submit; a fatal error in the JVM's output ends `geops app`
with one line and exit code 6 (no Spark here: spark-submit is a fake)."""

from __future__ import annotations

import io

import pytest

import cli.app
import config
from app.launch.jvm import EXIT_ON_OOM, FatalWatch, Watchdog, find_fatal, spark_submit_args
from cli.main import main
from config import ConfigError
from config.exitcodes import EXIT_FAILED, EXIT_FATAL, EXIT_OK


def test_launch_settings_become_spark_submit_arguments():
    cfg = config.load(environ={}, flags={"spark.driver_memory": "6G",
                                         "spark.driver_java_options": "-Dx=1"})
    args = spark_submit_args(cfg)
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert pairs["--driver-memory"] == "6g"
    assert pairs["--driver-java-options"] == f"{EXIT_ON_OOM} -Dx=1"
    confs = [v for k, v in zip(args[::2], args[1::2], strict=True) if k == "--conf"]
    assert "spark.driver.maxResultSize=1g" in confs
    assert not any(c.startswith("spark.executor.memory=") for c in confs)  # Spark's default
    assert "spark.sql.shuffle.partitions=8" in confs  # [spark.conf] goes along, at launch
    cfg = config.load(environ={"GEOPS_SPARK_EXECUTOR_MEMORY": "3g"})
    assert "spark.executor.memory=3g" in spark_submit_args(cfg)


def test_memory_in_spark_conf_is_refused_with_the_setting_to_use(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[spark.conf]\n"spark.driver.memory" = "8g"\n')
    with pytest.raises(ConfigError, match=r"set spark.driver_memory instead \(--driver-memory"):
        config.load(path, environ={})
    with pytest.raises(ConfigError, match="expected a memory size"):
        config.load(environ={"GEOPS_SPARK_DRIVER_MEMORY": "lots"})


@pytest.mark.parametrize(("line", "kind"), [
    ("Terminating due to java.lang.OutOfMemoryError: Java heap space", "heap"),
    ('Exception in thread "dispatcher-event-loop-1" java.lang.OutOfMemoryError: Java heap space',
     "heap"),
    ("java.lang.OutOfMemoryError: Metaspace", "metaspace"),
    ("java.lang.OutOfMemoryError: unable to create native thread: possibly out of memory",
     "threads"),
    ("Job aborted: Total size of serialized results of 3 tasks (1100.0 MiB) is bigger than "
     "spark.driver.maxResultSize (1024.0 MiB)", "result-size"),
    ("IllegalArgumentException: System memory 209715200 must be at least 471859200.",
     "minimum-heap"),
    ("# A fatal error has been detected by the Java Runtime Environment:", "crash"),
])
def test_fatal_errors_are_recognised(line, kind):
    assert find_fatal(line).kind == kind


def test_ordinary_lines_are_not_fatal():
    assert find_fatal("INFO batch 3 epoch 0: 10 records, no memory pressure") is None


def test_verdict_passes_ordinary_codes_and_explains_fatal_ones():
    cfg = config.load(environ={})
    watch = FatalWatch()
    assert watch.verdict(EXIT_OK, cfg) == (EXIT_OK, None)
    assert watch.verdict(EXIT_FAILED, cfg) == (EXIT_FAILED, None)
    code, line = watch.verdict(3, cfg)  # -XX:+ExitOnOutOfMemoryError, its line unseen
    assert code == EXIT_FATAL and "spark.driver_memory (--driver-memory, now 4g)" in line
    code, line = watch.verdict(-9, cfg)
    assert code == EXIT_FATAL and "killed (signal SIGKILL)" in line
    watch.feed("Terminating due to java.lang.OutOfMemoryError: Java heap space\n")
    code, line = watch.verdict(3, cfg)
    assert code == EXIT_FATAL
    assert line == ("the Spark driver JVM ran out of memory (java.lang.OutOfMemoryError: Java "
                    "heap space); raise spark.driver_memory (--driver-memory, now 4g), or load "
                    "fewer subscriptions")
    assert watch.verdict(EXIT_OK, cfg) == (EXIT_OK, None)  # an OOM survived, then a clean stop


DAEMON_EOF = [b"Traceback (most recent call last):\n",
              b'  File "/x/pyspark/daemon.py", line 262, in manager\n',
              b'  File "/x/pyspark/serializers.py", line 575, in read_int\n',
              b"    raise EOFError\n", b"EOFError\n"]


def test_the_traceback_of_a_cancelled_python_worker_is_left_out():
    other = [b"Traceback (most recent call last):\n", b'  File "app/batch/runner.py", line 3\n',
             b"ValueError: bad\n"]
    lines = [b"a\n", *DAEMON_EOF, b"b\n", *other, *DAEMON_EOF[:3]]
    source, sink = io.BytesIO(b"".join(lines)), io.BytesIO()
    watch = FatalWatch()
    watch.follow(source, sink)
    watch.join()
    # the cancelled worker's traceback goes; another, and one cut off at the end, stay
    assert sink.getvalue() == b"".join([b"a\n", b"b\n", *other, *DAEMON_EOF[:3]])


def test_a_traceback_cut_off_before_its_first_frame_is_left_out():
    """A process killed as it began to print (the app's end took its Python workers with it)
    leaves a lone first line: nothing to read, so nothing is passed on."""
    source, sink = io.BytesIO(b"a\nstopped after 1 batches\n" + DAEMON_EOF[0]), io.BytesIO()
    watch = FatalWatch()
    watch.follow(source, sink)
    watch.join()
    assert sink.getvalue() == b"a\nstopped after 1 batches\n"


FLUSH_BROKEN = [b"PySpark daemon failed to flush the output to the worker process:\n",
                b"Traceback (most recent call last):\n",
                b'  File "/x/pyspark/daemon.py", line 95, in worker\n',
                b"    outfile.flush()\n", b"BrokenPipeError: [Errno 32] Broken pipe\n", b"\n"]
CHAINED = [b"Traceback (most recent call last):\n", b'  File "/x/pyspark/worker.py", line 9\n',
           b"OSError: the task was cancelled\n", b"\n",
           b"During handling of the above exception, another exception occurred:\n", b"\n",
           b"Traceback (most recent call last):\n",
           b'  File "/x/pyspark/daemon.py", line 262, in manager\n',
           b"BrokenPipeError: [Errno 32] Broken pipe\n"]


def test_a_cancelled_workers_broken_pipe_is_left_out_chained_or_after_a_flush_failure():
    # the same blocks ending in another error, or without a daemon frame, stay
    other = [*FLUSH_BROKEN[:4], b"ValueError: bad\n", b"\n"]
    no_daemon = [CHAINED[0], CHAINED[1], CHAINED[-1]]
    lines = [b"a\n", *FLUSH_BROKEN, b"b\n", *CHAINED, *other, *no_daemon, b"c\n", *CHAINED]
    source, sink = io.BytesIO(b"".join(lines)), io.BytesIO()
    watch = FatalWatch()
    watch.follow(source, sink)
    watch.join()
    # the last block ends the stream complete: it goes too
    assert sink.getvalue() == b"".join([b"a\n", b"b\n", *other, *no_daemon, b"c\n"])


class _DyingJvm:
    """A fake spark-submit whose JVM prints an OutOfMemoryError and exits as HotSpot does."""

    def __init__(self, cmd, env, **_):
        self.cmd, self.env, self.pid = cmd, env, 0
        self.stdout = io.BytesIO(b"starting\nTerminating due to java.lang.OutOfMemoryError: "
                                 b"Java heap space\n")
        self.stderr = io.BytesIO(b"")

    def wait(self, timeout: float | None = None) -> int:
        return 3


def test_geops_app_ends_a_dying_jvm_in_one_line(tmp_path, monkeypatch, capsys):
    seen: list[_DyingJvm] = []
    monkeypatch.setattr(cli.app.subprocess, "Popen",
                        lambda cmd, env, **kw: seen.append(_DyingJvm(cmd, env)) or seen[-1])
    code = main(["app", "--master", "local[2]", "--state-dir", str(tmp_path),
                 "--bootstrap-servers", "kafka:9092", "--driver-memory", "300m"])
    assert code == EXIT_FATAL
    (run,) = seen
    assert run.cmd[run.cmd.index("--driver-memory") + 1] == "300m"
    assert EXIT_ON_OOM in run.cmd[run.cmd.index("--driver-java-options") + 1]
    assert run.cmd.index("--driver-memory") < run.cmd.index(str(cli.app.APP_MAIN))
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("geops app: the Spark driver JVM ran out of memory")
    assert "now 300m" in err[-1]


def test_the_watchdog_ends_a_driver_whose_spark_context_stopped():
    exits: list[int] = []
    stopped = [False]
    dog = Watchdog(lambda: stopped[0], grace=30.0, exit=exits.append)
    state: dict[str, float] = {}
    assert not dog.check(0.0, state)
    stopped[0] = True
    assert not dog.check(10.0, state) and not dog.check(39.0, state)
    assert dog.check(40.5, state) and exits == [EXIT_FATAL]
    dog.disarm()  # stopping on purpose: never fires
    assert not dog.check(100.0, state)


def test_the_watchdog_ends_a_driver_whose_jvm_does_not_answer():
    exits: list[int] = []

    def gone() -> bool:
        raise ConnectionError("py4j: the JVM does not answer")

    dog = Watchdog(gone, grace=5.0, exit=exits.append)
    state: dict[str, float] = {}
    assert not dog.check(0.0, state) and not dog.check(4.0, state)
    assert dog.check(5.0, state) and exits == [EXIT_FATAL]
