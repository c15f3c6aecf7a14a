"""Decoding: a token index and a model in, generated tokens out.

Takes a :class:`~formcast.index.TokenIndex` (through :class:`~formcast.cursor.Cursor`)
and a causal language model; gives each row's :class:`~formcast.decode.records.Generation`.
It holds the masked, batched generation loop (:mod:`.batching`, :mod:`.logits`), the
device masks (:mod:`.masks`), the KV caches (:mod:`.kvcache`, :mod:`.slotcache`), how
passes over fixed slots run (:mod:`.engine`: CUDA graphs by default on CUDA), how a model
is called (:mod:`.forward`: the cache keyword, the attention kernels) and field-level
steering (:mod:`.jsonscan`, :mod:`.steering`).

May import the compile and index stages (``errors``, ``index``, ``cursor``,
``vocabulary``) and torch; never ``formcast.extraction`` or ``formcast.pipelines``.
Only :mod:`.records` and :mod:`.forcing` are torch-free, so the extractor's plain
records can use them without loading torch.
"""
