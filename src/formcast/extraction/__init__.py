"""Extraction: an output type and a text in, a validated value out.

Takes what users call with (an output type, a text, a model or the default one) and
gives an :class:`~formcast.extraction.results.ExtractionResult`. It holds the
:class:`~formcast.extraction.extractor.Extractor`, its prompts, options, attempts and
results, the scheduler of a call's rows and the function decorator.

May import every stage below it (``compiler``, ``constraint``, ``index``, ``cursor``,
``decode``, ``models``); never ``formcast.pipelines`` or ``formcast.api``.
"""
