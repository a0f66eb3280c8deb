"""The composition root: the one place that builds letterlog's parts from ``Settings``.
Nothing here runs at import time; each function connects when called. A door per runtime,
a module per part it is built of; a module imports its part's libraries at its top, and a
door imports a part only some stores need (HBase's clients, the read side, the user
directory, the purge jobs) where it chooses it:

- ``store``: the embedded store (``Letterlog.open``, the embedders' and the CLI's door):
  ``letterlog(settings, facade=Letterlog)``: the event log, the payload store, the command
  side and the read models, handed to the facade class ``Letterlog.open`` passes;
- ``scaleout``: the scale-out processes (``letterlog relay``, ``letterlog worker``,
  ``letterlog lag``): ``relay(settings)``, the log and its keys, ``stream_tables``;
- ``spark``: the Spark job's door (ADR 0094);

and the parts:

- ``eventstore``: the event log (SQLite or PostgreSQL), its data keys, the key cluster;
- ``payloads``: the payload store (files, or HBase's table then this host's files);
- ``commandside``: ``Mailstore`` with the settings' limits, and its quota rule;
- ``tables``: the read models' tables, the stream workers' tables, the projection host;
- ``hbase``: the scale-out shape's HBase (tables, payload table; happybase, thriftpy2);
- ``purging``: the purge jobs on a read side (``letterlog purge run``, ``letterlog purger``);
- ``directories``: the user directory (passwd-file or LDAP) and a user's groups.
"""
