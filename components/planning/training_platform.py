"""Names the training platform's parts agree on (pure constants): the queues a job is submitted to, where Kueue and
the job controller run, and the node labels topology-aware placement reads.

One place for them, so the queues, the job controller, the reference job and the policy pack cannot drift apart.
docs/training.md explains the platform; each value's source is cited beside it.
"""

from __future__ import annotations

#: Where Kueue's controller runs.
KUEUE_NAMESPACE = "kueue-system"
#: Where JobSet's controller runs.
JOBSET_NAMESPACE = "jobset-system"
#: The LocalQueue every workload namespace gets. Kueue's LocalQueueDefaulting sends a job without a queue label to
#: the namespace's LocalQueue of this name.
LOCAL_QUEUE_NAME = "default"
#: The label that submits a job to a LocalQueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: The node labels of the network topology, from the coarsest level to the node.
NETWORK_TOPOLOGY_LEVELS: tuple[str, ...] = (
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "kubernetes.io/hostname",
)
#: The level a job asks to be packed within (`kueue.x-k8s.io/podset-preferred-topology`): the bottom network layer of
#: most supported instance types (EKS user guide, "Place distributed AI/ML workloads with network topology labels").
#: Preferred, not required: Kueue places the job as low in the tree as its pods fit and goes up a level when they
#: do not (docs/training.md#topology-aware-placement).
PREFERRED_TOPOLOGY_LEVEL = NETWORK_TOPOLOGY_LEVELS[2]
