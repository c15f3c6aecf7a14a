"""Running a snippet in a fresh Python interpreter: what a test of the modules an import
loads needs, since the test process has loaded them all already."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run_in_fresh_interpreter(code: str) -> None:
    """Run ``code`` (dedented) with this interpreter in a new process; AssertionError
    with its output when it fails."""
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
