"""A write job on a 2-node local Ray cluster (run as a subprocess by test_multinode.py)."""

from __future__ import annotations

import json
import sys

import pyarrow as pa
import ray
from ray.cluster_utils import Cluster

import hoodie_ray as hr


def main(path: str) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="hoodie_ray")
    # The default topology (chained tasks, resources sized from the cluster): the tasks
    # spread over both nodes and each writes its share, through pipelined checkpoints.
    opts = {
        "hoodie.table.name": "two_nodes",
        "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts",
        "write.tasks": "2",
    }
    tasks: dict[str, dict[str, object]] = {}
    with hr.HoodieStreamWriter(path, opts) as w:
        for c in range(3):
            keys = [f"k{i}" for i in range(c * 500, c * 500 + 1000)]
            w.write(pa.table({"key": keys, "ts": [c] * len(keys), "v": list(range(len(keys)))}))
            w.checkpoint(wait=False)
        w.checkpoint()
        for i, h in enumerate(w._assigners):
            tasks[f"task-{i}"] = ray.get(
                h.__ray_call__.remote(
                    lambda self: {
                        "node": ray.get_runtime_context().get_node_id(),
                        "rows": self.write_fn.records_in,
                    }
                )
            )
    print(json.dumps({"tasks": tasks}))
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
