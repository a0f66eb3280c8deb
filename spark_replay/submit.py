"""The Spark driver program: ``spark-submit [options] spark_replay/submit.py COMMAND ...``.

Commands (settings from ``LETTERLOG_`` variables, as everywhere in letterlog):

    rebuild (PROJECTION... | --all) [--until-position P | --as-of ISO8601] [--view NAME]
    export (PROJECTION | events) DIR [--personal]
    bench [--events N] [--plot PNG] [--no-hbase] [--no-other-layout] [--repeat N]
          [--accounts N]
                                                   (python -m spark_replay only)

Each prints one JSON object on stdout and, with ``--result FILE``, writes it to FILE (what
``letterlog`` hands the driver and reads back: no scraping of Spark's output). A missing
data directory or event store is refused (exit 2) before Spark starts; a second rebuild of a
store while one runs too (the rebuild lock). ``letterlog rebuild --engine spark``
and ``letterlog export`` run this file through the pyspark package's ``spark-submit``; it
runs as well with ``python -m spark_replay``. A letterlog error (a corrupt event, a bad
argument) is one line ``letterlog: error: ...`` on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.bootstrap.spark import load_settings, python_exception
from domain.errors import LetterlogError
from spark_replay.frames import export
from spark_replay.job import rebuild
from spark_replay.watch import print_sink, set_sink


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spark_replay", description=__doc__.split("\n")[0])
    parser.add_argument("--master", help="Spark master URL (else spark-submit's --master)")
    parser.add_argument("--result", metavar="FILE",
                        help="also write the JSON result to FILE (written whole, then renamed)")
    parser.add_argument("--progress", action="store_true",
                        help="print the job's progress as `letterlog-progress {json}` lines")
    sub = parser.add_subparsers(dest="command", required=True)
    rebuild = sub.add_parser("rebuild", help="rebuild projections, blue/green")
    rebuild.add_argument("projections", nargs="*")
    rebuild.add_argument("--all", action="store_true")
    rebuild.add_argument("--until-position", type=int, default=None)
    rebuild.add_argument("--as-of", default=None)
    rebuild.add_argument("--view", default=None)
    bench = sub.add_parser("bench", help="single process vs Spark local[1] / local[2]")
    bench.add_argument("--events", type=int, default=1_000_000)
    bench.add_argument("--plot", default=None)
    bench.add_argument("--no-hbase", action="store_true")
    bench.add_argument("--repeat", type=int, default=1,
                       help="run every rebuild N times; the fastest counts")
    bench.add_argument("--no-other-layout", action="store_true",
                       help="skip the rebuilds with the layout before (by account only)")
    bench.add_argument("--accounts", type=int, default=None,
                       help="accounts in the log (1: every event in one account)")
    export = sub.add_parser("export", help="write a projection or the events as Parquet")
    export.add_argument("what")
    export.add_argument("directory")
    export.add_argument("--personal", action="store_true",
                        help="open the sealed personal parts of the events (a copy erasure "
                             "cannot reach)")
    return parser


def run(argv: Sequence[str]) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    if args.progress:
        set_sink(print_sink)
    settings = load_settings()
    if args.command == "rebuild":
        names = None if args.all or not args.projections else list(args.projections)
        return rebuild(settings, names, master=args.master, until=args.until_position,
                       as_of=args.as_of, view=args.view)
    if args.command == "bench":
        # local: the Spark benchmark is a development tool (it imports devtools), not in the wheel
        from spark_replay.bench import bench_spark_rebuild

        return bench_spark_rebuild(args.events, Path(args.plot) if args.plot else None,
                                   hbase=not args.no_hbase,
                                   compare_layouts=not args.no_other_layout,
                                   repeat=args.repeat, accounts=args.accounts)
    return export(settings, args.what, args.directory, personal=args.personal,
                  master=args.master)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        result = run(argv)
    except (LetterlogError, KeyError) as e:
        sys.stderr.write(f"letterlog: error: {str(e).strip(chr(34) + chr(39))}\n")
        return int(getattr(e, "exit_code", 2))
    except Exception as e:  # the job failed in Spark: its traceback, then one line last
        traceback.print_exc()
        text = str(e)
        cause = python_exception(text) or next(
            (line.strip() for line in text.splitlines() if line.strip()), type(e).__name__)
        sys.stderr.write(f"letterlog: error: the Spark job failed: {cause}\n")
        return 1
    text = json.dumps(result, default=str, sort_keys=True)
    target = _parser().parse_known_args(argv)[0].result
    if target:
        spare = Path(f"{target}.tmp")
        spare.write_text(text + "\n")
        spare.replace(target)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
