"""What the logging bridge (opsight.integrations.logs) costs per logged record, against a
baseline measured in the same run.

A logger with a ``NullHandler`` (level DEBUG, not propagating: what a program's own handler
costs is not the point) logs ``--records`` records, ``log.info("request %d done", i)``,
in a loop timed whole, inside one span. The variants alternate, in a fresh random order
each round, for ``--rounds`` rounds:

  untraced          no recording session: logging alone
  session, off      a session records, OPSIGHT_LOGS=off: the bridge is not hooked
  session, bridge   a session records, the bridge at its default (INFO): every record is
                    recorded (an instant and its arguments in the trace)
  below the level   the same session, ``log.debug(...)``: records the bridge lets pass
                    unrecorded (the wrapper's level test only)
  with exception    the bridge on, ``log.exception(...)`` inside ``except``: the traceback
                    formatted once more (untraced baseline: the same call untraced)

Each cell is the median over the rounds of ns per record; a cost is the difference from the
baseline measured in the same round (the median of the differences): from ``untraced``,
and for the bridge's variants also from ``session, off`` (what the bridge itself adds to a
session that records).
A program that logs nothing pays nothing: the bridge acts only inside
``Logger.callHandlers``, which no record means no call of.

Run: .venv/bin/python benchmarks/python/logging_bridge.py [--records 20000] [--rounds 9]

This is a benchmark, not a test: nothing here asserts on a time.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import statistics
import time

import opsight


def make_logger() -> logging.Logger:
    logger = logging.getLogger("bench.bridge")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(logging.NullHandler())
    return logger


def loop(logger: logging.Logger, records: int, kind: str) -> float:
    """ns per record for `records` calls of the kind asked."""
    clock = time.perf_counter_ns
    if kind == "info":
        info = logger.info
        begin = clock()
        for index in range(records):
            info("request %d done", index)
        return (clock() - begin) / records
    if kind == "debug":
        debug = logger.debug
        begin = clock()
        for index in range(records):
            debug("request %d done", index)
        return (clock() - begin) / records
    exception = logger.exception
    begin = clock()
    for index in range(records):
        try:
            raise ValueError(index)
        except ValueError:
            exception("request %d failed", index)
    return (clock() - begin) / records


def run_variant(name: str, logger: logging.Logger, records: int) -> float:
    kind = {"below the level": "debug", "with exception": "exception",
            "untraced, exception": "exception"}.get(name, "info")
    if name.startswith("untraced"):
        return loop(logger, records, kind)
    previous = os.environ.get("OPSIGHT_LOGS")
    os.environ["OPSIGHT_LOGS"] = "off" if name == "session, off" else "INFO"
    try:
        with opsight.profile(buffer_mb=256):
            with opsight.span("requests"):
                return loop(logger, records, kind)
    finally:
        if previous is None:
            os.environ.pop("OPSIGHT_LOGS", None)
        else:
            os.environ["OPSIGHT_LOGS"] = previous


VARIANTS = ("untraced", "session, off", "session, bridge", "below the level",
            "untraced, exception", "with exception")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20000, help="records per variant and round")
    parser.add_argument("--rounds", type=int, default=9)
    arguments = parser.parse_args()
    os.environ["OPSIGHT_TORCH"] = "off"
    logger = make_logger()
    exception_records = max(1, arguments.records // 10)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for name in VARIANTS:  # warm-up
        run_variant(name, logger, 200)
    for _ in range(arguments.rounds):
        order = list(VARIANTS)
        random.shuffle(order)
        for name in order:
            count = exception_records if "exception" in name else arguments.records
            times[name].append(run_variant(name, logger, count))
    print(f"opsight {opsight.__version__}, Python {platform.python_version()}, "
          f"{arguments.records} records per variant ({exception_records} with an exception), "
          f"{arguments.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    baseline = {"untraced": "untraced", "session, off": "untraced",
                "session, bridge": "untraced", "below the level": "untraced",
                "untraced, exception": "untraced, exception",
                "with exception": "untraced, exception"}
    def difference(name: str, base: str) -> float:
        return statistics.median(a - b for a, b in zip(times[name], times[base]))

    print(f"{'variant':<22}{'ns/record':>12}{'vs untraced':>14}{'vs session, off':>18}")
    for name in VARIANTS:
        median = statistics.median(times[name])
        extra = "" if baseline[name] == name else f"{difference(name, baseline[name]):+14.0f}"
        if name in ("session, bridge", "below the level"):
            extra += f"{difference(name, 'session, off'):+18.0f}"
        print(f"{name:<22}{median:>12.0f}{extra}")


if __name__ == "__main__":
    main()
