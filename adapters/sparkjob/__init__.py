"""The Spark job seen from the CLI: starting it (``launch``: spark-submit, the master, its
``--conf``, the log of a failed run) and letterlog packed for a cluster's nodes (``package``).
The job itself is ``spark_replay``; its door into the store is ``adapters.bootstrap.spark``.

May import: ``domain``, ``adapters.config``, ``adapters.files``; never ``bootstrap``,
``spark_replay``, ``cli`` or ``devtools``.
"""
