"""Every `geops` command answers bad input with one line naming what is wrong.

Each case runs the CLI in-process (``cli.main.main``) with one bad value and checks the answer:
a non-zero exit code, no traceback, and exactly one line on stderr that starts with the command
and names the flag or value. None of them may reach Kafka (that would mean the bad value was
not caught first), nor start Spark. A few run as real processes, and a few need the broker.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cli.app
import cli.common
import distributor.service
from cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[2]
COMMANDS = {"broker", "topics", "publish", "subscribe", "unsubscribe", "tail", "app",
            "distributor", "generate", "match", "stats", "bench", "dashboard"}
EMPTY = '{"type": "FeatureCollection", "features": []}'


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A scratch directory with a few files, and an environment that reaches no Kafka."""
    (tmp_path / "empty.geojson").write_text(EMPTY)
    (tmp_path / "bad.geojson").write_text("not json")
    (tmp_path / "bad.toml").write_text("[a\n")
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("GEOPS_BOOTSTRAP_SERVERS", "127.0.0.1:9")
    monkeypatch.setenv("GEOPS_STATE_DIR", str(tmp_path / "state"))
    for name in ("GEOPS_CONFIG", "GEOPS_BROKER_PORT"):
        monkeypatch.delenv(name, raising=False)

    def must_not_run(*_args, **_kwargs):
        raise AssertionError("a bad value got past validation: the command went on to Kafka "
                             "or Spark")

    monkeypatch.setattr(cli.common, "check_reachable", must_not_run)
    monkeypatch.setattr(distributor.service, "check_reachable", must_not_run)
    monkeypatch.setattr(cli.app, "spark_submit", must_not_run)
    return tmp_path


def run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:   # argparse's usage errors
        code = exc.code
    return code, capsys.readouterr().err


