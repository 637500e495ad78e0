"""``opsight ctl``: switch the tracing of a running traced process on or off, or list the
traced processes (through the control files of ``opsight._session.control``)."""

from __future__ import annotations

import sys

from .arguments import ArgumentParser
from .exit_codes import USAGE_ERROR

def ctl_command(arguments: list[str]) -> int:
    from .._session import control as _control

    parser = ArgumentParser(
        prog="opsight ctl",
        description="Switch the tracing of a running traced process on or off (its targets are "
                    "unwrapped while off, so they cost nothing), or list traced processes.")
    parser.add_argument("pid", help="process id, or 'list'")
    parser.add_argument("state", nargs="?", choices=("on", "off", "status"), default="status")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the switch")
    options = parser.parse_args(arguments)
    if options.pid == "list":
        processes, problems = _control.traced_processes_and_problems()
        for problem in problems:
            print(f"opsight ctl: {problem}: not used", file=sys.stderr)
        if not processes:
            print("no traced processes")
        for pid, state in processes:
            print(f"{pid}\t{state}")
        return 0
    try:
        pid = int(options.pid)
    except ValueError:
        pid = 0
    if not 0 < pid < 1 << 31:  # a pid_t
        print(f"opsight ctl: {options.pid!r} is not a process id", file=sys.stderr)
        return USAGE_ERROR
    try:
        state = _control.request(pid, options.state, options.timeout)
    except RuntimeError as error:
        print(f"opsight ctl: {error}", file=sys.stderr)
        return 1
    print(f"process {pid}: tracing {state}")
    return 0
