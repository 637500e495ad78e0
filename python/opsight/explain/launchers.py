"""How the zoo's model processes start, end and are killed: :class:`ForkServerLauncher` forks
them from the fork server (:mod:`.zygote`), :class:`ProcessLauncher` starts each afresh
(``python -m opsight.explain.child``) when the server cannot start. Both hand back a handle
that ``poll`` (exit status or None), ``kill`` (the whole process group) take.

Thread-safety: a launcher is used from one thread (the fork server's reader thread is its
own, behind a condition variable).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


class ProcessLauncher:
    """A process per model, started afresh (``python -m opsight.explain.child``): what the
    fork server falls back to."""

    def __init__(self, environment: dict[str, str]) -> None:
        self._environment = environment

    def start(self, argv: list[str], log_path: str) -> subprocess.Popen:
        with open(log_path, "wb") as log:
            return subprocess.Popen([sys.executable, "-m", "opsight.explain.child", *argv],
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=self._environment,
                                    start_new_session=True)

    @staticmethod
    def poll(process: subprocess.Popen) -> int | None:
        return process.poll()

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()

    def close(self) -> None:
        pass


class ForkServerLauncher:
    """Children forked by the fork server (:mod:`.zygote`), which imported opsight and torch
    once. A reader thread collects its answers; a child is its pid, its end the status the
    server reports. Raises OSError/RuntimeError from the constructor when the server cannot
    start (the runner then starts processes afresh)."""

    def __init__(self, environment: dict[str, str], log_path: str) -> None:
        import threading

        with open(log_path, "wb") as log:
            self._server = subprocess.Popen(
                [sys.executable, "-m", "opsight.explain.zygote"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, env=environment)
        self._condition = threading.Condition()
        self._pids: dict[int, int] = {}        # request id -> pid
        self._statuses: dict[int, int] = {}    # pid -> exit status
        self._closed = False
        self._ready = False
        self._next_id = 0
        self._reader = threading.Thread(target=self._read, name="opsight-explain-forks",
                                        daemon=True)
        self._reader.start()
        began = time.perf_counter()
        with self._condition:
            if not self._condition.wait_for(lambda: self._ready or self._closed, 120):
                self.close()
                raise RuntimeError("the fork server was not ready within 120 s")
            if not self._ready:
                raise RuntimeError("the fork server ended before it was ready")
        #: Seconds the server took to start (Python, opsight and torch imported once).
        self.startup_seconds = time.perf_counter() - began

    def _read(self) -> None:
        assert self._server.stdout is not None
        for line in self._server.stdout:
            message = json.loads(line)
            with self._condition:
                if "ready" in message:
                    self._ready = True
                elif "status" in message:
                    self._statuses[message["pid"]] = message["status"]
                else:
                    self._pids[message["id"]] = message["pid"]
                self._condition.notify_all()
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def start(self, argv: list[str], log_path: str) -> int:
        self._next_id += 1
        request = self._next_id
        assert self._server.stdin is not None
        self._server.stdin.write((json.dumps({"id": request, "argv": argv, "log": log_path})
                                  + "\n").encode())
        self._server.stdin.flush()
        with self._condition:
            if not self._condition.wait_for(lambda: request in self._pids or self._closed, 60):
                raise RuntimeError("the fork server did not answer within 60 s")
            if request not in self._pids:
                raise RuntimeError("the fork server ended")
            return self._pids.pop(request)

    def poll(self, pid: int) -> int | None:
        with self._condition:
            if pid in self._statuses:
                return self._statuses[pid]
            if self._closed:  # the server died with its children unreported
                return -signal.SIGKILL
        return None

    def kill(self, pid: int) -> None:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
                break
            except (ProcessLookupError, PermissionError):
                continue
        with self._condition:  # reaped and reported by the server
            self._condition.wait_for(lambda: pid in self._statuses or self._closed, 10)

    def close(self) -> None:
        if self._server.stdin is not None:
            try:
                self._server.stdin.close()
            except OSError:
                pass
        try:
            self._server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait()
