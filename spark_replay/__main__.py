"""``python -m spark_replay COMMAND ...``: the driver program of ``submit.py``."""

import sys

from spark_replay.submit import main

sys.exit(main())
