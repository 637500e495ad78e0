"""``opsight ctl``: switch the tracing of a running traced process on or off, trace its
next N requests, dump its flight recorder, or list the traced processes (through the
control files of ``opsight._session.control``)."""

from __future__ import annotations

import sys

from .arguments import ArgumentParser
from ..exit_codes import USAGE_ERROR

def ctl_command(arguments: list[str]) -> int:
    from .._session import control as _control

    parser = ArgumentParser(
        prog="opsight ctl",
        description="Switch the tracing of a running traced process on or off (its targets are "
                    "unwrapped while off, so they cost nothing), trace only the next N HTTP "
                    "requests it serves (`requests N`), write what its flight recorder holds "
                    "(`dump`, with opsight run --ring), or list traced processes.")
    parser.add_argument("pid", help="process id, or 'list'")
    parser.add_argument("state", nargs="?", choices=("on", "off", "status", "requests", "dump"),
                        default="status")
    parser.add_argument("count", nargs="?", type=int,
                        help="with `requests`: how many requests to trace before switching off")
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
    request = options.state
    if request == "requests":
        from .._session.live_control import MAX_REQUESTS

        if options.count is None or not 1 <= options.count <= MAX_REQUESTS:
            print("opsight ctl: requests needs a count in [1, 1000000000] "
                  "(opsight ctl PID requests 100)", file=sys.stderr)
            return USAGE_ERROR
        request = f"requests {options.count}"
    elif options.count is not None:
        print(f"opsight ctl: a count goes with `requests` only, not `{request}`", file=sys.stderr)
        return USAGE_ERROR
    if request == "dump":
        try:
            path = _control.request_dump(pid, max(options.timeout, 30.0))
        except RuntimeError as error:
            print(f"opsight ctl: {error}", file=sys.stderr)
            return 1
        print(f"process {pid}: flight recorder dumped to {path}")
        return 0
    try:
        state = _control.request(pid, request, options.timeout)
    except RuntimeError as error:
        print(f"opsight ctl: {error}", file=sys.stderr)
        return 1
    if state.startswith("requests "):
        print(f"process {pid}: tracing on for the next {state.split()[1]} requests")
    else:
        print(f"process {pid}: tracing {state}")
    return 0
