"""``OPSIGHT_OUTPUT=trace.json python app.py``: tracing an unchanged program from the
environment (the start-up hook installed with the package), and child processes of a traced
program (subprocess, os.fork, multiprocessing with fork and spawn) landing in one run."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import OPSIGHT, PYTHON, opsight_run, run, spans_of, write

DECORATED = """
    import os
    import sys
    import opsight

    @opsight.trace
    def step(n):
        return n + 1

    print("pid", os.getpid(), "steps", [step(n) for n in range(3)])
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def test_output_file_written_at_exit(tmp_path):
    write(tmp_path, "app.py", DECORATED)
    completed = run([PYTHON, "app.py", "6"], tmp_path, OPSIGHT_OUTPUT="trace.json")
    assert completed.returncode == 6
    assert "steps [1, 2, 3]" in completed.stdout
    assert completed.stderr == ""
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert sum(event.get("name") == "step" for event in events) == 3


def test_percent_p_is_the_pid(tmp_path):
    write(tmp_path, "app.py", DECORATED)
    completed = run([PYTHON, "app.py"], tmp_path, OPSIGHT_OUTPUT="trace.%p.opsight")
    assert completed.returncode == 0
    pid = int(completed.stdout.split()[1])
    frame = spans_of(tmp_path / f"trace.{pid}.opsight")
    assert list(frame["name"]) == ["step"] * 3
    assert (frame["pid"] == pid).all()


def test_untraced_without_the_variable(tmp_path):
    write(tmp_path, "app.py", """
        import sys
        print("opsight._session.startup" in sys.modules)
    """)
    assert run([PYTHON, "app.py"], tmp_path).stdout == "False\n"
    assert run([PYTHON, "app.py"], tmp_path, OPSIGHT_OUTPUT="t.json").stdout == "True\n"


def test_targets_from_the_environment(tmp_path):
    write(tmp_path, "lib.py", """
        def compute(x):
            return x * 2
    """)
    write(tmp_path, "app.py", """
        import lib
        print(lib.compute(4), type(lib.compute).__name__)
    """)
    write(tmp_path, "targets.yaml", """
        - {module: lib, function: compute}
        - {module: lib, function: absent}
    """)
    completed = run([PYTHON, "app.py"], tmp_path, OPSIGHT_OUTPUT="t.opsight",
                    OPSIGHT_TARGETS="targets.yaml")
    assert completed.stdout == "8 TracedFunction\n"
    assert completed.stderr == ("opsight: target never resolved: targets.yaml:2 (entry 2): "
                                "'absent' not found in module 'lib'\n")
    assert list(spans_of(tmp_path / "t.opsight")["name"]) == ["compute"]


def test_problems_never_break_the_program(tmp_path):
    write(tmp_path, "app.py", DECORATED)
    write(tmp_path, "bad.yaml", "- {module: lib}\n")
    completed = run([PYTHON, "app.py", "2"], tmp_path, OPSIGHT_OUTPUT="ok.opsight",
                    OPSIGHT_TARGETS="bad.yaml")
    assert completed.returncode == 2 and "steps [1, 2, 3]" in completed.stdout
    assert completed.stderr.startswith("opsight: OPSIGHT_TARGETS: bad.yaml:1: entry 1: "
                                       "field 'function'")
    assert (tmp_path / "ok.opsight").exists()

    completed = run([PYTHON, "app.py", "3"], tmp_path,
                    OPSIGHT_OUTPUT=str(tmp_path / "missing-dir" / "t.json"))
    assert completed.returncode == 3 and "steps [1, 2, 3]" in completed.stdout
    assert completed.stderr.startswith("opsight: OPSIGHT_OUTPUT:")

    completed = run([PYTHON, "app.py"], tmp_path, OPSIGHT_OUTPUT="buf.opsight",
                    OPSIGHT_BUFFER_MB="lots")
    assert completed.returncode == 0
    assert "ignoring OPSIGHT_BUFFER_MB=lots" in completed.stderr


def test_the_opsight_command_itself_is_not_traced(tmp_path):
    completed = run([PYTHON, "-m", "opsight", "--version"], tmp_path,
                    OPSIGHT_OUTPUT="cli.opsight")
    assert completed.returncode == 0
    assert not (tmp_path / "cli.opsight").exists()


