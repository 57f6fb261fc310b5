"""What Spark needs when its JVM starts, and what ends the app when that JVM cannot go on.

**Launch-time settings.** In local mode the driver JVM (which also runs the executors) is
already running when app/main.py applies the session's settings, so ``spark.driver.memory``
set there changes nothing. ``spark_submit_args`` turns the settings into spark-submit
arguments instead: ``--driver-memory``, ``--driver-java-options`` (always with
``-XX:+ExitOnOutOfMemoryError``), ``--jars`` with Spark's Kafka connector (unless
``[spark.conf]`` brings it), ``--conf spark.executor.memory=...``,
``--conf spark.driver.maxResultSize=...`` and every ``[spark.conf]`` property as ``--conf``, so
those that Spark reads only at launch (class paths, jars, ...) take effect too.

**A fatal error is never a hang.** An ``OutOfMemoryError`` in a JVM thread that Spark does not
watch (the RPC dispatcher that sends a task, for one) killed that thread and left the app waiting
forever for a stage that never ran. With ``-XX:+ExitOnOutOfMemoryError`` the JVM exits at the
first one instead; ``geops app`` reads the JVM's output as it passes it on (``FatalWatch``),
recognises the error and ends with one line naming the cause and the setting to change, and
exit code ``EXIT_FATAL``. The same lines serve a query that failed with an out-of-memory error
in a task (``fatal_failure``). ``Watchdog`` runs in the Python driver: it ends the driver when
its JVM is gone, or when the SparkContext stopped while the query still runs.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from app.faults import KILL_VAR
from app.read.source import connector_jars, has_connector
from config import Config
from config.exitcodes import EXIT_FATAL

log = logging.getLogger("geops.app")

# Always on the driver JVM: the first OutOfMemoryError ends it (exit status 3, after printing
# "Terminating due to java.lang.OutOfMemoryError: ..."), instead of killing one thread.
EXIT_ON_OOM = "-XX:+ExitOnOutOfMemoryError"
JVM_OOM_STATUS = 3  # HotSpot's exit status for -XX:+ExitOnOutOfMemoryError


def is_local(master: str) -> bool:
    return re.fullmatch(r"local(\[[^\]]*\])?", master) is not None


def spark_submit_args(cfg: Config) -> list[str]:
    """spark-submit arguments for the settings Spark must have when its JVM starts."""
    java = " ".join(filter(None, [EXIT_ON_OOM, cfg.view.spark.driver_java_options]))
    args = ["--driver-memory", cfg.view.spark.driver_memory, "--driver-java-options", java,
            "--conf", f"spark.driver.maxResultSize={cfg.view.spark.driver_max_result_size}"]
    if cfg.view.spark.executor_memory:  # else Spark's default, which any cluster's workers offer
        args += ["--conf", f"spark.executor.memory={cfg.view.spark.executor_memory}"]
    given = ""
    for key, value in cfg.view.spark.conf.items():
        args += ["--conf", f"{key}={value}"]
        if key in ("spark.jars", "spark.jars.packages"):
            given += f",{value}"
    if not has_connector(given):  # Spark's Kafka connector, from the geops JVM cache
        args += ["--jars", ",".join(connector_jars())]
    return args


@dataclass(frozen=True)
class Fatal:
    """A fatal error recognised in the JVM's output or a failed query's text."""

    cause: str     # e.g. "java.lang.OutOfMemoryError: Java heap space"
    kind: str      # heap | metaspace | threads | result-size | minimum-heap | crash | killed

    def message(self, cfg: Config, where: str = "the Spark driver JVM") -> str:
        """One line: what happened and which setting to change."""
        driver = (f"spark.driver_memory (--driver-memory, now {cfg.view.spark.driver_memory})")
        executor = (f"spark.executor_memory (--executor-memory, now "
                    f"{cfg.view.spark.executor_memory or 'Spark default, 1g'})")
        memory = driver if where.startswith("the Spark driver") else executor
        if self.kind == "heap":
            return (f"{where} ran out of memory ({self.cause}); raise {memory}, or load fewer "
                    f"subscriptions")
        if self.kind == "metaspace":
            return (f"{where} ran out of class space ({self.cause}); add "
                    f"-XX:MaxMetaspaceSize=... to spark.driver_java_options "
                    f"(--driver-java-options)")
        if self.kind == "threads":
            return (f"{where} could not start a thread ({self.cause}); raise the process "
                    f"limit (ulimit -u) or lower --workers")
        if self.kind == "result-size":
            return (f"a micro-batch's results outgrew spark.driver.maxResultSize ({self.cause});"
                    f" raise spark.driver_max_result_size (--driver-max-result-size, now "
                    f"{cfg.view.spark.driver_max_result_size}) or lower "
                    f"--max-records-per-trigger")
        if self.kind == "minimum-heap":
            return f"{where} has less memory than Spark needs ({self.cause}); raise {driver}"
        if self.kind == "killed" and os.environ.get(KILL_VAR):
            return f"{where} was killed ({self.cause}) by the injected fault {KILL_VAR}"
        if self.kind == "killed":
            return (f"{where} was killed ({self.cause}), most likely by the kernel when the "
                    f"machine ran out of memory; lower {driver} or load fewer subscriptions")
        return (f"{where} crashed ({self.cause}); see the hs_err file it names above, and "
                f"check {driver}")


_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(java\.lang\.OutOfMemoryError: Metaspace)"), "metaspace"),
    (re.compile(r"(java\.lang\.OutOfMemoryError: unable to create (?:new )?native thread)"),
     "threads"),
    (re.compile(r"(java\.lang\.OutOfMemoryError(?:: [^\r\n]*)?)"), "heap"),
    (re.compile(r"(Total size of serialized results of \d+ tasks \([^)]*\) is bigger than "
                r"spark\.driver\.maxResultSize \([^)]*\))"), "result-size"),
    (re.compile(r"(System memory \d+ must be at least \d+)"), "minimum-heap"),
    (re.compile(r"(A fatal error has been detected by the Java Runtime Environment)"), "crash"),
)


def find_fatal(text: str) -> Fatal | None:
    """The first fatal error named in ``text`` (JVM output, a failed query's message)."""
    for pattern, kind in _PATTERNS:
        found = pattern.search(text)
        if found:
            return Fatal(found.group(1).strip(), kind)
    return None


def fatal_failure(text: str, cfg: Config) -> str | None:
    """The one line for a query that failed on a fatal error (an executor out of memory, results
    over spark.driver.maxResultSize), or None. In local mode the executors are the driver JVM."""
    fatal = find_fatal(text)
    if fatal is None:
        return None
    where = "the Spark driver JVM" if is_local(cfg.view.spark.master) else "a Spark executor"
    return fatal.message(cfg, where)


class WorkerCancelTraces:
    """Leaves out of a stream of lines the tracebacks pyspark's worker daemon prints when Spark
    cancels a task while its Python worker is finishing: the JVM closes the worker's socket, so
    the worker or the daemon ends on ``EOFError`` (reading) or ``BrokenPipeError`` (writing its
    last output: over a Unix domain socket a write to a closed peer fails at once), possibly
    chained to the exception the worker was reporting, possibly after the daemon's "failed to
    flush the output to the worker process". Spark cancels the running tasks of a query that
    failed or was stopped, and says why itself; a Kafka outage would otherwise end in a Python
    traceback per worker. A block is left out only when a frame is in pyspark's ``daemon.py``
    and its last exception is one of a closed socket; every other line passes unchanged."""

    MOST = 400  # lines held back at most; a longer block passes as it is
    FLUSH = b"PySpark daemon failed to flush the output to the worker process:"
    START = b"Traceback (most recent call last):"
    CHAIN = (b"During handling of the above exception, another exception occurred:",
             b"The above exception was the direct cause of the following exception:")
    CLOSED = (b"EOFError", b"BrokenPipeError", b"ConnectionResetError")

    def __init__(self) -> None:
        self._held: list[bytes] = []
        self._last: bytes | None = None  # the exception line the held block may end with

    def feed(self, line: bytes) -> list[bytes]:
        """The lines to pass on now, given the next one."""
        if not self._held:
            if line.startswith((self.FLUSH, self.START)):
                self._held = [line]
                return []
            return [line]
        if len(self._held) >= self.MOST:
            held, self._held, self._last = self._held, [], None
            return [*held, *self.feed(line)]
        text = line.strip()
        if self._last is None:  # inside a traceback: frames, chain markers, blank lines
            self._held.append(line)
            if line[:1] not in (b" ", b"\t") and text and not text.startswith(self.START) \
                    and text not in self.CHAIN:
                self._last = text
            return []
        if not text or text in self.CHAIN:  # after an exception line: a chain may go on
            self._held.append(line)
            if text:
                self._last = None
            return []
        return [*self.flush(), *self.feed(line)]

    def flush(self) -> list[bytes]:
        """The block held back (at the end of the stream, or once the next line shows where it
        ended): nothing when it is a cancelled worker's, or when the stream ended before the
        block had a single frame (a process killed as it began to print: nothing to read)."""
        held, last = self._held, self._last
        self._held, self._last = [], None
        closed = last is not None and last.startswith(self.CLOSED) \
            and any(b"pyspark/daemon.py" in h for h in held)
        empty = all(h.startswith((self.FLUSH, self.START)) or not h.strip() for h in held)
        return [] if closed or empty else held


class FatalWatch:
    """Passes a process's output on unchanged while remembering the first fatal error in it."""

    def __init__(self) -> None:
        self.first: Fatal | None = None
        self._threads: list[threading.Thread] = []

    def feed(self, line: str) -> None:
        if self.first is None:
            self.first = find_fatal(line)

    def follow(self, source: IO[bytes], sink: IO[bytes]) -> None:
        """Copy ``source`` to ``sink`` line by line in a thread, watching each line and
        leaving out the tracebacks of Python workers whose task was cancelled
        (``WorkerCancelTraces``)."""
        def copy() -> None:
            quiet = WorkerCancelTraces()
            def write(lines: list[bytes]) -> None:
                for out in lines:
                    try:
                        sink.write(out)
                        sink.flush()
                    except (OSError, ValueError):  # our own output is gone: keep watching
                        pass

            for raw in iter(source.readline, b""):
                write(quiet.feed(raw))
                self.feed(raw.decode("utf-8", "replace"))
            write(quiet.flush())
            source.close()

        thread = threading.Thread(target=copy, name="geops-output", daemon=True)
        thread.start()
        self._threads.append(thread)

    def join(self, timeout: float = 5.0) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def verdict(self, status: int, cfg: Config) -> tuple[int, str | None]:
        """The exit code of ``geops app`` for spark-submit's ``status``, and the one line to
        print when it ended on a fatal error (None otherwise)."""
        if status in (0, EXIT_FATAL):  # stopped as asked, or the driver said why itself
            return status, None
        if self.first is not None:
            return EXIT_FATAL, self.first.message(cfg)
        if status == JVM_OOM_STATUS:  # ExitOnOutOfMemoryError, its line not seen
            return EXIT_FATAL, Fatal("java.lang.OutOfMemoryError", "heap").message(cfg)
        if status < 0:
            name = signal.Signals(-status).name
            return EXIT_FATAL, Fatal(f"signal {name}", "killed" if name == "SIGKILL"
                                     else "crash").message(cfg)
        if status == 128 + signal.SIGKILL:  # the Python driver was killed; the JVM passes it on
            return EXIT_FATAL, Fatal("SIGKILL", "killed").message(cfg, "the app's Python driver")
        return status, None


class Watchdog:
    """In the Python driver: end the process when the JVM under it is gone, or when the
    SparkContext stopped while the query still runs (nothing would ever end it otherwise).

    ``is_stopped`` asks the JVM whether the SparkContext stopped; it raises when the JVM does
    not answer. Call ``disarm`` before stopping Spark on purpose.
    """

    def __init__(self, is_stopped: Callable[[], bool], interval: float = 1.0,
                 grace: float = 30.0, exit: Callable[[int], Any] = os._exit) -> None:
        self._is_stopped = is_stopped
        self._interval = interval
        self._grace = grace
        self._exit = exit
        self._parent = os.getppid()
        self._armed = threading.Event()
        self._armed.set()
        self._thread = threading.Thread(target=self._run, name="geops-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def disarm(self) -> None:
        self._armed.clear()

    def _fatal(self, message: str) -> None:
        if not self._armed.is_set():
            return
        try:
            log.error("%s", message)
            print(f"geops app: {message}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass
        self._exit(EXIT_FATAL)

    def check(self, now: float, state: dict[str, float]) -> bool:
        """One look; True when the process must end (and ``_exit`` was called)."""
        if not self._armed.is_set():
            return False
        if os.getppid() != self._parent:
            self._fatal(f"the Spark JVM (pid {self._parent}) exited under the driver; "
                        f"stopping (see its last lines above for the cause)")
            return True
        try:
            stopped = self._is_stopped()
        except Exception as exc:  # py4j: the JVM does not answer
            since = state.setdefault("unreachable", now)
            if now - since >= self._grace:
                self._fatal(f"the Spark JVM has not answered for {now - since:.0f} s "
                            f"({type(exc).__name__}); stopping")
                return True
            return False
        state.pop("unreachable", None)
        if stopped:
            since = state.setdefault("stopped", now)
            if now - since >= self._grace:
                self._fatal(f"the SparkContext stopped {now - since:.0f} s ago while the query "
                            f"still runs (see the error above; an OutOfMemoryError calls for a "
                            f"larger spark.driver_memory, --driver-memory); stopping")
                return True
        else:
            state.pop("stopped", None)
        return False

    def _run(self) -> None:
        state: dict[str, float] = {}
        while self._armed.is_set():
            if self.check(time.monotonic(), state):
                return
            time.sleep(self._interval)


def launched_by_geops(jvm: Any) -> bool:
    """Whether the driver JVM was started with the flags ``geops app`` gives it."""
    args = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    return EXIT_ON_OOM in [str(a) for a in args]
