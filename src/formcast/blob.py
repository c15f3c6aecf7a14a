"""Plain-data containers: named numpy arrays and a JSON header, as bytes.

The disk cache stores compiled indexes in this form (:meth:`TokenIndex.to_bytes
<formcast.index.TokenIndex.to_bytes>`). Reading one never runs code: the header is JSON,
and each array is raw little-endian memory of a dtype from a short list of numbers and
booleans (no object arrays), checked against its declared shape and the data's length.

Layout::

    b"FCBL" | u32 header length | header (UTF-8 JSON) | array bytes, back to back

The header is ``{"meta": {...}, "arrays": [[name, dtype, shape, offset], ...]}`` with
offsets counted from the start of the array bytes.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["BlobError", "pack", "unpack"]

_MAGIC = b"FCBL"
_LENGTH = struct.Struct("<I")
# Numbers and booleans only: nothing that could hold a Python object.
_DTYPES = frozenset(
    {"<i1", "<i2", "<i4", "<i8", "|i1", "|u1", "<u1", "<u2", "<u4", "<u8", "|b1", "<f4", "<f8"}
)


class BlobError(ValueError):
    """The bytes are not a well-formed container (truncated, foreign or inconsistent)."""


def pack(meta: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]]) -> bytes:
    """``meta`` (JSON-serialisable) and ``arrays`` as one byte string.

    Cost: one copy of every array. Raises ``TypeError`` for an array of another dtype
    than plain numbers or booleans, or meta JSON cannot write.
    """
    entries: list[list[Any]] = []
    chunks: list[bytes] = []
    offset = 0
    for name, array in arrays.items():
        plain = np.ascontiguousarray(array)
        dtype = plain.dtype.newbyteorder("<") if plain.dtype.byteorder == ">" else plain.dtype
        if dtype.str not in _DTYPES:
            raise TypeError(f"expected arrays of numbers or booleans, found {name}: {dtype}")
        data = plain.astype(dtype, copy=False).tobytes()
        entries.append([name, dtype.str, list(plain.shape), offset])
        chunks.append(data)
        offset += len(data)
    header = json.dumps({"meta": dict(meta), "arrays": entries}, sort_keys=True).encode()
    return b"".join([_MAGIC, _LENGTH.pack(len(header)), header, *chunks])


def unpack(data: bytes | memoryview) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """The ``(meta, arrays)`` that :func:`pack` wrote. Arrays are read-only views of
    ``data`` (no copy).

    Raises:
        BlobError: the bytes are not such a container, or an array's dtype, shape or
            offset does not fit.
    """
    view = memoryview(data)
    start = len(_MAGIC) + _LENGTH.size
    if len(view) < start or bytes(view[: len(_MAGIC)]) != _MAGIC:
        raise BlobError("expected a formcast data container, found other bytes")
    (length,) = _LENGTH.unpack_from(view, len(_MAGIC))
    if start + length > len(view):
        raise BlobError(f"expected a header of {length} bytes, found {len(view) - start}")
    try:
        header = json.loads(bytes(view[start : start + length]))
        meta, entries = header["meta"], header["arrays"]
    except (ValueError, KeyError, TypeError) as error:
        raise BlobError(f"expected a JSON header with meta and arrays: {error}") from None
    if not isinstance(meta, dict) or not isinstance(entries, list):
        raise BlobError("expected a JSON header with an object meta and a list of arrays")
    body = view[start + length :]
    return meta, {entry[0]: _array(entry, body) for entry in entries}


def _array(entry: Any, body: memoryview) -> npt.NDArray[Any]:
    try:
        name, dtype_text, shape, offset = entry
        dtype = np.dtype(dtype_text)
        shape = tuple(int(size) for size in shape)
        offset = int(offset)
    except (ValueError, TypeError) as error:
        raise BlobError(f"expected [name, dtype, shape, offset], found {entry!r}") from error
    if dtype_text not in _DTYPES or any(size < 0 for size in shape) or offset < 0:
        raise BlobError(f"expected an array of numbers with a valid shape, found {entry!r}")
    count = int(np.prod(shape, dtype=np.int64))
    end = offset + count * dtype.itemsize
    if end > len(body):
        raise BlobError(f"array {name!r} runs past the end of the data")
    array = np.frombuffer(body, dtype=dtype, count=count, offset=offset).reshape(shape)
    return array
