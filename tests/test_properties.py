"""Property: for generated Pydantic models and random logits, decoding always ends in
output that parses, validates against the JSON Schema (jsonschema) and the model class.

A stand-in "model" returns random logits, so every allowed token gets its chance; the
budget is kept tight so that budget-safe endings are exercised too.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Annotated, Any, Literal, Optional

import jsonschema
import pydantic
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from formcast.compiler import compile as compile_index
from formcast.decode.logits import ForcedTokenizer, SamplingOptions, generate
from formcast.vocabulary import Vocabulary


class _NoCache:
    def batch_select_indices(self, indices: torch.Tensor) -> None:
        del indices


class RandomLogitsModel:
    """Quacks like a causal LM: random logits, no state."""

    device = torch.device("cpu")

    def __init__(self, width: int, seed: int) -> None:
        self.width = width
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, input_ids: torch.Tensor, **_: Any) -> SimpleNamespace:
        logits = torch.randn(input_ids.shape[0], 1, self.width, generator=self.generator) * 4
        return SimpleNamespace(logits=logits, past_key_values=_NoCache())


LEAVES: list[Any] = [
    str,
    int,
    float,
    bool,
    Annotated[str, Field(min_length=2, max_length=5)],
    Annotated[int, Field(ge=-20, le=300)],
    Annotated[int, Field(gt=5)],
    Annotated[str, Field(pattern=r"^[A-Z]{2}[0-9]{1,3}$")],
    Literal["red", "green", "blue"],
    Literal[1, 2, 3],
]


def _types(depth: int) -> st.SearchStrategy[Any]:
    leaf = st.sampled_from(LEAVES)
    if depth == 0:
        return leaf
    inner = _types(depth - 1)
    return st.one_of(
        leaf,
        inner.map(lambda t: Optional[t]),  # noqa: UP045 - runtime construction
        st.tuples(inner, st.integers(0, 3)).map(
            lambda p: Annotated[list[p[0]], Field(max_length=p[1])]
        ),  # type: ignore[name-defined]
        _models(depth - 1),
    )


def _models(depth: int) -> st.SearchStrategy[type[pydantic.BaseModel]]:
    fields = st.lists(st.tuples(_types(depth), st.booleans()), min_size=1, max_size=4)

    def build(spec: list[tuple[Any, bool]]) -> type[pydantic.BaseModel]:
        definitions: dict[str, Any] = {}
        for i, (kind, required) in enumerate(spec):
            definitions[f"f{i}"] = (kind, ...) if required else (Optional[kind], None)  # noqa: UP045
        return pydantic.create_model("Generated", **definitions)

    return fields.map(build)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(model=_models(2), seed=st.integers(0, 2**16), slack=st.integers(0, 40))
def test_random_logits_always_produce_valid_output(
    model: type[pydantic.BaseModel], seed: int, slack: int, vocabulary: Vocabulary, tokenizer: Any
) -> None:
    index = compile_index(model, vocabulary)
    budget = index.min_tokens_to_accept(index.initial_state) + slack
    results = generate(
        RandomLogitsModel(vocabulary.size + 64, seed),
        [[1, 2, 3]] * 2,
        [index.cursor(), index.cursor()],
        max_new_tokens=budget,
        forced_tokenizer=ForcedTokenizer(tokenizer, vocabulary),
        sampling=SamplingOptions(temperature=1.0, seed=seed),
    )
    schema = model.model_json_schema()
    for result in results:
        assert result.completion_tokens <= budget
        document = json.loads(result.text)
        jsonschema.validate(document, schema)
        model.model_validate_json(result.text)
