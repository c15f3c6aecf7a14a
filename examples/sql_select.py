"""A small SQL ``SELECT`` grammar in Lark syntax: questions in English become queries
over a known table, whose columns and keywords the grammar fixes.

Keywords are case-insensitive (``"select"i``); column and table names come from the
schema; values are numbers or quoted strings. The grammar has no recursion (conditions
are a flat list joined by AND/OR), so it compiles to a plain automaton.

    python examples/sql_select.py
"""

from __future__ import annotations

import formcast

SELECT = formcast.Grammar(
    r"""
start: "SELECT"i " " columns " " "FROM"i " " TABLE where? order? limit? ";"
columns: "*" | COLUMN (", " COLUMN)*
where: " " "WHERE"i " " condition ((" AND"i " " | " OR"i " ") condition)*
condition: COLUMN " " OPERATOR " " value
value: INT | "'" /[A-Za-z .-]{1,30}/ "'"
order: " " "ORDER BY"i " " COLUMN (" ASC"i | " DESC"i)?
limit: " " "LIMIT"i " " INT
TABLE: "employees"
COLUMN: "name" | "department" | "city" | "salary" | "age"
OPERATOR: "=" | "<>" | "<" | ">" | "<=" | ">="
%import common.INT
""",
    syntax="lark",
)

INSTRUCTIONS = (
    "Write one SQL query over the table employees(name, department, city, salary, age) "
    "that answers the question."
)

QUESTIONS = [
    "Who works in the sales department?",
    "List the names and salaries of the five best paid employees.",
]


def main() -> int:
    for question in QUESTIONS:
        query = formcast.extract(SELECT, question, instructions=INSTRUCTIONS, max_new_tokens=48)
        print(f"{question}\n  -> {query}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
