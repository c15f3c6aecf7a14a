"""torch is loaded only where formcast decodes.

Only the modules of ``formcast.decode`` (its torch-free records and jump-forward's
tokenizer aside) and model loading (``formcast.models``, which imports it inside its
functions) may import torch or transformers at module level. The compile stages, the
index and its cursor, and the extractor's plain records import without them: a process
that compiles a model's constraint and walks it never loads torch.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import formcast
from support.fresh_interpreter import run_in_fresh_interpreter

SOURCE = Path(formcast.__file__).parent
HEAVY = ("torch", "transformers")
#: The modules that may import torch or transformers at module level.
DECODING = "formcast.decode."
TORCH_FREE_IN_DECODING = {"formcast.decode", "formcast.decode.records", "formcast.decode.forcing"}


def _module_name(path: Path) -> str:
    parts = ["formcast", *path.relative_to(SOURCE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(tree: ast.Module) -> Iterator[str]:
    """The modules a file imports when it runs: its top-level statements and the bodies
    of top-level ``if``/``try`` blocks, except ``if TYPE_CHECKING:``."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                pending.extend(node.body)
            pending.extend(node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend([*node.body, *node.orelse, *node.finalbody])
            for handler in node.handlers:
                pending.extend(handler.body)


def _imports_heavy(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [name for name in _module_level_imports(tree) if name.split(".")[0] in HEAVY]


def test_only_decoding_imports_torch_at_module_level() -> None:
    offenders = {}
    for path in sorted(SOURCE.rglob("*.py")):
        name = _module_name(path)
        allowed = name.startswith(DECODING) and name not in TORCH_FREE_IN_DECODING
        heavy = _imports_heavy(path)
        if heavy and not allowed:
            offenders[name] = heavy
    assert offenders == {}


def test_the_scan_sees_guarded_and_type_checking_imports() -> None:
    tree = ast.parse(
        textwrap.dedent(
            """
            import os
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                import torch
            try:
                import transformers
            except ImportError:
                pass
            def f():
                import torch
            """
        )
    )
    assert sorted(_module_level_imports(tree)) == ["os", "transformers", "typing"]


def test_compiling_and_walking_a_constraint_loads_no_torch() -> None:
    run_in_fresh_interpreter(
        """
        import sys
        from typing import Annotated

        import pydantic

        import formcast

        class Item(pydantic.BaseModel):
            name: Annotated[str, formcast.FromText()]
            count: int

        token_bytes = [bytes([b]) for b in range(256)] + [b""]
        vocabulary = formcast.Vocabulary.from_token_bytes(token_bytes, eos_token_ids=[256])
        index = formcast.compile(Item, vocabulary, cache=False)
        cursor = formcast.Cursor(index.bind("2 pears"))
        for byte in b'{"name":"pears","count":2}':
            cursor.advance(byte)
        assert cursor.is_accepting()
        assert formcast.compile(formcast.Regex("[a-z]+"), vocabulary, cache=False)
        heavy = ("torch", "transformers")
        loaded = sorted(name for name in sys.modules if name.split(".")[0] in heavy)
        assert not loaded, loaded
        """
    )


def test_the_extractors_plain_records_load_no_torch() -> None:
    run_in_fresh_interpreter(
        """
        import sys

        import formcast.extraction.attempts
        import formcast.extraction.options
        import formcast.extraction.results
        import formcast.decode.records
        import formcast.errors

        heavy = ("torch", "transformers")
        loaded = sorted(name for name in sys.modules if name.split(".")[0] in heavy)
        assert not loaded, loaded
        """
    )
