"""The zoo's fork server (``python -m opsight.explain.zygote``): a process that imports opsight
and torch once (and has started and stopped a session once), then forks one child per model on request, so that no model pays for a
Python start and a torch import of its own (measured: about 1 s of each model's time, and
0.1 s of opsight's own per model).

Protocol, one JSON object per line: the server says ``{"ready": true}`` once it has imported
what it preloads; the parent writes ``{"id": N, "argv": [...], "log":
PATH}`` on the server's stdin; the server answers on its stdout ``{"id": N, "pid": P}``
once forked and ``{"pid": P, "status": S}`` when that child ends (S as
``subprocess.Popen.returncode``: negative for a signal). A child starts its own session (a
process group the parent can kill whole), sends its stdout and stderr to the log and runs
:func:`opsight.explain.child.main` with ``argv``.

The server is single-threaded (a fork copies only the forking thread, and a lock another
thread held would stay locked in the child), writes with ``os.write`` (no buffered object
whose lock a child could inherit) and has run no torch operator (torch's thread pools start
with the first). It ends when its stdin closes, after its children.
"""

from __future__ import annotations

import json
import os
import select
import sys


def _send(message: dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(1, data):]


def _status(wait_status: int) -> int:
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def _run_child(argv: list[str], log: str) -> None:
    """In the forked child: never returns."""
    status = 1
    try:
        os.setsid()
        descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(descriptor, 1)
        os.dup2(descriptor, 2)
        os.close(descriptor)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        from .child import main

        status = main(argv)
    except BaseException:  # noqa: BLE001 - the model's process: report, then end
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def serve() -> int:
    import opsight  # what every child needs, imported once here

    try:
        import torch  # noqa: F401
    except ImportError:
        pass  # each child then reports it
    # A session's first start sets up what later ones reuse (about 50 ms): once, here. It
    # stops before any fork, its threads with it.
    with opsight.profile(label="opsight explain fork server"):
        pass
    _send({"ready": True})
    children: set[int] = set()
    pending = b""
    stdin_open = True
    while stdin_open or children:
        while children:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            children.discard(pid)
            _send({"pid": pid, "status": _status(wait_status)})
        if not stdin_open:
            select.select([], [], [], 0.02)
            continue
        readable, _, _ = select.select([0], [], [], 0.02)
        if not readable:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            stdin_open = False
            continue
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _run_child(request["argv"], request["log"])
            children.add(pid)
            _send({"id": request["id"], "pid": pid})
    return 0


if __name__ == "__main__":
    sys.exit(serve())
