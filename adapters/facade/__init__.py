"""The parts of the embedded facade: ``adapters.embedded.Letterlog`` is made of them, one
module per kind of business: ``deliveries`` (bringing mail in, extraction), ``messages``
(what a client does to a message), ``mailboxes`` (an account's mailboxes, its quota),
``access`` (rights and virtual roots), ``erasure`` (purge and the right to erasure),
``reading`` (the log, past read models, views, a message's body, upkeep). ``parts`` names
what each part works on, which ``Letterlog`` sets.

May import: ``domain``, ``projections`` and the adapters below the entry points (the log,
the stores, the read side, lifecycle, extraction); never ``adapters.bootstrap``,
``adapters.embedded`` (but for annotations), the CLI, the processes or the tools.
"""
