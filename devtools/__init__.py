"""letterlog's development tools: the benchmarks (``devtools.bench``, run by ``letterlog
bench``) and the real servers for tests and local runs (``devtools.devservers``, ``python -m
devtools.devservers``).

They live in the repository beside the product's packages (``domain``, ``projections``,
``adapters``, ``spark_replay``) and are not shipped in the wheel (ADR 0057, ADR 0086): a
checkout's editable install (``make``) has them. Nothing of the product imports them, except
the CLI's ``bench`` command, which finds them when they are importable.

May import: anything of letterlog.
"""
