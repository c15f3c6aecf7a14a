"""Whether a peer engine is installed, and which version: shared by the adapters of
``peers.py`` (JSON Schemas) and ``grammar_peers.py`` (grammars)."""

from __future__ import annotations

import importlib.metadata


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution`` ("" when it is not installed)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def import_problem(module: str, distribution: str) -> str | None:
    """Why ``module`` (from ``distribution``) cannot be used here; None when it imports."""
    try:
        __import__(module)
    except ImportError as e:
        if not installed_version(distribution):
            return "not installed"
        return f"installed but does not import: {e}"
    return None
