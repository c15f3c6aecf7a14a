"""The plain-data container of the disk cache: round trips, and refusals of bad bytes."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from formcast.blob import BlobError, pack, unpack


def test_round_trip_keeps_meta_dtypes_shapes_and_values() -> None:
    arrays = {
        "ints": np.arange(10, dtype=np.int32),
        "wide": np.array([2**40, -1], dtype=np.int64),
        "table": np.arange(12, dtype=np.int32).reshape(3, 4),
        "flags": np.array([True, False, True]),
        "bytes": np.frombuffer(b"abc", dtype=np.uint8),
        "empty": np.zeros((0, 256), dtype=np.int32),
    }
    meta, back = unpack(pack({"pattern": "a|b", "count": 3}, arrays))
    assert meta == {"pattern": "a|b", "count": 3}
    assert set(back) == set(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype, name
        assert back[name].shape == array.shape, name
        assert np.array_equal(back[name], array), name


def test_unpacked_arrays_are_read_only_views() -> None:
    _, back = unpack(pack({}, {"a": np.arange(4, dtype=np.int64)}))
    with pytest.raises(ValueError):
        back["a"][0] = 7


def test_object_arrays_are_refused_when_packing() -> None:
    with pytest.raises(TypeError, match="numbers or booleans"):
        pack({}, {"objects": np.array([object()], dtype=object)})


def test_a_pickle_is_not_a_container() -> None:
    with pytest.raises(BlobError, match="expected a formcast data container"):
        unpack(pickle.dumps({"a": 1}))


def test_truncated_data_is_refused() -> None:
    data = pack({"k": 1}, {"a": np.arange(100, dtype=np.int64)})
    with pytest.raises(BlobError, match="runs past the end"):
        unpack(data[:-8])
    with pytest.raises(BlobError, match="header"):
        unpack(data[:10])


def _with_header(header: object) -> bytes:
    text = json.dumps(header).encode()
    return b"FCBL" + len(text).to_bytes(4, "little") + text


def test_a_header_naming_an_object_dtype_is_refused() -> None:
    forged = _with_header({"meta": {}, "arrays": [["a", "|O", [1], 0]]}) + b"\0" * 8
    with pytest.raises(BlobError, match="numbers"):
        unpack(forged)


@pytest.mark.parametrize(
    "header",
    [
        {"meta": {}},
        {"meta": [], "arrays": []},
        {"meta": {}, "arrays": [["a", "<i4", [-1], 0]]},
        {"meta": {}, "arrays": [["a", "<i4"]]},
    ],
)
def test_malformed_headers_are_refused(header: object) -> None:
    with pytest.raises(BlobError):
        unpack(_with_header(header))
