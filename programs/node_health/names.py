"""The names the loop shares with the rest of the stack: equal to `components.planning.node_health` (a test holds
them equal; the program cannot import the project). docs/operations.md, "The health loop", explains each."""

from __future__ import annotations

STARTUP_TAINT_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/gpu-health"
FAILED_TAINT_KEY = "status-taint.cluster-autoscaler.kubernetes.io/gpu-health-failed"
HEALTH_STATE_LABEL = "gpu-clusters/node-health"
PENDING, PASSED, FAILED = "pending", "passed", "failed"
NODE_HEALTH_NAMESPACE = "node-health"
METRIC_PREFIX = "gpu_clusters_node_health"
CHECKS_METRIC = f"{METRIC_PREFIX}_checks_total"
REPAIRS_METRIC = f"{METRIC_PREFIX}_repairs_total"
REPAIRS_HELD_METRIC = f"{METRIC_PREFIX}_repairs_held_total"
CHECKS_RUNNING_METRIC = f"{METRIC_PREFIX}_checks_running"
NODES_METRIC = f"{METRIC_PREFIX}_nodes"
LAST_PASS_METRIC = f"{METRIC_PREFIX}_last_pass_timestamp_seconds"
CONDITIONS_FALSE_METRIC = f"{METRIC_PREFIX}_agent_conditions_false"
#: The node conditions the EKS node monitoring agent sets, one per category of issue.
AGENT_CONDITIONS = (
    "AcceleratedHardwareReady",
    "ContainerRuntimeReady",
    "KernelReady",
    "NetworkingReady",
    "StorageReady",
)
#: The CloudWatch names of what the loop publishes on Container Insights stacks (its `cloudwatch` module): the
#: counters and the conditions gauge, the heartbeat, and the dimension every datum carries; a label `pool` becomes
#: dimension `Pool` (each label's key capitalized).
CLOUDWATCH_CHECKS = "Checks"
CLOUDWATCH_REPAIRS = "Repairs"
CLOUDWATCH_REPAIRS_HELD = "RepairsHeld"
CLOUDWATCH_CONDITIONS_FALSE = "AgentConditionsFalse"
CLOUDWATCH_HEARTBEAT = "LoopPasses"
CLOUDWATCH_NODES = "Nodes"
CLOUDWATCH_CLUSTER_DIMENSION = "ClusterName"
#: The node label every pool's nodes carry with their pool's name (components.tags.POOL).
POOL_LABEL = "gpu-clusters/pool"
#: Labels and annotations of the loop's own state, kept on the Kubernetes objects so a restarted loop resumes.
CHECK_KIND_LABEL = "gpu-clusters/node-health-check"
CHECK_NODE_ANNOTATION = "gpu-clusters/node-health-node"
CHECKED_AT_ANNOTATION = "gpu-clusters/node-health-checked-at"
BUSY_AT_ANNOTATION = "gpu-clusters/node-health-busy-at"
REASON_ANNOTATION = "gpu-clusters/node-health-reason"
#: cluster-autoscaler's annotation that lets it evict a pod no controller owns (its FAQ, "What types of pods can
#: prevent CA from removing a node?"): set on idle checks only.
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
