"""Typed functions whose body is a language model: ``@formcast.function``.

The docstring is the instruction, the arguments are the text, and the return annotation
is the output type: here a Pydantic model and a ``Literal`` choice.

    python examples/decorator.py
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

import formcast


class Contact(BaseModel):
    name: str
    email: str
    phone: str


@formcast.function(max_new_tokens=96)
def contact_of(signature: str) -> Contact:
    """Extract the contact details of the person who signed this email."""


@formcast.function(max_new_tokens=40)
def department(email: str) -> Literal["billing", "shipping", "technical support"]:
    """Which department should handle this customer email?"""


SIGNATURE = """Thanks again for the quick reply.

Best regards,
Maria Lopez
Purchasing, Lopez & Sons
maria.lopez@example.com | +34 612 345 678
"""

EMAIL = "Hello, I was charged twice for order 1182. Could you refund one of the payments?"


def main() -> int:
    contact = contact_of(SIGNATURE)  # -> Contact
    print("contact_of ->", repr(contact))
    route = department(EMAIL)  # -> one of the three strings
    print("department ->", repr(route))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
