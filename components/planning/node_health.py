"""Names the node health loop's parts agree on (pure constants): the startup taint a new GPU node registers with,
the label that records its health state, and the prefix of the metrics the loop exports.

One place for them, so the node registration, the health gate, the repair path, the dashboards and the alerts
cannot drift apart. docs/operations.md describes the loop; each value's source is cited beside it.
"""

from __future__ import annotations

#: The taint a GPU node registers with and keeps until its health gate passes. cluster-autoscaler treats taints with
#: the `startup-taint.cluster-autoscaler.kubernetes.io/` prefix as startup taints: the node counts as not ready yet,
#: so the autoscaler does not scale up again for the pods waiting on it.
#: cluster-autoscaler's prefix of startup taints (utils/taints).
STARTUP_TAINT_PREFIX = "startup-taint.cluster-autoscaler.kubernetes.io/"
STARTUP_TAINT_KEY = f"{STARTUP_TAINT_PREFIX}gpu-health"
#: The taint a node that failed its check carries instead of the startup taint. cluster-autoscaler filters taints
#: with the `status-taint.cluster-autoscaler.kubernetes.io/` prefix out of its node templates but, unlike startup
#: taints, does not count their nodes unready: a failed node kept unready would count towards the unready nodes
#: that stop all autoscaling (clusterstate `IsClusterHealthy`). cluster-autoscaler 1.35.2 utils/taints/taints.go.
STATUS_TAINT_PREFIX = "status-taint.cluster-autoscaler.kubernetes.io/"
FAILED_TAINT_KEY = f"{STATUS_TAINT_PREFIX}gpu-health-failed"
#: The node label that records the health state: `pending`, `passed` or `failed`.
HEALTH_STATE_LABEL = "gpu-clusters/node-health"
#: Where the health loop runs.
NODE_HEALTH_NAMESPACE = "node-health"
#: The prefix of every metric the health loop exports (gate results, repairs, capped repairs).
METRIC_PREFIX = "gpu_clusters_node_health"
#: The service account the health loop runs as (its RBAC and its Pod Identity role are bound to it).
SERVICE_ACCOUNT = "node-health"
#: Gate and idle checks run, by `pool`, `kind` (`gate` or `idle`) and `result` (`passed` or `failed`).
CHECKS_METRIC = f"{METRIC_PREFIX}_checks_total"
#: Repairs started, by `pool` and `action` (`replace`, `cordon-only` for on-prem servers, ...).
REPAIRS_METRIC = f"{METRIC_PREFIX}_repairs_total"
#: Repairs held back, by `pool` and `reason` (`hourly-cap`, `capacity-block`, ...): what the storm alert reads.
REPAIRS_HELD_METRIC = f"{METRIC_PREFIX}_repairs_held_total"
#: Check pods running now (the loop runs at most `addons.nodeHealth.maxConcurrentChecks`).
CHECKS_RUNNING_METRIC = f"{METRIC_PREFIX}_checks_running"
#: GPU nodes of the checked pools by `pool` and `state` (the state label's value).
NODES_METRIC = f"{METRIC_PREFIX}_nodes"
#: Unix time of the loop's last complete pass: a stale value means the loop is stuck or down.
LAST_PASS_METRIC = f"{METRIC_PREFIX}_last_pass_timestamp_seconds"
#: The node label with the pool's name (`components.tags.POOL`), by which the loop finds a node's check.
POOL_LABEL = "gpu-clusters/pool"
#: The port of the loop's `/metrics` endpoint (Prometheus text format) and its pods' labels, for the scrape.
METRICS_PORT = 9469
LOOP_POD_LABELS = {"app.kubernetes.io/name": "node-health", "app.kubernetes.io/component": "health-loop"}
#: The node monitoring agent's conditions by pool and condition, how many nodes report each False now (a gauge of
#: the loop, for the CloudWatch path; Prometheus reads the conditions from kube-state-metrics instead).
CONDITIONS_FALSE_METRIC = f"{METRIC_PREFIX}_agent_conditions_false"

# ---------------------------------------------------------------------------------- CloudWatch (Container Insights)
#: Where the loop publishes on a Container Insights stack (PutMetricData; its role may write this namespace only).
#: One namespace for every stack of an account, told apart by `CLOUDWATCH_CLUSTER_DIMENSION`.
CLOUDWATCH_NAMESPACE = "GpuClusters/NodeHealth"
#: The CloudWatch names of `CHECKS_METRIC`, `REPAIRS_METRIC`, `REPAIRS_HELD_METRIC` and `CONDITIONS_FALSE_METRIC`,
#: and the heartbeat: one datum per finished pass of the loop.
CLOUDWATCH_CHECKS = "Checks"
CLOUDWATCH_REPAIRS = "Repairs"
CLOUDWATCH_REPAIRS_HELD = "RepairsHeld"
CLOUDWATCH_CONDITIONS_FALSE = "AgentConditionsFalse"
CLOUDWATCH_HEARTBEAT = "LoopPasses"
#: `NODES_METRIC`: nodes by pool and health state (every state of a gated pool, `failed` of every pool), as its value.
CLOUDWATCH_NODES = "Nodes"
#: The dimension every datum carries (the EKS cluster's name, as Container Insights names it), and those of the
#: labels the alarms select on (each label's key capitalized: `pool` is `Pool`).
CLOUDWATCH_CLUSTER_DIMENSION = "ClusterName"
CLOUDWATCH_POOL_DIMENSION = "Pool"
CLOUDWATCH_KIND_DIMENSION = "Kind"
CLOUDWATCH_RESULT_DIMENSION = "Result"
CLOUDWATCH_CONDITION_DIMENSION = "Condition"
CLOUDWATCH_STATE_DIMENSION = "State"
