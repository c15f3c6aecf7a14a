"""``python -m formcast``: the command line, as the ``formcast`` script runs it."""

from formcast.cli import main

main()
