"""A disk cache of compiled constraints, so that a second process reuses a compile.

:func:`formcast.compile` looks a constraint up here before it builds anything. An entry
is a :class:`~formcast.index.TokenIndex` as plain data (:meth:`TokenIndex.to_bytes
<formcast.index.TokenIndex.to_bytes>`: numpy arrays and a JSON header, never a pickle):
the automaton's NFA, the states determinized so far with their rows (for a recursive
constraint's pushdown automaton: its machines' NFA and states, its frames and sets of
stacks), and the token rows computed so far (at least the initial state's, so the first
mask of a new process is a lookup).

Key: sha256 of the constraint's canonical text (:func:`formcast.constraint.constraint_key`:
the JSON Schema document, or the pattern of a :class:`~formcast.Regex`, plus ``mode``,
``whitespace`` and ``max_recursion_depth``), the vocabulary's
:attr:`~formcast.Vocabulary.fingerprint`, and the environment: :data:`FORMAT_VERSION`, a
digest of every source file of the package (:func:`source_digest`: any change to the
code, a renamed module included, is a miss) and the Python and numpy versions. The key
never needs the regex, so a hit builds neither the regex nor the automaton.

Folder: ``<cache>/constraints/`` where ``<cache>`` is :func:`formcast.models.cache_dir`
(``$FORMCAST_CACHE_DIR``, else ``$XDG_CACHE_HOME/formcast``, else ``~/.cache/formcast``).
Set ``FORMCAST_DISK_CACHE=0`` (or pass ``cache=False`` to ``compile``) to turn it off, or
``FORMCAST_DISK_CACHE=<folder>`` to keep constraints apart from the converted models (test
suites: a temporary folder).

Safety: files are written to a temporary name and moved into place with
:func:`os.replace`, so readers see a whole entry or none and concurrent writers of one key
simply race to write the same content. A file that is truncated, corrupted (a sha256 of
the payload is checked), written by another format or not owned by the current user is a
miss, and the next compile overwrites it. Reading an entry never runs code, whoever wrote
it (a planted pickle is just a foreign file). An entry decides which tokens are allowed,
though, so keep the folder writable by its owner only.

Size: an entry larger than :data:`MAX_ENTRY_BYTES` is not written, and when the folder
grows beyond ``$FORMCAST_DISK_CACHE_MAX_MB`` (default :data:`DEFAULT_MAX_MB`) the least
recently used entries (by modification time; a hit touches its file) are deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import sys
import tempfile
import threading
import time
import weakref
from functools import lru_cache
from pathlib import Path
from typing import TypeAlias

import numpy as np

from formcast.errors import InvalidOptionError
from formcast.index import TokenIndex
from formcast.models import cache_dir
from formcast.vocabulary import Vocabulary

__all__ = [
    "DEFAULT_MAX_MB",
    "FORMAT_VERSION",
    "MAX_ENTRY_BYTES",
    "CacheSetting",
    "clear_disk_cache",
    "disk_cache_dir",
    "disk_cache_stats",
    "save_to_disk_cache",
]

#: Bumped whenever the layout of an entry changes; older entries are then misses.
FORMAT_VERSION = 3
#: Entries whose payload is larger than this are not written (bytes).
MAX_ENTRY_BYTES = 64 * 1024 * 1024
#: Default bound of the whole folder, in MiB (``$FORMCAST_DISK_CACHE_MAX_MB``).
DEFAULT_MAX_MB = 512

CacheSetting: TypeAlias = bool | str | os.PathLike[str] | None
"""``compile(..., cache=...)``: ``None`` follows ``$FORMCAST_DISK_CACHE`` (off when it is
``0``/``false``/``no``/``off``; on in the default folder when it is unset, empty,
``1``/``true``/``yes``/``on``; any other value is a folder used as the cache root),
``False`` turns the disk cache off, ``True`` turns it on in the default folder, a path
turns it on with that folder as the cache root."""

_SUBFOLDER = "constraints"
_SUFFIX = ".fcidx"
_TEMP_PREFIX = ".tmp-"
_STALE_TEMP_SECONDS = 3600
_MAGIC = b"FCIX"
# magic, format version, entry key (sha256), payload sha256, payload length
_HEADER = struct.Struct("<4sI32s32sQ")
_OFF = frozenset({"0", "false", "no", "off"})
_ON = frozenset({"", "1", "true", "yes", "on"})

_counters = {"hits": 0, "misses": 0, "writes": 0, "rejected": 0}
_counters_lock = threading.Lock()
# index -> (folder, entry key, rows when last written), for save_to_disk_cache
_origins: weakref.WeakKeyDictionary[TokenIndex, tuple[Path, str, int]] = weakref.WeakKeyDictionary()


def _count(name: str) -> None:
    with _counters_lock:
        _counters[name] += 1


def disk_cache_stats() -> dict[str, int]:
    """Counts for this process: ``hits``, ``misses`` (lookups that found no usable entry),
    ``writes`` and ``rejected`` (files found but unreadable, corrupted or of another
    format: misses too)."""
    with _counters_lock:
        return dict(_counters)


def disk_cache_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding compiled constraints: ``<root>/constraints`` where ``root``
    defaults to :func:`formcast.models.cache_dir`. Not created by this call."""
    return cache_dir(root) / _SUBFOLDER


