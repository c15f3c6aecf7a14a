"""Closed information extraction (cIE): triplets whose subjects, relations and objects
come from fixed lists, as in the cIE grammar of transformers-CFG's examples.

The GBNF grammar gives the triplet format; the entity and relation lists are embedded
with ``rules=`` (each becomes a choice of its strings), so a triplet can only name known
entities and relations.

    python examples/closed_extraction.py
"""

from __future__ import annotations

import formcast

PEOPLE = ["Marie Curie", "Pierre Curie", "Albert Einstein", "Isaac Newton"]
PLACES = ["Warsaw", "Paris", "Ulm", "Woolsthorpe", "Poland", "France", "Germany", "England"]
RELATIONS = ["was born in", "died in", "lived in", "worked in", "was married to"]

TRIPLETS = formcast.Grammar(
    r"""
root    ::= triplet (" [e] " triplet){0,3}
triplet ::= "[s] " person " [r] " relation " [o] " (place | person)
""",
    rules={"person": PEOPLE, "place": PLACES, "relation": RELATIONS},
)

INSTRUCTIONS = (
    "List the facts of the text as triplets: [s] subject [r] relation [o] object, separated by [e]."
)

TEXT = (
    "Marie Curie was born in Warsaw in 1867. She moved to Paris, where she married "
    "Pierre Curie in 1895."
)


def main() -> int:
    answer = formcast.extract(TRIPLETS, TEXT, instructions=INSTRUCTIONS, max_new_tokens=64)
    for triplet in answer.split(" [e] "):
        subject, rest = triplet.removeprefix("[s] ").split(" [r] ")
        relation, obj = rest.split(" [o] ")
        print(f"triplet: ({subject} | {relation} | {obj})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
