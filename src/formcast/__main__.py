"""``python -m formcast``: the command line, as the ``formcast`` script runs it."""

from formcast.pipelines.cli import main

main()
