"""One way to fail (docs/architecture.md, "Errors"): every error geops raises on purpose derives
from ``config.errors.GeopsError``, lives in its package's ``errors.py``, carries its exit code
as ``exit_code`` (a code of ``config.exitcodes``), and is reported by ``one_line``.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
from pathlib import Path

import pytest

from config import exitcodes
from config.errors import GeopsError, one_line
from tests.test_layers import RANK, ROOT, modules

CODES = {value for name, value in vars(exitcodes).items() if name.startswith("EXIT_")}
# every ``errors.py`` of a package, also one in a subpackage (``bench.harness.errors``)
ERROR_MODULES = sorted(".".join(path.relative_to(ROOT).with_suffix("").parts)
                       for pkg in RANK for path in modules(pkg) if path.name == "errors.py")


def errors_of(module_name: str) -> list[type[BaseException]]:
    module = importlib.import_module(module_name)
    return [cls for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, BaseException) and cls.__module__ == module_name]


EVERY_ERROR = [cls for name in ERROR_MODULES for cls in errors_of(name)]


def _is_exception_base(base: ast.expr, known: set[str]) -> bool:
    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    builtin = getattr(builtins, name, None)
    return (name in known or name.endswith(("Error", "Exception"))
            or (isinstance(builtin, type) and issubclass(builtin, BaseException)))


def test_the_packages_with_errors_have_an_errors_module() -> None:
    assert set(ERROR_MODULES) >= {"config.errors", "schemas.errors", "geops.errors",
                                  "kafkaio.errors", "app.errors", "distributor.errors",
                                  "bench.harness.errors", "cli.errors"}


@pytest.mark.parametrize("cls", EVERY_ERROR, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_error_derives_from_the_base_with_a_documented_exit_code(cls: type) -> None:
    assert issubclass(cls, GeopsError), f"{cls.__name__} does not derive from GeopsError"
    assert cls.exit_code in CODES, f"{cls.__name__}.exit_code {cls.exit_code!r} is no EXIT_*"
    assert not hasattr(cls, "code"), "the exit code is `exit_code`, no other name"


def test_each_error_is_defined_once() -> None:
    names = [cls.__name__ for cls in EVERY_ERROR]
    assert sorted(names) == sorted(set(names)), "an error class name defined twice"


@pytest.mark.parametrize("pkg", sorted(RANK))
def test_no_error_is_defined_outside_an_errors_module(pkg: str) -> None:
    known = {cls.__name__ for cls in EVERY_ERROR}
    wrong = []
    for path in modules(pkg):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(_is_exception_base(b, known)
                                                      for b in node.bases):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} class {node.name}")
    assert not wrong, "define errors in the package's errors.py:\n" + "\n".join(wrong)


@pytest.mark.parametrize("pkg", sorted(RANK))
def test_the_exit_code_is_read_from_the_attribute(pkg: str) -> None:
    wrong = [f"{path.relative_to(ROOT)}" for path in modules(pkg)
             if 'getattr(exc, "exit_code"' in path.read_text()]
    assert not wrong, "read exc.exit_code (every GeopsError has one):\n" + "\n".join(wrong)


def test_exit_codes_come_from_the_class_or_the_raiser() -> None:
    from cli.errors import CommandError
    from config.errors import ConfigError
    from kafkaio.errors import DataLoss, KafkaOutage, KafkaUnavailable, TopicMissing

    assert GeopsError("x").exit_code == exitcodes.EXIT_FAILED
    assert ConfigError("x").exit_code == exitcodes.EXIT_USAGE
    assert KafkaUnavailable("x").exit_code == TopicMissing("x").exit_code == exitcodes.EXIT_FAILED
    assert KafkaOutage("x").exit_code == exitcodes.EXIT_OUTAGE
    assert DataLoss("x").exit_code == exitcodes.EXIT_DATA_LOSS
    assert CommandError("x").exit_code == exitcodes.EXIT_FAILED
    assert CommandError("x", exitcodes.EXIT_REJECTED).exit_code == exitcodes.EXIT_REJECTED


def test_one_line_is_the_message_with_where_it_came_from() -> None:
    from kafkaio.errors import KafkaOutage

    assert one_line(KafkaOutage("Kafka at h:9092 did not answer")) == (
        "Kafka at h:9092 did not answer")
    assert one_line(KafkaOutage("no answer"), "geops tail") == "geops tail: no answer"
    assert one_line(GeopsError(), "geops app") == "geops app: GeopsError"


def test_the_command_reports_any_geops_error_in_one_line(monkeypatch, capsys,
                                                         tmp_path: Path) -> None:
    import kafkaio.broker
    from cli.main import main
    from kafkaio.errors import DataLoss

    def status(_state_dir: Path) -> None:
        raise DataLoss("p[0] no longer holds offset 10")

    monkeypatch.setattr(kafkaio.broker, "status", status)
    code = main(["broker", "status", "--state-dir", str(tmp_path)])
    assert code == exitcodes.EXIT_DATA_LOSS
    assert capsys.readouterr().err == "geops broker: p[0] no longer holds offset 10\n"