def assert_one_line_error(command: str, code, err: str, *names: str) -> None:
    assert "Traceback" not in err, err
    assert isinstance(code, int) and code != 0, (code, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    # `geops CMD: ...`, or argparse's `geops CMD [ACTION]: error: ...`
    assert lines[0].startswith(f"geops {command}".rstrip()), lines[0]
    assert ": " in lines[0], lines[0]
    for name in names:
        assert name in lines[0], (name, lines[0])


def gen(*extra: str) -> list[str]:
    """`geops generate` with a tiny workload and one bad value (DIR is replaced per test)."""
    return ["generate", "--out", "DIR/gen", "--subscriptions", "10", "--publications", "10",
            "--world-size", "1,2,3", *extra]


M = ["--subscriptions", "DIR/empty.geojson", "--publications", "DIR/empty.geojson"]

# (argv with DIR for the scratch directory, words the error line must contain)
CASES = [
    # broker
    (["broker", "start", "--port", "99999"], ["--port", "99999"]),
    (["broker", "start", "--port", "65536"], ["--port", "65536"]),
    (["broker", "start", "--port", "-1"], ["--port", "-1"]),
    (["broker", "start", "--port", "http"], ["--port", "http"]),
    (["broker", "start", "--state-dir", "DIR/afile/sub"], ["DIR/afile/sub", "--state-dir"]),
    (["broker", "status", "--state-dir", "DIR/afile/sub"], ["DIR/afile/sub"]),
    (["broker", "stop", "--state-dir", "DIR/afile/sub"], ["DIR/afile/sub"]),
    (["broker", "start", "--config", "DIR/missing.toml"], ["--config", "DIR/missing.toml"]),
    (["broker", "start", "--config", "DIR/bad.toml"], ["--config", "DIR/bad.toml"]),
    (["broker", "status", "--config", "DIR"], ["--config", "DIR"]),
    (["broker", "restart"], ["restart"]),
    ([], ["COMMAND"]),
    (["frobnicate"], ["frobnicate"]),
    # topics
    (["topics", "create", "--publications-partitions", "0"], ["--publications-partitions", "0"]),
    (["topics", "create", "--matches-partitions", "99999999999"], ["--matches-partitions"]),
    (["topics", "create", "--replication-factor", "three"], ["--replication-factor", "three"]),
    (["topics", "create", "--replication-factor", "40000"], ["--replication-factor", "40000"]),
    (["topics", "create", "-X", "no-equals-sign"], ["-X", "no-equals-sign"]),
    (["topics", "create", "--bootstrap-servers"], ["--bootstrap-servers"]),
    # publish / subscribe
    (["publish", "--file", "DIR/missing.geojson"], ["DIR/missing.geojson"]),
    (["publish", "--file", "DIR"], ["DIR", "Is a directory"]),
    (["publish", "--file", "DIR/bad.geojson"], ["DIR/bad.geojson"]),
    (["publish", "--file", "DIR/empty.geojson", "--rate", "-1"], ["--rate", "-1"]),
    (["publish", "--file", "DIR/empty.geojson", "--rate", "nan"], ["--rate", "nan"]),
    (["publish", "--file", "DIR/empty.geojson", "--rate", "inf"], ["--rate", "inf"]),
    (["publish", "--file", "DIR/empty.geojson", "--event-time", "later"],
     ["--event-time", "later"]),
    (["publish"], ["--file"]),
    (["subscribe", "--file", "DIR/missing.geojson"], ["DIR/missing.geojson"]),
    (["subscribe", "--file", "DIR/empty.geojson", "--rate", "fast"], ["--rate", "fast"]),
    (["subscribe", "--file", "DIR/empty.geojson", "--subscriptions-topic", ""],
     ["--subscriptions-topic"]),
    (["unsubscribe", "--id", "x"], ["--id", "x"]),
    (["unsubscribe", "--id", str(2**63)], ["--id", str(2**63)]),
    (["unsubscribe", "--file", "DIR/missing.geojson"], ["DIR/missing.geojson"]),
    (["unsubscribe", "--file", "DIR/bad.geojson"], ["DIR/bad.geojson"]),
    (["unsubscribe"], ["--id N"]),
    # tail
    (["tail", "--topic", "x", "--subscription", "one"], ["--subscription", "one"]),
    (["tail", "--topic", "x", "--max", "0"], ["--max", "0"]),
    (["tail", "--topic", "x", "--max", "-3"], ["--max", "-3"]),
    (["tail", "--topic", "x", "--max", "ten"], ["--max", "ten"]),
    (["tail", "--topic", "x", "--until-idle", "-1"], ["--until-idle", "-1"]),
    (["tail", "--topic", "x", "--until-idle", "soon"], ["--until-idle", "soon"]),
    (["tail", "--topic", "x", "--until-idle", "nan"], ["--until-idle", "nan"]),
    (["tail", "--topic", "x", "--until-idle", "0s"], ["--until-idle", "0s"]),
    (["tail", "--topic", "x", "--format", "xml"], ["--format", "xml"]),
    (["tail"], ["--topic"]),
    # app (checked before spark-submit starts)
    (["app", "--trigger", "soon"], ["--trigger", "soon"]),
    (["app", "--trigger", "2x"], ["--trigger", "2x"]),
    (["app", "--trigger", "99999999999h"], ["--trigger", "99999999999h"]),
    (["app", "--workers", "-1"], ["--workers", "-1"]),
    (["app", "--partitions", "0"], ["--partitions", "0"]),
    (["app", "--partitions", "99999999999"], ["--partitions", "99999999999"]),
    (["app", "--strategy", "fastest"], ["--strategy", "fastest"]),
    (["app", "--join", "STIL"], ["--join", "STIL"]),
    (["app", "--partitioner", "hexgrid"], ["--partitioner", "hexgrid"]),
    (["app", "--max-records-per-trigger", "-5"], ["--max-records-per-trigger", "-5"]),
    (["app", "--stop-after-idle", "whenever"], ["--stop-after-idle", "whenever"]),
    (["app", "--starting-offsets", "middle"], ["--starting-offsets", "middle"]),
    (["app", "--lease-time", "0.1s"], ["--lease-time", "0.1 s"]),
    (["app", "--standby", "--mode", "real-time"], ["--standby", "real-time"]),
    (["app", "--config", "DIR/missing.toml"], ["--config", "DIR/missing.toml"]),
    # distributor
    (["distributor", "--period", "0"], ["--period", "0"]),
    (["distributor", "--period=-5s"], ["--period", "-5s"]),
    (["distributor", "--period", "1e400"], ["--period", "1e400"]),
    (["distributor", "--period", "99999999999h"], ["--period", "99999999999h"]),
    (["distributor", "--resync-periods", "0"], ["--resync-periods", "0"]),
    (["distributor", "--min-items", "-1"], ["--min-items", "-1"]),
    (["distributor", "--wait-periods", "-2"], ["--wait-periods", "-2"]),
    (["distributor", "--threshold", "nan"], ["--threshold", "nan"]),
    (["distributor", "--metric", "XB"], ["--metric", "XB"]),
    (["distributor", "--stop-after-idle=-1s"], ["--stop-after-idle", "-1s"]),
    # generate
    (gen("--seed", "-1"), ["--seed", "-1"]),
    (gen("--seed", "x"), ["--seed", "x"]),
    (gen("--subscriptions", "-1"), ["--subscriptions", "-1"]),
    (gen("--publications", "-5"), ["--publications", "-5"]),
    (gen("--point-share", "2"), ["--point-share", "2"]),
    (gen("--point-share", "nan"), ["--point-share", "nan"]),
    (gen("--relation", "NEAR"), ["--relation", "NEAR"]),
    (gen("--start-time", "yesterday"), ["--start-time", "yesterday"]),
    (gen("--start-time", "99999999999999999999999"), ["--start-time", "99999999999999999999999"]),
    (gen("--interval-ms", "-1"), ["--interval-ms", "-1"]),
    (gen("--interval-ms", "99999999999999999999"), ["--interval-ms", "99999999999999999999"]),
    (gen("--world-size", "1,2"), ["--world-size", "1,2"]),
    (gen("--world-size", "1,2,99999999999"), ["--world-size", "1,2,99999999999"]),
    (gen("--skew", "2", "--workers", "2"), ["--skew", "2"]),
    (gen("--skew", "nan", "--workers", "2"), ["--skew", "nan"]),
    (gen("--skew", "0.5"), ["--skew", "--workers"]),
    (gen("--hot-workers", "0", "--workers", "2"), ["--hot-workers", "0"]),
    (gen("--workers", "-1"), ["--workers", "-1"]),
    (gen("--partitions", "0", "--workers", "2"), ["--partitions", "0"]),
    (gen("--partitions", "99999999999", "--workers", "2"), ["--partitions", "99999999999"]),
    (gen("--partitioner", "hexgrid"), ["--partitioner", "hexgrid"]),
    (gen("--config", "DIR/missing.toml", "--workers", "2"), ["--config", "DIR/missing.toml"]),
    (gen("--points-csv", "DIR/missing.csv"), ["DIR/missing.csv"]),
    (gen("--points-csv", "DIR"), ["DIR", "Is a directory"]),
    (gen("--areas", "DIR/missing.geojson"), ["DIR/missing.geojson"]),
    (gen("--sectors", "DIR/bad.geojson"), ["DIR/bad.geojson"]),
    (["generate", "--out", "DIR/afile/sub", "--subscriptions", "1"], ["--out", "DIR/afile/sub"]),
    (["generate"], ["--out"]),
    # match
    (["match", "--subscriptions", "DIR/missing.geojson", "--publications", "DIR/empty.geojson",
      "--out", "DIR/o.jsonl"], ["DIR/missing.geojson"]),
    (["match", "--subscriptions", "DIR/bad.geojson", "--publications", "DIR/empty.geojson",
      "--out", "DIR/o.jsonl"], ["DIR/bad.geojson"]),
    ([*["match", *M], "--out", "DIR/o.jsonl", "--partitions", "0"], ["--partitions", "0"]),
    ([*["match", *M], "--out", "DIR/o.jsonl", "--strategy", "sXS"], ["--strategy", "sXS"]),
    ([*["match", *M], "--out", "DIR/o.jsonl", "--partitioner", "hexgrid"],
     ["--partitioner", "hexgrid"]),
    ([*["match", *M], "--out", "DIR/afile/o.jsonl"], ["DIR/afile/o.jsonl"]),
    ([*["match", *M], "--out", "DIR/no/such/o.jsonl"], ["DIR/no/such/o.jsonl"]),
    ([*["match", *M], "--out", "DIR"], ["DIR", "Is a directory"]),
    # stats and bench (their own modules; argparse-level checks)
    (["stats", "--period", "soon"], ["--period", "soon"]),
    (["stats", "--periods", "0"], ["--periods", "0"]),
    (["bench", "kernel", "--subscriptions", "0"], ["--subscriptions", "0"]),
    (["bench", "kernel", "--point-share", "1.5"], ["--point-share", "1.5"]),
    (["bench", "kernel", "--relation", "NEAR"], ["--relation", "NEAR"]),
    (["bench", "live", "--point-share", "-0.5"], ["--point-share", "-0.5"]),
    (["bench", "decode", "--publications", "x"], ["--publications", "x"]),
    (["bench", "live", "--scenario", "moving", "--hot-workers", "2"], ["--hot-workers"]),
    (["bench", "live", "--scenario", "moving", "--soak", "1m"], ["--soak", "moving"]),
    (["bench", "live", "--shifts", "0"], ["--shifts", "0"]),
    (["bench", "nothing"], ["nothing"]),
]


def _id(case) -> str:
    return " ".join(case[0]).replace("DIR/", "").replace("DIR", ".") or "(no command)"


@pytest.mark.parametrize(("argv", "names"), CASES, ids=[_id(c) for c in CASES])
def test_bad_input_gives_one_line_and_a_non_zero_exit(argv, names, files, capsys):
    def fill(text: str) -> str:
        return text.replace("DIR", str(files))

    argv = [fill(a) for a in argv]
    code, err = run(argv, capsys)
    known = argv and argv[0] in COMMANDS
    assert_one_line_error(argv[0] if known else "", code, err, *(fill(n) for n in names))


# -- the walk: every flag of every command that takes a checked value gets a bad one ---------------

BAD = "§bad"   # no integer, number, duration, choice, topic name, or existing file
# Flags whose value is any string: nothing to reject at the command line.
FREE_FORM = {"--bootstrap-servers", "--state-dir", "--app-id", "--checkpoint", "--master",
             "--topic", "--strategies", "--pipelines", "--modes", "--skews", "--out", "--workdir",
             "--file", "--subscriptions", "--publications", "--points-csv", "--areas",
             "--districts", "--sectors", "--driver-java-options", "--object-id-field"}
# What each command needs besides the bad flag (DIR is the scratch directory).
BASE = {
    "tail": ["--topic", "x"],
    "publish": ["--file", "DIR/empty.geojson"],
    "subscribe": ["--file", "DIR/empty.geojson"],
    "generate": ["--out", "DIR/gen", "--subscriptions", "10", "--publications", "10",
                 "--world-size", "1,2,3"],
    "match": [*M, "--out", "DIR/o.jsonl"],
}


def _leaves(parser, path=()):
    """(command words, parser) of every runnable subcommand, e.g. (("broker", "start"), p)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, (*path, name))


def _walk():
    cases = []
    for words, parser in _leaves(build_parser()):
        base = BASE.get(words[0], [])
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.help == "==SUPPRESS==":
                continue
            flag = max(action.option_strings, key=len)
            if flag in FREE_FORM or flag == "--help":
                continue
            if flag in ("--config", "-X") and words[0] in ("stats", "bench"):
                continue   # not theirs to check before starting (their own modules)
            cases.append(pytest.param([*words, *base, flag, BAD], flag,
                                      id=f"{' '.join(words)} {flag}"))
    return cases


@pytest.mark.parametrize(("argv", "flag"), _walk())
def test_every_checked_flag_of_every_command_rejects_a_bad_value(argv, flag, files, capsys):
    argv = [a.replace("DIR", str(files)) for a in argv]
    code, err = run(argv, capsys)
    # stats and bench are other modules' to word; they must still name the value
    names = [BAD] if argv[0] in ("stats", "bench") else [flag, BAD]
    assert_one_line_error(argv[0], code, err, *names)


def test_the_walk_covers_every_command():
    walked = {tuple(p.values[0][:1]) for p in _walk()}
    commands = {words[:1] for words, _ in _leaves(build_parser())}
    assert commands <= walked | {("broker",)}, commands - walked
    assert {words[0] for words, _ in _leaves(build_parser())} == COMMANDS


def test_an_unknown_kafka_property_is_named(files, capsys, monkeypatch):
    monkeypatch.undo()   # the real check: the property fails before any connection
    monkeypatch.setenv("GEOPS_BOOTSTRAP_SERVERS", "127.0.0.1:9")
    monkeypatch.setenv("GEOPS_STATE_DIR", str(files / "state"))
    code, err = run(["topics", "create", "-X", "no.such.property=1"], capsys)
    assert_one_line_error("topics", code, err, "no.such.property")


def test_a_kafka_property_the_connector_cannot_take_is_named(files, capsys):
    code, err = run(["app", "-X", "bootstrap.servers=127.0.0.1:9", "-X",
                     "ssl.engine.location=/x.so"], capsys)
    assert_one_line_error("app", code, err, "ssl.engine.location", "java.")
    assert code == 2


@pytest.mark.parametrize(("argv", "names"), [
    (["broker", "start", "--port", "99999"], ["--port", "99999"]),
    (["tail", "--topic", "x", "--max", "0"], ["--max", "0"]),
    (["generate", "--out", "DIR/g", "--seed", "-1"], ["--seed", "-1"]),
], ids=["broker-port", "tail-max", "generate-seed"])
def test_as_a_process_the_exit_code_and_stderr_are_the_same(argv, names, tmp_path):
    env = {**os.environ, "GEOPS_BOOTSTRAP_SERVERS": "127.0.0.1:9",
           "GEOPS_STATE_DIR": str(tmp_path / "state")}
    env.pop("GEOPS_CONFIG", None)
    argv = [a.replace("DIR", str(tmp_path)) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "cli", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert_one_line_error(argv[0], proc.returncode, proc.stderr, *names)
    assert proc.stdout == ""


@pytest.mark.integration
def test_a_port_in_use_is_named(broker, tmp_path, capsys):
    port = broker.rsplit(":", 1)[1]
    code, err = run(["broker", "start", "--port", port, "--state-dir", str(tmp_path / "s")],
                    capsys)
    assert_one_line_error("broker", code, err, f"port {port} is already in use", "--port")


@pytest.mark.integration
def test_a_missing_topic_is_named(kafka_cfg, capsys):
    code, err = run(["tail", "--topic", "no-such-topic", "--until-idle", "1"], capsys)
    assert_one_line_error("tail", code, err, "no-such-topic")
