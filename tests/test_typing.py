"""formcast's public types, checked by mypy on typing_tests/ (a few seconds each).

typing_tests/ holds calls that must type-check and calls that must not; the second kind
carry ``# type: ignore[<code>]``, so mypy fails when one stops being an error. The copy
test removes those markers and checks that mypy then reports each error, with its code,
on its line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy (the dev extra) checks typing_tests/")

REPO = Path(__file__).resolve().parents[1]
TYPING_TESTS = REPO / "typing_tests"
IGNORE = re.compile(r"\s*# type: ignore\[([a-z-]+)\]")
ERROR = re.compile(r"^(?P<path>.+?):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    """mypy with the project's configuration (pyproject.toml) and cache."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", *map(str, paths)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_typing_tests_type_check() -> None:
    checked = mypy(TYPING_TESTS)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_each_marked_mistake_is_reported_with_its_code(tmp_path: Path) -> None:
    copy = tmp_path / "typing_tests"
    shutil.copytree(TYPING_TESTS, copy)
    expected = set()
    for path in copy.glob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            marker = IGNORE.search(line)
            if marker is not None:
                expected.add((path.name, number, marker.group(1)))
                lines[number - 1] = IGNORE.sub("", line)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len(expected) >= 2, "typing_tests/ should hold marked mistakes"

    checked = mypy(copy)
    reported = set()
    for line in checked.stdout.splitlines():
        error = ERROR.match(line)
        if error is not None:
            reported.add((Path(error["path"]).name, int(error["line"]), error["code"]))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert expected <= reported, f"not reported: {sorted(expected - reported)}\n{checked.stdout}"
