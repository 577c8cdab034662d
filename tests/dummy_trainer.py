"""A stand-in for verl's trainer, for the tests of `dashgen act`.

Given --pid-file it writes its own PID there (as `dashgen export --pid-file` does for the trainer
it supervises). If given a log, it appends one synthetic step per interval to it like verl's file
logger. On SIGTERM it writes the time it was stopped to --stopped-file and exits as a stopped
trainer would (status 143).

    python tests/dummy_trainer.py --stopped-file stopped [--pid-file run.pid] [--log run.jsonl --kind diverging --event-at 60]
"""

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from dashgen.evaluation.synthetic_runs import KINDS, step_line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid-file", type=Path)
    parser.add_argument("--stopped-file", type=Path, required=True)
    parser.add_argument("--log", type=Path)
    parser.add_argument("--kind", choices=KINDS, default="healthy")
    parser.add_argument("--event-at", type=int)
    parser.add_argument("--step-seconds", type=float, default=1.0)
    args = parser.parse_args()

    def stopped(signum, _frame):
        args.stopped_file.write_text(repr(time.time()))
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    if args.pid_file is not None:
        partial = args.pid_file.with_name(args.pid_file.name + ".tmp")
        partial.write_text(f"{os.getpid()}\n")
        os.replace(partial, args.pid_file)
    step = 0
    while True:
        step += 1
        if args.log is not None:
            with open(args.log, "a") as log:
                log.write(step_line(step, args.kind, args.event_at))
        time.sleep(args.step_seconds)


if __name__ == "__main__":
    main()
