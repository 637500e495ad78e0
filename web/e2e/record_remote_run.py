"""Records a merged remote run for the browser test ui_remote.test.mjs, by the real code path:
a Ray cluster on this machine (``ray.cluster_utils.Cluster``: a head carrying the hardware
label ``nodeA`` and a second node carrying ``nodeB``, one CPU each, on loopback), then the
installed ``opsight bench --cluster ADDRESS --on nodeA/ort-cpu --on nodeB/eager`` on a small
torch model, saved in the run store of ``$OPSIGHT_HOME``; the cluster is stopped at the end
(its own processes only: ``Cluster.shutdown``). Prints one JSON object: the command's JSON
report and the node id of each label.

Usage: PYTHON record_remote_run.py FOLDER (the Python beside the opsight under test)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

MODEL = """
import torch

def make():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 4)).eval()
    return model, (torch.randn(2, 32),)
"""


def main() -> int:
    folder = Path(sys.argv[1])
    (folder / "models.py").write_text(textwrap.dedent(MODEL), encoding="utf-8")
    try:
        from ray.cluster_utils import Cluster
    except ImportError as error:
        print(f"record_remote_run.py: Ray is not installed beside {sys.executable} ({error}): "
              "pip install -r requirements/test.txt", file=sys.stderr)
        return 2
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "resources": {"nodeA": 1}})
    try:
        second = cluster.add_node(num_cpus=1, resources={"nodeB": 1})
        cluster.wait_for_nodes()
        done = subprocess.run(
            [str(Path(sys.executable).with_name("opsight")), "bench", "models.py:make",
             "--cluster", cluster.address, "--on", "nodeA/ort-cpu", "--on", "nodeB/eager",
             "--iterations", "100", "--threads", "1", "--profile-iterations", "0",
             "--name", "remote bench", "--format", "json"],
            cwd=folder, capture_output=True, text=True, timeout=240)
        if done.returncode != 0:
            print(f"record_remote_run.py: opsight bench exited {done.returncode}:\n"
                  f"{done.stderr}", file=sys.stderr)
            return 1
        print(json.dumps({"report": json.loads(done.stdout),
                          "node_ids": {"nodeA": cluster.head_node.node_id,
                                       "nodeB": second.node_id}}))
        return 0
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
