"""The disk cache of compiled constraints (formcast.cache, formcast.compile(cache=...)).

Every test points ``$FORMCAST_CACHE_DIR`` at its own ``tmp_path``, so the user's cache is
never read or written, and uses a hand-built vocabulary (no model needed).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pytest
from pydantic import BaseModel

import formcast
import formcast.cache as disk_cache
from formcast import blob
from formcast.automaton import PushdownAutomaton
from formcast.compiler import clear_memory_cache
from formcast.constraint import DEFAULT_COMPILE_OPTIONS, CompileOptions, output_spec
from formcast.errors import SchemaError
from formcast.index import TokenIndex
from formcast.vocabulary import Vocabulary

ROOT = Path(__file__).resolve().parents[1]

TOKENS: list[bytes] = [bytes([b]) for b in range(32, 127)] + [
    b'{"',
    b'":',
    b'":"',
    b'","',
    b'"}',
    b'",',
    b"name",
    b"city",
    b"true",
    b"null",
    b"12",
    b"\xc3",
    b"\xa9",
    b"\xc3\xa9",
    "日本".encode(),
    b"\n",
]
EOS = len(TOKENS)
TOKENS.append(b"")

# Defined here and, verbatim, in the second process (see _SECOND_PROCESS).
MODEL_SOURCE = textwrap.dedent(
    """
    from pydantic import BaseModel

    class Place(BaseModel):
        name: str
        population: int
        capital: bool | None = None

    class Tree(BaseModel):
        name: str
        children: list["Tree"] = []
    """
)
_namespace: dict[str, Any] = {}
exec(MODEL_SOURCE, _namespace)
Place: type[BaseModel] = _namespace["Place"]
Tree: type[BaseModel] = _namespace["Tree"]  # recursive: a pushdown automaton

ARITHMETIC = """
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
"""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "é"]}, "maxItems": 3},
        "size": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
    },
    "required": ["city"],
}


def vocabulary(tokens: list[bytes] = TOKENS) -> Vocabulary:
    return Vocabulary.from_token_bytes(tokens, [EOS])


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("FORMCAST_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FORMCAST_DISK_CACHE", raising=False)
    monkeypatch.delenv("FORMCAST_DISK_CACHE_MAX_MB", raising=False)
    clear_memory_cache()
    yield tmp_path / "constraints"
    clear_memory_cache()


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.fcidx")) if folder.is_dir() else []


def compile_fresh(output: Any, vocab: Vocabulary, **options: Any) -> TokenIndex:
    """Compile with the in-process memo cleared, so the disk cache is consulted."""
    clear_memory_cache()
    return formcast.compile(output, vocab, **options)


# ------------------------------------------------------------------ a second process


_SECOND_PROCESS = """
import json, sys
import formcast
import formcast.cache
import formcast.compiler
import formcast.constraint
from formcast.vocabulary import Vocabulary

def refuse(*args, **kwargs):
    raise AssertionError("a disk-cache hit must not build the regex or the automaton")

formcast.constraint.schema_to_regex = refuse
formcast.compiler.compile_automaton = refuse

TOKENS = {tokens!r}
vocabulary = Vocabulary.from_token_bytes(TOKENS, [{eos}])
{model_source}
out = {{}}
for name, output in (("place", Place), ("tree", Tree), ("schema", json.loads({schema!r}))):
    index = formcast.compile(output, vocabulary, mode="specification")
    out[name] = [index.description, index.cursor().allowed_token_ids().tolist()]