def resolve(setting: CacheSetting) -> Path | None:
    """The folder to use for ``compile(..., cache=setting)``, or None when disabled.

    Raises:
        InvalidOptionError: ``setting`` is not None, a bool, a str or a path.
    """
    if setting is False:
        return None
    if setting is None:
        value = os.environ.get("FORMCAST_DISK_CACHE", "").strip()
        if value.lower() in _OFF:
            return None
        if value.lower() in _ON:
            return disk_cache_dir()
        return disk_cache_dir(value)  # a folder: the cache root for constraints only
    if setting is True:
        return disk_cache_dir()
    if not isinstance(setting, (str, os.PathLike)):
        raise InvalidOptionError(
            f"expected cache to be None, a bool or a folder path, found {setting!r}"
        )
    return disk_cache_dir(setting)


@lru_cache(maxsize=1)
def source_digest() -> str:
    """sha256 (hex) of every Python source file of the installed package
    (:func:`digest_of_sources` of its folder): any change to formcast's code, a renamed
    or added module included, changes it. Computed once per process (a few ms)."""
    return digest_of_sources(Path(__file__).resolve().parent)


def digest_of_sources(root: Path) -> str:
    """sha256 (hex) of the ``*.py`` files under ``root``, by relative path and content.
    A file that cannot be read counts by its name, with a mark."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix().encode()
        try:
            content = path.read_bytes()
        except OSError:
            content = b"?"
        for part in (relative, content):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
    return digest.hexdigest()


@lru_cache(maxsize=1)
def _environment() -> str:
    # formcast's version is in its source (``__init__.py``), hence in the digest.
    return json.dumps(
        {
            "format": FORMAT_VERSION,
            "code": source_digest(),
            "python": list(sys.version_info[:2]),
            "numpy": np.__version__,
        },
        sort_keys=True,
    )


def entry_key(constraint: str, fingerprint: str) -> str:
    """The sha256 (hex) naming the entry of a constraint key for a vocabulary fingerprint."""
    digest = hashlib.sha256()
    for part in (_environment(), fingerprint, constraint):
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


# -- reading ---------------------------------------------------------------------------------
def load(folder: Path, key: str, vocabulary: Vocabulary) -> TokenIndex | None:
    """The cached index of ``key``, bound to ``vocabulary``; None on a miss.

    Never raises: a missing, unreadable, truncated, corrupted or foreign file is a miss.
    """
    path = folder / (key + _SUFFIX)
    try:
        data = _read_own_file(path)
    except OSError:
        _count("misses")
        return None
    index = _decode(data, key, vocabulary)
    if index is None:
        _count("rejected")
        _count("misses")
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used, for the size bound
    _origins[index] = (folder, key, index.computed_rows)
    _count("hits")
    return index


def _read_own_file(path: Path) -> bytes:
    with open(path, "rb") as handle:
        getuid = getattr(os, "getuid", None)
        if getuid is not None and os.fstat(handle.fileno()).st_uid != getuid():
            raise PermissionError(f"{path} is not owned by the current user")
        return handle.read()


def _decode(data: bytes, key: str, vocabulary: Vocabulary) -> TokenIndex | None:
    try:
        if len(data) < _HEADER.size:
            return None
        magic, version, stored_key, checksum, length = _HEADER.unpack_from(data)
        payload = memoryview(data)[_HEADER.size :]
        if (
            magic != _MAGIC
            or version != FORMAT_VERSION
            or stored_key != bytes.fromhex(key)
            or length != len(payload)
            or hashlib.sha256(payload).digest() != checksum
        ):
            return None
        index = TokenIndex.from_bytes(payload, vocabulary)
        index.row(index.initial_state)  # a broken entry fails here, not in a decoding loop
        return index
    except (ValueError, TypeError, KeyError, IndexError, OverflowError):
        return None  # a damaged or foreign entry is a miss


# -- writing ---------------------------------------------------------------------------------
def store(folder: Path, key: str, index: TokenIndex) -> bool:
    """Write ``index`` as the entry of ``key``; False if it was not written (too large,
    or the folder is not writable). Never raises for I/O errors."""
    rows = index.computed_rows
    payload = _encode(index)
    if payload is None or len(payload) > MAX_ENTRY_BYTES:
        return False
    header = _HEADER.pack(
        _MAGIC, FORMAT_VERSION, bytes.fromhex(key), hashlib.sha256(payload).digest(), len(payload)
    )
    temporary: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=_SUFFIX, dir=folder)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(header)
            handle.write(payload)
        os.replace(temporary, folder / (key + _SUFFIX))
        temporary = None
    except OSError:
        return False
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
    _origins[index] = (folder, key, rows)
    _count("writes")
    _enforce_bound(folder)
    return True


def _encode(index: TokenIndex) -> bytes | None:
    """The index's plain data (its vocabulary left out: the loader has it), or None for an
    index that does not serialise (one bound to a text)."""
    try:
        return index.to_bytes()
    except InvalidOptionError:
        return None


def _max_bytes() -> int:
    try:
        megabytes = float(os.environ.get("FORMCAST_DISK_CACHE_MAX_MB", DEFAULT_MAX_MB))
    except ValueError:
        megabytes = DEFAULT_MAX_MB
    return max(int(megabytes * 1024 * 1024), 0)


def _enforce_bound(folder: Path) -> None:
    """Delete least recently used entries beyond the size bound, and temporary files
    left by writers that died (older than an hour)."""
    limit = _max_bytes()
    now = time.time()
    entries: list[tuple[float, int, Path]] = []
    try:
        with os.scandir(folder) as scan:
            for item in scan:
                with contextlib.suppress(OSError):
                    info = item.stat(follow_symlinks=False)
                    if item.name.startswith(_TEMP_PREFIX):
                        if now - info.st_mtime > _STALE_TEMP_SECONDS:
                            os.unlink(item.path)
                    elif item.name.endswith(_SUFFIX):
                        entries.append((info.st_mtime, info.st_size, Path(item.path)))
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries, key=lambda entry: entry[0]):
        if total <= limit:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size


# -- public helpers --------------------------------------------------------------------------
def save_to_disk_cache(index: TokenIndex) -> bool:
    """Write ``index`` again with every row computed so far, so that the next process
    starts with them (e.g. after a batch of extractions). Returns True if written.

    Only indexes that :func:`formcast.compile` loaded from or wrote to the disk cache
    have an entry to update; for others, and when no row was added since the entry was
    written, nothing happens. Cost: serialising the rows (~0.5 ms per 100 KB) and one file
    write; other threads that would add rows wait meanwhile.
    """
    origin = _origins.get(index)
    if origin is None:
        return False
    folder, key, rows = origin
    if index.computed_rows <= rows:
        return False
    return store(folder, key, index)


def clear_disk_cache(root: str | os.PathLike[str] | None = None) -> int:
    """Delete every cached constraint under ``root`` and return how many entries were
    removed. Converted models are kept. The default ``root`` is the one ``compile`` uses
    (``$FORMCAST_DISK_CACHE`` when it names a folder, else :func:`formcast.models.cache_dir`)."""
    folder = disk_cache_dir(root) if root is not None else resolve(None) or disk_cache_dir()
    removed = 0
    try:
        with os.scandir(folder) as scan:
            names = [item.path for item in scan]
    except OSError:
        return 0
    for path in names:
        name = os.path.basename(path)
        if not (name.endswith(_SUFFIX) or name.startswith(_TEMP_PREFIX)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            if not name.startswith(_TEMP_PREFIX):
                removed += 1
    return removed
