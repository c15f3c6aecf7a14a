"""Files checked by ``mypy --strict``, never run: they pin down formcast's public types.

``correct_calls.py`` must type-check and asserts the types its calls return;
``option_errors.py`` holds mistakes a type checker must catch, each marked
``# type: ignore[<code>]`` so that mypy fails (unused ignore) if one stops being an error.
"""