out["stats"] = formcast.cache.disk_cache_stats()
print(json.dumps(out))
"""


def run_second_process(cache_root: Path) -> dict[str, Any]:
    code = _SECOND_PROCESS.format(
        tokens=TOKENS, eos=EOS, model_source=MODEL_SOURCE, schema=json.dumps(SCHEMA)
    )
    env = {**os.environ, "FORMCAST_CACHE_DIR": str(cache_root)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def constraint_key(output: Any, options: CompileOptions = DEFAULT_COMPILE_OPTIONS) -> str | None:
    """The disk cache's key of ``output`` (:attr:`OutputSpec.key`); None where the type
    cannot be read at all."""
    try:
        return output_spec(output, options).key
    except SchemaError:
        return None


def test_a_second_process_hits_without_building_the_regex(_private_cache: Path) -> None:
    vocab = vocabulary()
    place = formcast.compile(Place, vocab, mode="specification")
    tree = formcast.compile(Tree, vocab, mode="specification")
    schema = formcast.compile(SCHEMA, vocab, mode="specification")
    assert isinstance(tree.automaton, PushdownAutomaton)
    assert len(entries(_private_cache)) == 3
    assert place.computed_rows >= 1  # the first mask's row travels with the entry

    second = run_second_process(_private_cache.parent)
    assert second["stats"]["hits"] == 3 and second["stats"]["misses"] == 0
    assert second["place"] == ["Place", place.cursor().allowed_token_ids().tolist()]
    assert second["tree"] == ["Tree", tree.cursor().allowed_token_ids().tolist()]
    assert second["schema"][1] == schema.cursor().allowed_token_ids().tolist()


def test_a_hit_says_the_warnings_of_the_compilation_again(_private_cache: Path) -> None:
    """An index read from the disk cache (or the in-process memo) emits the warnings its
    compilation emitted: an unknown format and a dropped ``anyOf`` branch still reach
    the caller, with their attributes, although nothing is compiled."""
    schema = {
        "type": "object",
        "properties": {
            "c": {"type": "string", "format": "colour"},
            "v": {"anyOf": [{"type": "integer"}, {"type": "array", "uniqueItems": True}]},
        },
    }
    vocab = vocabulary()

    def caught(compile_once: Any) -> list[warnings.WarningMessage]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            compile_once()
        return [w for w in seen if issubclass(w.category, formcast.FormcastWarning)]

    first = caught(lambda: compile_fresh(schema, vocab, mode="specification"))
    assert len(entries(_private_cache)) == 1
    from_disk = caught(lambda: compile_fresh(schema, vocab, mode="specification"))
    from_memory = caught(lambda: formcast.compile(schema, vocab, mode="specification"))
    assert disk_cache.disk_cache_stats()["hits"] >= 1
    for again in (from_disk, from_memory):
        assert [str(w.message) for w in again] == [str(w.message) for w in first]
        assert [w.category for w in again] == [w.category for w in first]
    assert {w.category for w in first} == {formcast.UnknownFormatWarning, formcast.FormcastWarning}
    unknown = next(w.message for w in from_disk if w.category is formcast.UnknownFormatWarning)
    assert isinstance(unknown, formcast.UnknownFormatWarning)
    assert (unknown.format, unknown.pointer) == ("colour", "/properties/c")


def test_concurrent_writers_leave_one_valid_entry(_private_cache: Path) -> None:
    code = _SECOND_PROCESS.format(
        tokens=TOKENS, eos=EOS, model_source=MODEL_SOURCE, schema=json.dumps(SCHEMA)
    ).replace("formcast.constraint.schema_to_regex = refuse", "")
    code = code.replace("formcast.compiler.compile_automaton = refuse", "")
    env = {**os.environ, "FORMCAST_CACHE_DIR": str(_private_cache.parent)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), [err for _, err in outputs]
    assert len(entries(_private_cache)) == 3
    assert not list(_private_cache.glob(".tmp-*"))
    before = disk_cache.disk_cache_stats()
    compile_fresh(Place, vocabulary(), mode="specification")
    assert disk_cache.disk_cache_stats()["hits"] == before["hits"] + 1


# ------------------------------------------------------------------ keys


def test_keys_come_from_the_input_and_every_option() -> None:
    base = constraint_key(SCHEMA)
    assert base is not None
    assert constraint_key(json.dumps(SCHEMA)) == base  # the same document as JSON text
    assert constraint_key(dict(SCHEMA)) == base
    variants = [
        constraint_key(SCHEMA, CompileOptions(mode="specification")),
        constraint_key(SCHEMA, CompileOptions(whitespace=True)),
        constraint_key(
            SCHEMA, CompileOptions(whitespace=1)
        ),  # True and 1 are different options here
        constraint_key(SCHEMA, CompileOptions(whitespace=2)),
        constraint_key(SCHEMA, CompileOptions(max_recursion_depth=2)),
        constraint_key({**SCHEMA, "required": ["city", "size"]}),
        constraint_key({**SCHEMA, "properties": dict(reversed(SCHEMA["properties"].items()))}),
        constraint_key(Place),
        constraint_key(formcast.Regex("[a-z]+")),
        constraint_key(int),
        constraint_key(list[int]),
        constraint_key(True),
    ]
    assert None not in variants
    assert len({base, *variants}) == len(variants) + 1


def test_property_order_is_part_of_the_key() -> None:
    class AB(BaseModel):
        a: int
        b: int

    class BA(BaseModel):
        b: int
        a: int

    BA.__name__ = "AB"  # same title: only the order differs
    assert constraint_key(AB) != constraint_key(BA)
    assert formcast.schema_to_regex(AB) != formcast.schema_to_regex(BA)


def test_model_keys_are_stable_and_options_of_wrapped_types_count() -> None:
    class Colour(Enum):
        RED = "red"
        BLUE = "blue"

    assert constraint_key(Place) == constraint_key(Place)
    assert constraint_key(Colour) == constraint_key(Colour)
    assert constraint_key(Literal["x", "y"]) != constraint_key(Literal["y", "x"])


def test_inputs_without_an_exact_key_skip_the_cache(_private_cache: Path) -> None:
    assert constraint_key({"enum": ("a", "b")}) is None  # a tuple is not JSON
    assert constraint_key({"properties": {1: {}}}) is None
    assert constraint_key({"const": float("nan")}) is None
    assert constraint_key(object()) is None
    with pytest.raises(formcast.SchemaError):
        formcast.compile({"enum": ("a", "b")}, vocabulary())
    assert entries(_private_cache) == []


def test_entry_keys_depend_on_the_vocabulary() -> None:
    key = constraint_key(SCHEMA)
    assert key is not None
    other = vocabulary([*TOKENS[:-1], b"extra", b""])
    first = disk_cache.entry_key(key, vocabulary().fingerprint)
    assert first == disk_cache.entry_key(key, vocabulary().fingerprint)
    assert first != disk_cache.entry_key(key, other.fingerprint)
    assert len(first) == 64 and int(first, 16) >= 0


def test_different_vocabularies_get_different_entries(_private_cache: Path) -> None:
    formcast.compile(SCHEMA, vocabulary())
    formcast.compile(SCHEMA, Vocabulary.from_token_bytes([*TOKENS[:-1], b"ab", b""], [EOS + 1]))
    assert len(entries(_private_cache)) == 2


# ------------------------------------------------------------------ damaged entries


def _damage_truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _damage_flip(data: bytes) -> bytes:
    middle = len(data) - 10
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


def _damage_version(data: bytes) -> bytes:
    return data[:4] + struct.pack("<I", disk_cache.FORMAT_VERSION + 1) + data[8:]


def _with_payload(data: bytes, payload: bytes) -> bytes:
    """The entry ``data`` with its payload replaced: a valid header (right magic, format,
    key and checksum) over ``payload``, as anyone who can write the folder could make."""
    header = disk_cache._HEADER.unpack_from(data)
    return (
        disk_cache._HEADER.pack(
            header[0], header[1], header[2], hashlib.sha256(payload).digest(), len(payload)
        )
        + payload
    )


def _damage_payload(data: bytes) -> bytes:
    return _with_payload(data, b"not an index at all")


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: b"garbage" * 100,
        _damage_truncate,
        _damage_flip,
        _damage_version,
        _damage_payload,
    ],
    ids=["empty", "garbage", "truncated", "flipped-byte", "other-format", "not-an-index"],
)
def test_a_damaged_entry_is_a_miss_and_is_rewritten(damage: Any, _private_cache: Path) -> None:
    vocab = vocabulary()
    expected = formcast.compile(Place, vocab).cursor().allowed_token_ids().tolist()
    (path,) = entries(_private_cache)
    good = path.read_bytes()
    path.write_bytes(damage(good))

    before = disk_cache.disk_cache_stats()
    index = compile_fresh(Place, vocab)
    after = disk_cache.disk_cache_stats()
    assert after["hits"] == before["hits"]
    assert after["rejected"] == before["rejected"] + 1
    assert after["writes"] == before["writes"] + 1
    assert index.cursor().allowed_token_ids().tolist() == expected
    assert path.read_bytes() == good  # rewritten whole

    compile_fresh(Place, vocab)
    assert disk_cache.disk_cache_stats()["hits"] == after["hits"] + 1


def _tampered(data: bytes, change: Any) -> bytes:
    """The entry ``data`` with ``change`` applied to its index's arrays (copies), behind a
    valid header: well-formed plain data whose parts disagree."""
    payload = memoryview(data)[disk_cache._HEADER.size :]
    meta, arrays = blob.unpack(payload)
    copies = {name: array.copy() for name, array in arrays.items()}
    change(copies)
    return _with_payload(data, blob.pack(meta, copies))


def _unknown_machine(arrays: dict[str, Any]) -> None:
    arrays["automaton.frames"][-1, 0] = 99


def _unknown_frame(arrays: dict[str, Any]) -> None:
    arrays["automaton.stack_members"][-1] = arrays["automaton.frames"].shape[0]


def _row_past_the_states(arrays: dict[str, Any]) -> None:
    arrays["automaton.table"][1, ord("{")] = arrays["automaton.table"].shape[0]


def _frame_below_itself(arrays: dict[str, Any]) -> None:
    arrays["automaton.frames"][-1, 2] = arrays["automaton.frames"].shape[0] - 1


def _token_past_the_states(arrays: dict[str, Any]) -> None:
    arrays["row_next"][0] = arrays["automaton.table"].shape[0]


@pytest.mark.parametrize(
    "change",
    [
        _unknown_machine,
        _unknown_frame,
        _row_past_the_states,
        _frame_below_itself,
        _token_past_the_states,
    ],
)
def test_a_pushdown_entry_whose_parts_disagree_is_a_miss(change: Any, _private_cache: Path) -> None:
    vocab = vocabulary()
    expected = formcast.compile(Tree, vocab).cursor().allowed_token_ids().tolist()
    (path,) = entries(_private_cache)
    good = path.read_bytes()
    path.write_bytes(_tampered(good, change))
    with pytest.raises(ValueError, match="expected"):
        TokenIndex.from_bytes(memoryview(path.read_bytes())[disk_cache._HEADER.size :], vocab)

    before = disk_cache.disk_cache_stats()
    index = compile_fresh(Tree, vocab)
    after = disk_cache.disk_cache_stats()
    assert after["rejected"] == before["rejected"] + 1 and after["hits"] == before["hits"]
    assert index.cursor().allowed_token_ids().tolist() == expected
    assert path.read_bytes() == good  # rewritten whole


def test_an_entry_under_another_key_is_not_used(_private_cache: Path) -> None:
    vocab = vocabulary()
    formcast.compile(Place, vocab)
    formcast.compile(SCHEMA, vocab)
    place, schema = sorted(entries(_private_cache), key=lambda p: p.stat().st_mtime_ns)
    schema.write_bytes(place.read_bytes())  # right format, wrong key
    before = disk_cache.disk_cache_stats()
    compile_fresh(SCHEMA, vocab)
    assert disk_cache.disk_cache_stats()["rejected"] == before["rejected"] + 1


class _Planted:
    """A pickle that, when loaded, creates the file ``marker``: what an attacker who can
    write the cache folder would plant."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("output", [Place, Tree], ids=["lazy", "pushdown"])