def test_child_of_a_traced_process_writes_its_own_file(tmp_path):
    write(tmp_path, "app.py", """
        import subprocess, sys, opsight

        @opsight.trace
        def parent_step():
            child = subprocess.run([sys.executable, "child.py"], capture_output=True, text=True)
            return int(child.stdout)

        print(parent_step())
    """)
    write(tmp_path, "child.py", """
        import os, opsight
        opsight.trace(lambda: None)()
        print(os.getpid())
    """)
    completed = run([PYTHON, "app.py"], tmp_path, OPSIGHT_OUTPUT="run.opsight")
    child_pid = int(completed.stdout)
    # The call that started the child is a span of its own (its flow goes to the child's
    # first span: opsight.integrations.handoffs).
    assert list(spans_of(tmp_path / "run.opsight")["name"]) == ["parent_step", "subprocess python"]
    child_frame = spans_of(tmp_path / f"run.{child_pid}.opsight")
    assert list(child_frame["name"]) == ["<lambda>"]
    assert (child_frame["pid"] == child_pid).all()


CHILDREN = """
    import json
    import multiprocessing
    import os
    import subprocess
    import sys

    import work

    def task(n):
        return os.getpid(), work.compute(n)

    def with_pool(method):
        with multiprocessing.get_context(method).Pool(2) as pool:
            return pool.map(task, [1, 2, 3])

    def with_process(method, queue_method=None):
        context = multiprocessing.get_context(method)
        queue = context.SimpleQueue()
        process = context.Process(target=report, args=(queue,))
        process.start()
        pid = queue.get()
        process.join()
        assert process.exitcode == 0
        return pid

    def report(queue):
        queue.put(task(7)[0])

    def with_fork():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child leaves normally, through its atexit handlers
            os.close(read)
            task(9)
            os.write(write, b"done")
            os.close(write)
            return None
        os.close(write)
        os.read(read, 4)
        os.waitpid(pid, 0)
        return pid

    if __name__ == "__main__":
        pids = {"parent": os.getpid()}
        pids["fork pool"] = sorted({pid for pid, _ in with_pool("fork")})
        pids["spawn pool"] = sorted({pid for pid, _ in with_pool("spawn")})
        pids["fork process"] = [with_process("fork")]
        pids["spawn process"] = [with_process("spawn")]
        child = subprocess.run([sys.executable, "-c",
                                "import os, work; work.compute(5); print(os.getpid())"],
                               capture_output=True, text=True, check=True)
        pids["subprocess"] = [int(child.stdout)]
        forked = with_fork()
        if forked is not None:
            pids["os.fork"] = [forked]
            print(json.dumps(pids))
"""


@pytest.fixture(scope="module")
def children_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("children")
    write(directory, "children.py", CHILDREN)
    write(directory, "work.py", """
        def compute(n):
            return n * n
    """)
    write(directory, "targets.yaml", """
        - {module: work, function: compute}
        - {module: children, function: task}
    """)
    completed = opsight_run(["-c", "targets.yaml", "-o", "run.opsight", "--report", "none",
                             "--", "python", "children.py"], directory, timeout=60)
    return directory, completed


def test_children_land_in_the_same_run(children_run):
    directory, completed = children_run
    assert completed.returncode == 0, completed.stderr
    pids = json.loads(completed.stdout)
    frame = spans_of(directory / "run.opsight")
    assert "recording has no end" not in completed.stderr, completed.stderr
    assert "never resolved" not in completed.stderr, completed.stderr
    # One run: each root span (of whichever process) is a trace of its own, and no two
    # roots share one.
    assert frame["trace_id"].nunique() == frame["parent_span_id"].isna().sum()
    compute_pids = set(frame.loc[frame["name"] == "compute", "pid"])
    task_pids = set(frame.loc[frame["name"] == "task", "pid"])
    for kind in ("fork pool", "spawn pool", "fork process", "spawn process", "os.fork"):
        for pid in pids[kind]:
            assert pid in compute_pids, (kind, pid)
            # the main script's own target is traced in the children too
            assert pid in task_pids, (kind, pid)
    assert pids["subprocess"][0] in compute_pids
    assert pids["parent"] not in compute_pids  # the parent never computed
    # pool workers that got no task are processes of the run too
    processes = int(completed.stderr.split(" processes)")[0].rsplit(" ", 1)[1])
    assert processes >= 1 + sum(len(pids[kind]) for kind in pids if kind != "parent")


def test_children_spans_nest_in_their_process(children_run):
    directory, _ = children_run
    frame = spans_of(directory / "run.opsight")
    spans = frame.set_index("span_id")
    computes = frame[(frame["name"] == "compute") & frame["parent_span_id"].notna()]
    assert len(computes) >= 9  # 3 + 3 pool tasks, 2 processes, os.fork
    parents = spans.loc[computes["parent_span_id"]]
    assert (parents["name"] == "task").all()
    assert (parents["pid"].to_numpy() == computes["pid"].to_numpy()).all()


