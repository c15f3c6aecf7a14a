"""Pipelines: rows of records in, the same rows with the extraction's columns out.

Takes input rows (JSON lines, folders, stdin) and gives each row its value, error,
finish reason and token counts. It holds those columns (:mod:`.rows`) and the
``formcast extract`` command (:mod:`.cli`); extraction over Ray Data is the public
module :mod:`formcast.ray`, which reads these columns.

May import ``formcast.extraction`` and everything below it.
"""