def test_a_planted_pickle_runs_nothing_and_is_a_miss(
    output: type[BaseModel], _private_cache: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "planted-code-ran"
    planted = pickle.dumps(_Planted(marker))
    pickle.loads(planted)  # the payload does run code when unpickled...
    assert marker.exists()
    marker.unlink()

    vocab = vocabulary()
    expected = formcast.compile(output, vocab).cursor().allowed_token_ids().tolist()
    (path,) = entries(_private_cache)
    good = path.read_bytes()
    for forged in (planted, _with_payload(good, planted)):  # bare, and behind a valid header
        path.write_bytes(forged)
        before = disk_cache.disk_cache_stats()
        index = compile_fresh(output, vocab)
        after = disk_cache.disk_cache_stats()
        assert not marker.exists()  # ...but reading the cache never unpickles
        assert after["rejected"] == before["rejected"] + 1
        assert after["hits"] == before["hits"]
        assert index.cursor().allowed_token_ids().tolist() == expected
        assert path.read_bytes() == good  # the planted file was replaced


def test_the_cache_module_does_not_import_pickle() -> None:
    source = (ROOT / "src" / "formcast" / "cache.py").read_text()
    assert "pickle" not in source.replace("pickle)", "").split('"""', 2)[2]


def test_to_bytes_refuses_another_vocabulary_and_a_bound_index() -> None:
    vocab = vocabulary()
    index = formcast.compile(Place, vocab, cache=False)
    data = index.to_bytes()
    assert TokenIndex.from_bytes(data, vocab).row(index.initial_state)[0].tolist() == (
        index.row(index.initial_state)[0].tolist()
    )
    other = Vocabulary.from_token_bytes([*TOKENS[:-1], b"ab", b""], [EOS + 1])
    with pytest.raises(ValueError, match="vocabulary"):
        TokenIndex.from_bytes(data, other)
    text_index = formcast.compile(Copied, vocab, cache=False)
    with pytest.raises(formcast.InvalidOptionError, match="bound to a text"):
        text_index.bind("Total 12").to_bytes()


class Copied(BaseModel):
    name: Annotated[str, formcast.FromText()]


def test_the_code_key_changes_with_any_file_of_the_package(tmp_path: Path) -> None:
    package = ROOT / "src" / "formcast"
    assert disk_cache.source_digest() == disk_cache.digest_of_sources(package)
    copy = tmp_path / "formcast"
    for path in package.rglob("*.py"):
        target = copy / path.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    base = disk_cache.digest_of_sources(copy)
    assert base == disk_cache.source_digest()
    (copy / "automaton" / "extra.py").write_text("X = 1\n")  # a new module
    added = disk_cache.digest_of_sources(copy)
    assert added != base
    (copy / "automaton" / "extra.py").rename(copy / "automaton" / "other.py")  # renamed
    assert disk_cache.digest_of_sources(copy) not in {base, added}
    (copy / "automaton" / "other.py").unlink()
    assert disk_cache.digest_of_sources(copy) == base
    (copy / "index.py").write_text((copy / "index.py").read_text() + "\n# edited\n")
    assert disk_cache.digest_of_sources(copy) != base


# ------------------------------------------------------------------ switching it off


def test_cache_false_neither_reads_nor_writes(_private_cache: Path) -> None:
    vocab = vocabulary()
    index = formcast.compile(Place, vocab, cache=False)
    assert not _private_cache.exists()
    assert index.computed_rows == 0  # nothing is built eagerly either
    formcast.compile(SCHEMA, vocab)  # now an entry exists
    before = disk_cache.disk_cache_stats()
    compile_fresh(SCHEMA, vocab, cache=False)
    assert disk_cache.disk_cache_stats() == before


@pytest.mark.parametrize("value", ["0", "false", "off", "No"])
def test_the_environment_switch_turns_it_off(
    value: str, monkeypatch: pytest.MonkeyPatch, _private_cache: Path
) -> None:
    monkeypatch.setenv("FORMCAST_DISK_CACHE", value)
    formcast.compile(Place, vocabulary())
    assert not _private_cache.exists()
    formcast.compile(SCHEMA, vocabulary(), cache=True)  # an explicit argument wins
    assert len(entries(_private_cache)) == 1


def test_a_path_argument_chooses_the_folder(tmp_path: Path, _private_cache: Path) -> None:
    formcast.compile(Place, vocabulary(), cache=tmp_path / "elsewhere")
    assert len(entries(tmp_path / "elsewhere" / "constraints")) == 1
    assert not _private_cache.exists()


def test_an_unwritable_folder_does_not_fail_the_compile(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    index = formcast.compile(Place, vocabulary(), cache=blocker)
    assert index.cursor().allowed_token_ids().size > 0


# ------------------------------------------------------------------ same answers


class Kind(Enum):
    A = "a"
    E = "é"


class Item(BaseModel):
    kind: Kind
    count: int


class Order(BaseModel):
    name: str
    items: list[Item]
    note: str | None = None
    flag: bool = False


CASES: list[tuple[Any, dict[str, Any]]] = [
    (Order, {}),
    (Place, {"whitespace": 2}),
    (SCHEMA, {"mode": "specification"}),
    (list[int], {}),
    (formcast.Regex(r"[a-z]{2,5}(日本|é)?"), {}),
    (formcast.Regex(r"(?:ab|c[0-9]){2,3000}"), {}),  # virtual copies
    (formcast.Regex(r"(?(DEFINE)(?P<d0>(?:[a-z]é?){1,90}))(?&d0)-(?&d0)"), {}),  # calls
    # recursive: pushdown automata
    (Tree, {}),
    (Tree, {"mode": "specification", "whitespace": 1}),
    (formcast.Grammar('root ::= "[" (root ("," root)*)? "]" | [0-9]+ | "null"'), {}),
    (formcast.Grammar(ARITHMETIC), {}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_cached_index_answers_like_a_fresh_one(case: int) -> None:
    output, options = CASES[case]
    vocab = vocabulary()
    fresh = compile_fresh(output, vocab, cache=False, **options)
    formcast.compile(output, vocab, **options)  # writes the entry
    cached = compile_fresh(output, vocab, **options)  # reads it
    assert cached is not fresh and cached.automaton is not fresh.automaton
    assert type(cached.automaton) is type(fresh.automaton)
    assert cached.vocabulary is vocab  # the vocabulary is not stored, it is re-attached

    rng = np.random.default_rng(case)
    for _ in range(20):
        state_fresh = state_cached = fresh.initial_state
        for _ in range(40):
            ids, next_fresh = fresh.row(state_fresh)
            cached_ids, next_cached = cached.row(state_cached)
            assert ids.tolist() == cached_ids.tolist()
            assert fresh.is_accepting(state_fresh) == cached.is_accepting(state_cached)
            assert fresh.min_tokens_to_accept(state_fresh) == cached.min_tokens_to_accept(
                state_cached
            )
            width = vocab.size + 7
            assert np.array_equal(
                fresh.packed_mask(state_fresh, width), cached.packed_mask(state_cached, width)
            )
            assert fresh.forced_bytes(state_fresh) == cached.forced_bytes(state_cached)
            if ids.size == 0:
                break
            pick = int(rng.integers(ids.size))
            state_fresh, state_cached = int(next_fresh[pick]), int(next_cached[pick])


# ------------------------------------------------------------------ saving rows, clearing, size


@pytest.mark.parametrize("output", [Order, Tree], ids=["lazy", "pushdown"])
def test_saving_again_keeps_the_rows_built_since(
    output: type[BaseModel], _private_cache: Path
) -> None:
    vocab = vocabulary()
    index = formcast.compile(output, vocab)
    assert not formcast.save_to_disk_cache(index)  # nothing new yet
    cursor = index.cursor()
    for token in (b'{"', b"name", b'":"', b"a", b'","'):
        cursor.advance(TOKENS.index(token))
    rows = index.computed_rows
    assert rows > 1
    assert formcast.save_to_disk_cache(index)
    loaded = compile_fresh(output, vocab)
    assert loaded.computed_rows == rows
    assert loaded.cursor().allowed_token_ids().tolist() == (
        index.cursor().allowed_token_ids().tolist()
    )
    assert not formcast.save_to_disk_cache(formcast.compile(output, vocab, cache=False))


def test_clear_disk_cache_removes_entries_only(_private_cache: Path) -> None:
    vocab = vocabulary()
    formcast.compile(Place, vocab)
    formcast.compile(SCHEMA, vocab)
    keep = _private_cache.parent / "SmolLM2-135M-Instruct" / "model.safetensors"
    keep.parent.mkdir()
    keep.write_text("a converted model")
    assert formcast.clear_disk_cache() == 2
    assert entries(_private_cache) == [] and keep.exists()
    assert formcast.clear_disk_cache() == 0
    assert formcast.clear_disk_cache(_private_cache.parent / "never-created") == 0


def test_the_folder_is_bounded_least_recently_used_first(
    monkeypatch: pytest.MonkeyPatch, _private_cache: Path
) -> None:
    vocab = vocabulary()
    formcast.compile(SCHEMA, vocab, cache=_private_cache.parent / "sizes")
    (measure,) = entries(_private_cache.parent / "sizes" / "constraints")
    formcast.compile(Place, vocab)
    (first,) = entries(_private_cache)
    os.utime(first, (1_000_000, 1_000_000))  # long unused
    bound = measure.stat().st_size + first.stat().st_size / 2  # room for one of the two
    monkeypatch.setenv("FORMCAST_DISK_CACHE_MAX_MB", str(bound / 2**20))
    compile_fresh(SCHEMA, vocab)
    remaining = entries(_private_cache)
    assert len(remaining) == 1 and remaining[0] != first

    monkeypatch.setattr(disk_cache, "MAX_ENTRY_BYTES", 10)
    formcast.compile(Order, vocab)  # too large to be written at all
    assert entries(_private_cache) == remaining


def test_a_wrong_cache_setting_is_a_user_error() -> None:
    with pytest.raises(formcast.InvalidOptionError, match="expected cache to be"):
        formcast.compile(Place, vocabulary(), cache=3)  # type: ignore[arg-type]


def test_the_environment_switch_may_name_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _private_cache: Path
) -> None:
    monkeypatch.setenv("FORMCAST_DISK_CACHE", str(tmp_path / "suite"))
    formcast.compile(Place, vocabulary())
    assert len(entries(tmp_path / "suite" / "constraints")) == 1
    assert not _private_cache.exists()
    assert formcast.clear_disk_cache() == 1  # the folder compile uses
    monkeypatch.setenv("FORMCAST_DISK_CACHE", "1")
    formcast.compile(SCHEMA, vocabulary())
    assert len(entries(_private_cache)) == 1


def test_key_follows_the_schema_formcast_compiles_for_pydantic_models() -> None:
    """dict[int, str] and dict[str, str] share model_json_schema() but not their regex."""
    import pydantic

    by_int = pydantic.create_model("Seats", seats=(dict[int, str], ...))
    by_str = pydantic.create_model("Seats", seats=(dict[str, str], ...))
    assert by_int.model_json_schema() == by_str.model_json_schema()
    assert constraint_key(by_int) != constraint_key(by_str)


def test_a_long_output_is_described_in_120_characters_without_writing_it_out() -> None:
    """An index's description of a dict or list output is the start of its repr: at most
    120 characters, read from a shortened repr (an enum of 100,000 names, a schema nested
    200 deep: its first levels), never from the whole one."""
    from formcast.compiler import _describe

    names = {"enum": [f"name{k}" for k in range(100_000)]}
    described = _describe(names)
    assert described.startswith("{'enum': ['name0', 'name1', ") and len(described) <= 120
    nested: dict[str, object] = {"type": "string"}
    for depth in range(200):
        nested = {"type": "object", "properties": {f"p{depth}": nested}}
    described = _describe(nested)
    assert (
        described.startswith("{'properties': {'p199': {'properties': {...}")
        and len(described) <= 120
    )
    assert _describe(dict) == "dict"  # a named output keeps its name