def test_pool_results_unchanged(children_run):
    directory, completed = children_run
    plain = run([PYTHON, "children.py"], directory, timeout=60)
    assert plain.returncode == 0
    assert json.loads(plain.stdout).keys() == json.loads(completed.stdout).keys()
    assert sys.executable


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_terminated_child_keeps_its_spans_and_dies_of_sigterm(tmp_path, method):
    write(tmp_path, "terminated.py", f"""
        import multiprocessing, os, sys
        import work

        def serve(ready, tasks):
            work.compute(3)
            ready.put(os.getpid())
            tasks.get()  # blocks until terminated

        if __name__ == "__main__":
            context = multiprocessing.get_context("{method}")
            ready, tasks = context.SimpleQueue(), context.SimpleQueue()
            process = context.Process(target=serve, args=(ready, tasks))
            process.start()
            pid = ready.get()
            process.terminate()
            process.join(20)
            print(pid, process.exitcode)
    """)
    write(tmp_path, "work.py", "def compute(n):\n    return n * n\n")
    write(tmp_path, "targets.yaml", "- {module: work, function: compute}\n")
    plain = run([PYTHON, "terminated.py"], tmp_path)
    assert plain.stdout.split()[1] == "-15"
    completed = opsight_run(["-c", "targets.yaml", "-o", "run.opsight", "--report", "none",
                             "--", "python", "terminated.py"], tmp_path)
    assert completed.returncode == 0, completed.stderr
    pid, exit_code = completed.stdout.split()
    assert exit_code == "-15"  # as untraced: it died of the signal
    assert "no end" not in completed.stderr
    frame = spans_of(tmp_path / "run.opsight")
    assert list(frame.loc[frame["pid"] == int(pid), "name"]) == ["compute"]


def test_a_sigterm_while_the_session_starts_still_leaves_a_whole_file(tmp_path):
    # A pool may end a worker at any moment, also between the native session's start and
    # the line that keeps it, where finish() would find no session: the signal must wait
    # until start_session() is done, and the file come out whole.
    output = tmp_path / "starting.opsight"
    write(tmp_path, "starting.py", f"""
        import os, signal, time
        import opsight._session.startup as startup
        from opsight import _native

        os.environ["OPSIGHT_OUTPUT"] = {str(output)!r}
        os.environ["OPSIGHT_OUTPUT_OWNER"] = str(os.getpid())
        real_session = _native.Session

        def session_then_sigterm(*args, **kwargs):
            session = real_session(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGTERM)  # as a pool's terminate() would
            time.sleep(0.3)  # the handler and its watcher thread both run in here
            return session

        _native.Session = session_then_sigterm
        activation = startup._Activation()
        activation.finish_on_termination()
        activation.start_session()
        print("survived the signal")
    """)
    completed = run([PYTHON, "starting.py"], tmp_path)
    assert completed.returncode == -15, (completed.stdout, completed.stderr)  # as untraced
    assert "survived" not in completed.stdout
    report = run([OPSIGHT, "report", str(output), "--summary"], tmp_path)
    assert report.returncode == 0, report.stderr  # the footer is there: nothing cut
    assert "no end" not in report.stderr


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_childs_own_sigterm_handler_runs_once_as_untraced(tmp_path, method):
    write(tmp_path, "graceful.py", f"""
        import multiprocessing, os, signal, sys

        def serve(ready, tasks):
            def graceful(number, frame):
                print("handler", flush=True)
                sys.exit(0)
            signal.signal(signal.SIGTERM, graceful)
            ready.put(os.getpid())
            tasks.get()  # blocks until terminated

        if __name__ == "__main__":
            context = multiprocessing.get_context("{method}")
            ready, tasks = context.SimpleQueue(), context.SimpleQueue()
            process = context.Process(target=serve, args=(ready, tasks))
            process.start()
            ready.get()
            process.terminate()
            process.join(20)
            print("exit", process.exitcode)
    """)
    plain = run([PYTHON, "graceful.py"], tmp_path)
    assert plain.stdout.split() == ["handler", "exit", "0"], plain.stderr
    completed = opsight_run(["-o", "run.opsight", "--report", "none", "--", "python",
                             "graceful.py"], tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["handler", "exit", "0"], completed.stderr
