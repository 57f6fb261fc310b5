"""No function of the product's packages is longer than LIMIT lines without a written reason.

A long function is allowed when the comment block right above its ``def`` (or its first
decorator) begins with ``# long:`` and a reason, e.g. a table, or a linear protocol that reads
best in one piece. The benchmarks (``bench``) and the tests are not the product.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "geops", "distributor", "kafkaio", "schemas", "config", "dashboard", "cli")
LIMIT = 80
MARK = "# long:"


def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function and method in ``tree``, nested ones too."""
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def reason_above(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The reason of the ``# long:`` comment block right above ``node``, or None."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    row = first - 2                      # 0-based index of the line above
    block: list[str] = []
    while row >= 0 and lines[row].strip().startswith("#"):
        block.insert(0, lines[row].strip())
        row -= 1
    if not block or not block[0].startswith(MARK):
        return None
    return block[0][len(MARK):].strip() or None


def long_functions(path: Path) -> list[str]:
    """``path:line name (N lines)`` for each function over LIMIT lines without a reason."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []
    for node in functions(ast.parse(text, filename=str(path))):
        assert node.end_lineno is not None
        length = node.end_lineno - node.lineno + 1
        if length > LIMIT and reason_above(lines, node) is None:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_long_without_a_reason(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"no modules in {package}"
    long = [entry for path in modules for entry in long_functions(path)]
    assert not long, (f"functions over {LIMIT} lines: split them, or write above each a "
                      f"comment '{MARK} <why it reads best in one piece>': {long}")


def test_a_reason_counts_only_right_above_the_function() -> None:
    source = ("# long: a table\n@decorated\ndef tabled():\n    pass\n\n"
              "# long: too far\n\ndef unmarked():\n    pass\n\n"
              "# long:\ndef empty_reason():\n    pass\n\n"
              "# long: a linear protocol\n#   continued on a second line\ndef wrapped():\n"
              "    pass\n")
    lines = source.splitlines()
    reasons = {node.name: reason_above(lines, node) for node in functions(ast.parse(source))}
    assert reasons == {"tabled": "a table", "unmarked": None, "empty_reason": None,
                       "wrapped": "a linear protocol"}
