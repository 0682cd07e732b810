"""Which GPU platform add-ons a stack gets, and the values each one is installed with (pure, no Pulumi).

The add-on components (`components/addons/`) only turn these values into Helm releases, IAM roles, queues and
alarms. Everything a reviewer wants to check (tolerations, selectors, time-slicing entries, IAM statements,
EventBridge patterns, alarm thresholds and steps) is computed here from the validated config and the pools'
`PoolPlan`s, so it is derived once and unit-testable without mocks.

Sources (tags as in shared/reference/aws-gpu-facts.md): [NVDP] NVIDIA/k8s-device-plugin chart 0.20.0 (§8),
[EKSCH] aws/eks-charts aws-efa-k8s-device-plugin (§8), [CA] kubernetes/autoscaler AWS README (§6), [NTH]
aws-node-termination-handler queue processor (§7b), [CWI] Container Insights GPU metrics (§7a), [DCGM]
NVIDIA/dcgm-exporter chart 4.8.2 (§8). Further sources are cited where they are used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from components import tags
from components.config import Alerts, GpuUtilizationScaling, StackConfig, Taint
from components.planning.autoscaler_tags import AUTOSCALED_MODE, ENABLED_TAG, OWNER_TAG_PREFIX, discovery_tags
from components.planning.pools import DEVICE_PLUGIN_CONFIG_LABEL, EFA_LABEL, GPU_PRESENT_LABEL, PoolPlan

# ------------------------------------------------------------------------------------------------ common values
#: Lets an add-on onto nodes reserved for cluster-critical pods (the usual system-pool taint); the NVIDIA and EFA
#: device plugin charts tolerate it by default ([NVDP], [EKSCH] §8), and we keep it when we replace their lists.
CRITICAL_ADDONS_ONLY: dict[str, str] = {"key": "CriticalAddonsOnly", "operator": "Exists"}
#: Controllers (cluster-autoscaler, the termination handler, Prometheus) run on the system pool, never on a GPU
#: node that may be scaled away or interrupted; `components.planning.pools.node_labels` sets this label.
SYSTEM_NODE_SELECTOR: dict[str, str] = {tags.ROLE: "system"}
#: Device plugins must not be evicted before the workloads that use their devices.
NODE_CRITICAL = "system-node-critical"
KUBE_SYSTEM = "kube-system"

#: Helm release names and service accounts. Pod Identity binds a role to a (namespace, service account) pair, so
#: the charts are told these names explicitly instead of deriving them from the release name.
NVIDIA_DEVICE_PLUGIN_RELEASE = "nvidia-device-plugin"
EFA_DEVICE_PLUGIN_RELEASE = "aws-efa-k8s-device-plugin"
CLUSTER_AUTOSCALER_RELEASE = "cluster-autoscaler"
CLUSTER_AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"
NTH_RELEASE = "aws-node-termination-handler"
NTH_SERVICE_ACCOUNT = "aws-node-termination-handler"
MONITORING_NAMESPACE = "monitoring"
KUBE_PROMETHEUS_STACK_RELEASE = "kube-prometheus-stack"
ALERTMANAGER_SERVICE_ACCOUNT = "alertmanager"
DCGM_EXPORTER_RELEASE = "dcgm-exporter"
#: The amazon-cloudwatch-observability add-on runs its agent as `amazon-cloudwatch/cloudwatch-agent`
#: (EKS user guide, "Amazon CloudWatch Observability agent": `eksctl create iamserviceaccount --name
#: cloudwatch-agent --namespace amazon-cloudwatch`; the add-on's chart values `agent.serviceAccount`).
CLOUDWATCH_ADDON = "amazon-cloudwatch-observability"
CLOUDWATCH_NAMESPACE = "amazon-cloudwatch"
CLOUDWATCH_SERVICE_ACCOUNT = "cloudwatch-agent"
#: AWS managed policy the CloudWatch agent needs (CloudWatch UG, "Install the Amazon CloudWatch Observability EKS
#: add-on": `CloudWatchAgentServerPolicy`); a policy path the Pod Identity helper qualifies with the partition.
CLOUDWATCH_AGENT_POLICY = "CloudWatchAgentServerPolicy"


def toleration(taint: Taint) -> dict[str, str]:
    """The toleration that matches exactly one taint (key, value and effect)."""
    if taint.value:
        return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
    return {"key": taint.key, "operator": "Exists", "effect": taint.effect}


def tolerations_for(plans: Iterable[PoolPlan], critical_addons: bool = True) -> list[dict[str, str]]:
    """Tolerations for every taint of `plans`, each once, in a stable order (plus CriticalAddonsOnly)."""
    found: dict[tuple[str, str, str], dict[str, str]] = {}
    for plan in plans:
        for taint in plan.taints:
            found.setdefault((taint.key, taint.value, taint.effect), toleration(taint))
    out = [found[k] for k in sorted(found)]
    return ([dict(CRITICAL_ADDONS_ONLY)] if critical_addons else []) + out


def gpu_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """Pools whose nodes have NVIDIA GPUs: cloud GPU pools and hybrid (on-prem, e.g. A40) pools alike."""
    return [p for p in plans if p.is_gpu]


def system_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.role == "system"]


def node_affinity(key: str, values: Sequence[str]) -> dict[str, Any]:
    """A required node affinity `key In values` (one term)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]
            }
        }
    }


# ---------------------------------------------------------------------------------------------------- selection
AlertsTopic = Literal["create", "existing", "none"]


@dataclass(frozen=True)
class AddonSelection:
    """Which add-ons a stack gets. `auto` switches are resolved from the pool plans, once, here."""

    nvidia_device_plugin: bool
    efa_device_plugin: bool
    cluster_autoscaler: bool
    node_termination_handler: bool
    #: Pools resized by CloudWatch alarms on their GPU utilization (`scaling.mode: gpu-utilization`).
    gpu_scaling_pools: tuple[str, ...]
    container_insights: bool
    dcgm_prometheus: bool
    alerts_topic: AlertsTopic

    @property
    def monitoring(self) -> bool:
        """Anything for the monitoring component to build: a metrics pipeline or an alerts topic."""
        return self.container_insights or self.dcgm_prometheus or self.alerts_topic != "none"

    @property
    def enabled(self) -> list[str]:
        """Names of the add-ons that will be deployed (for the stack outputs and the plan)."""
        names = {
            "nvidia-device-plugin": self.nvidia_device_plugin,
            "efa-device-plugin": self.efa_device_plugin,
            "cluster-autoscaler": self.cluster_autoscaler,
            "node-termination-handler": self.node_termination_handler,
            "gpu-utilization-scaling": bool(self.gpu_scaling_pools),
            "container-insights": self.container_insights,
            "dcgm-prometheus": self.dcgm_prometheus,
        }
        return [name for name, on in names.items() if on]


def _switch(value: str, auto: bool) -> bool:
    return auto if value == "auto" else value == "on"


def autoscaled_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """`aws` pools cluster-autoscaler may resize: mode `cluster-autoscaler` and room between min and max."""
    return [
        p for p in plans if p.kind == "aws" and p.pool.scaling.mode == AUTOSCALED_MODE and p.min_nodes < p.max_nodes
    ]


def spot_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.kind == "aws" and p.capacity_type == "spot"]


def gpu_scaling_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.kind == "aws" and p.pool.scaling.mode == "gpu-utilization"]


def select_addons(spec: StackConfig, plans: Sequence[PoolPlan]) -> AddonSelection:
    """Resolve every switch. `auto`: EFA plugin when a pool wires EFA, cluster-autoscaler when a pool is in
    cluster-autoscaler mode with room to scale, termination handler when a pool buys spot."""
    addons = spec.addons
    alerts = addons.monitoring.alerts
    topic: AlertsTopic = "existing" if alerts.sns_topic_arn else ("create" if alerts.email else "none")
    return AddonSelection(
        nvidia_device_plugin=addons.nvidia_device_plugin.enabled and bool(gpu_plans(plans)),
        efa_device_plugin=_switch(addons.efa_device_plugin.enabled, any(p.efa for p in plans)),
        cluster_autoscaler=_switch(addons.cluster_autoscaler.enabled, bool(autoscaled_plans(plans))),
        node_termination_handler=_switch(addons.node_termination_handler.enabled, bool(spot_plans(plans))),
        gpu_scaling_pools=tuple(p.name for p in gpu_scaling_plans(plans)),
        container_insights=addons.monitoring.container_insights,
        dcgm_prometheus=addons.monitoring.dcgm_prometheus,
        alerts_topic=topic,
    )


# -------------------------------------------------------------------------------------- NVIDIA device plugin
#: The config-map entry nodes without a per-node config label get ([NVDP] `config.default`).
DEVICE_PLUGIN_DEFAULT_CONFIG = "default"
#: The resource the plugin advertises; time-slicing keeps the name (`renameByDefault: false`) so pod specs that
#: ask for `nvidia.com/gpu` work unchanged on shared GPUs ([NVDP] time-slicing config, facts §8).
GPU_RESOURCE = "nvidia.com/gpu"


def device_plugin_config(mig_strategy: str, time_slicing_replicas: int = 1) -> dict[str, Any]:
    """One device-plugin config file ([NVDP] `version: v1` format, facts §8): MIG strategy, and time-slicing
    when a GPU is advertised more than once."""
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
    if time_slicing_replicas > 1:
        config["sharing"] = {
            "timeSlicing": {
                "renameByDefault": False,
                "failRequestsGreaterThanOne": False,
                "resources": [{"name": GPU_RESOURCE, "replicas": time_slicing_replicas}],
            }
        }
    return config


def device_plugin_config_map(mig_strategy: str, plans: Iterable[PoolPlan]) -> dict[str, str]:
    """`config.map`: a `default` entry and one entry per time-sliced GPU pool.

    The entry name is the value of the pool's `nvidia.com/device-plugin.config` node label, which
    `PoolPlan.labels` sets exactly on pools with `timeSlicingReplicas > 1`; reading it from there means the label
    and the map can never disagree. The chart takes each entry as a YAML string ([NVDP] templates/configmap.yml).
    """
    entries = {DEVICE_PLUGIN_DEFAULT_CONFIG: device_plugin_config(mig_strategy)}
    for plan in gpu_plans(plans):
        name = plan.labels.get(DEVICE_PLUGIN_CONFIG_LABEL)
        if name is not None:
            entries[name] = device_plugin_config(mig_strategy, plan.pool.device_plugin.time_slicing_replicas)
    return {name: yaml.safe_dump(config, sort_keys=False) for name, config in entries.items()}


def nvidia_device_plugin_values(spec: StackConfig, plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Helm values of the NVIDIA device plugin.

    Scheduling: the chart's default affinity needs node-feature-discovery labels or `nvidia.com/gpu.present=true`
    ([NVDP] §8); nodeadm sets that label by itself only from Kubernetes 1.35 ([AMI] §5b). Every GPU pool, cloud
    or hybrid, sets it through kubelet `--node-labels` (`PoolPlan.labels`), and the affinity here requires exactly
    that label, so the plugin lands on every GPU node and nowhere else, whatever the Kubernetes version.
    NFD and GPU feature discovery stay off: the labels they would add are already set at kubelet start, and NFD
    would add a cluster-wide DaemonSet for nothing.
    Tolerations: every taint of every GPU pool (the chart's default tolerates only `nvidia.com/gpu` with any
    value), plus CriticalAddonsOnly.
    Bottlerocket NVIDIA nodes run the device plugin bundled in the OS (`settings.kubelet-device-plugins.nvidia`,
    aws-gpu-facts.md §5a); a second plugin there would fight it for `nvidia.com/gpu`, so those pools are excluded.
    """
    mig = spec.addons.nvidia_device_plugin.mig_strategy
    gpu = gpu_plans(plans)
    affinity = node_affinity(GPU_PRESENT_LABEL, ["true"])
    bundled = sorted(p.name for p in gpu if p.kind == "aws" and p.pool.ami_family == "bottlerocket")
    if bundled:
        term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
        term["matchExpressions"].append({"key": tags.POOL, "operator": "NotIn", "values": bundled})
    return {
        "migStrategy": mig,
        "priorityClassName": NODE_CRITICAL,
        "tolerations": tolerations_for(gpu),
        "affinity": affinity,
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
        "config": {"map": device_plugin_config_map(mig, gpu), "default": DEVICE_PLUGIN_DEFAULT_CONFIG},
    }


# ----------------------------------------------------------------------------------------- EFA device plugin
#: The label the chart's `supportedInstanceLabels` affinity matches ([EKSCH] values.yaml).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def efa_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.efa]


def efa_device_plugin_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Helm values of the AWS EFA device plugin: only on nodes whose EFA devices are wired.

    The chart tolerates nothing but CriticalAddonsOnly (`tolerations: []`, [EKSCH] §8), so tainted GPU nodes would
    never get it; we add every taint of the EFA pools. It selects nodes by instance type from a list that lags new
    types, so the list is replaced by the EFA pools' own types, and `gpu-clusters/efa=true` (set only where the
    launch template attaches EFA interfaces) keeps it off an EFA-capable type used without EFA.
    """
    pools = efa_plans(plans)
    types = sorted({t for p in pools for t in (p.instance_types or ())})
    return {
        "nodeSelector": {EFA_LABEL: "true"},
        "tolerations": tolerations_for(pools, critical_addons=False),
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": types},
    }


# -------------------------------------------------------------------------------------------- cluster-autoscaler
#: Read-only calls cluster-autoscaler makes on AWS ([CA] README "IAM Policy", facts §6). They cannot be scoped to
#: a resource, so they apply to `*`.
CLUSTER_AUTOSCALER_DESCRIBE_ACTIONS: tuple[str, ...] = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
    "eks:DescribeNodegroup",
)
#: The calls that change capacity; allowed only on ASGs tagged for this cluster ([CA] README, facts §6).
CLUSTER_AUTOSCALER_SCALE_ACTIONS: tuple[str, ...] = (
    "autoscaling:SetDesiredCapacity",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
)


def cluster_autoscaler_policy(cluster_name: str) -> dict[str, Any]:
    """Least privilege: describe everything, resize only the ASGs carrying both discovery tags of this cluster."""
    conditions = {f"aws:ResourceTag/{key}": value for key, value in discovery_tags(cluster_name).items()}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Describe",
                "Effect": "Allow",
                "Action": list(CLUSTER_AUTOSCALER_DESCRIBE_ACTIONS),
                "Resource": "*",
            },
            {
                "Sid": "ScaleOwnGroups",
                "Effect": "Allow",
                "Action": list(CLUSTER_AUTOSCALER_SCALE_ACTIONS),
                "Resource": "*",
                "Condition": {"StringEquals": conditions},
            },
        ],
    }


def cluster_autoscaler_values(spec: StackConfig, plans: Sequence[PoolPlan], image_tag: str | None) -> dict[str, Any]:
    """Helm values of cluster-autoscaler ([CA] chart values.yaml, facts §6).

    - auto-discovery by exactly the two tags node pools put on autoscaled ASGs (`autoscaler_tags.discovery_tags`);
    - `balance-similar-node-groups`: spreads a scale-up across same-shape groups (spot pools in several AZs);
    - `skip-nodes-with-local-storage=false`: with nodeadm RAID0 every pod's emptyDir lives on instance-store NVMe,
      and the default (true) would then never scale a GPU node down;
    - the image tag of the cluster's Kubernetes minor (catalog), since the chart's appVersion trails releases.
    """
    ca = spec.addons.cluster_autoscaler
    cluster = spec.cluster.name
    values: dict[str, Any] = {
        "cloudProvider": "aws",
        "awsRegion": spec.region,
        "autoDiscovery": {"clusterName": cluster, "tags": [ENABLED_TAG, f"{OWNER_TAG_PREFIX}{cluster}"]},
        "extraArgs": {
            "expander": ca.expander,
            "scale-down-unneeded-time": ca.scale_down_unneeded_time,
            "scale-down-utilization-threshold": ca.scale_down_utilization_threshold,
            "scale-down-delay-after-add": ca.scale_down_delay_after_add,
            "balance-similar-node-groups": True,
            "skip-nodes-with-local-storage": False,
        },
        "rbac": {"serviceAccount": {"create": True, "name": CLUSTER_AUTOSCALER_SERVICE_ACCOUNT}},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "tolerations": tolerations_for(system_plans(plans)),
    }
    if image_tag:
        values["image"] = {"tag": image_tag}
    return values


# ------------------------------------------------------------------------------ spot interruption handling (NTH)
#: EventBridge rules of the termination handler's queue mode, exactly as [NTH] documents them (facts §7b).
INTERRUPTION_EVENT_PATTERNS: dict[str, dict[str, Any]] = {
    "asg-terminate": {"source": ["aws.autoscaling"], "detail-type": ["EC2 Instance-terminate Lifecycle Action"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "scheduled-change": {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
}
#: [NTH] example queue attributes: events older than the 2-minute spot notice are useless ([NTH] §7b).
INTERRUPTION_QUEUE_RETENTION_SECONDS = 300
#: Terminate lifecycle hook: the ASG waits for the handler to drain the node, up to 300 s, then goes on.
LIFECYCLE_TRANSITION = "autoscaling:EC2_INSTANCE_TERMINATING"
LIFECYCLE_DEFAULT_RESULT = "CONTINUE"
LIFECYCLE_HEARTBEAT_SECONDS = 300
#: Principals that put messages on the queue: EventBridge (the rules) and SQS (([NTH] §7b queue policy).
QUEUE_SENDERS: tuple[str, ...] = ("events.amazonaws.com", "sqs.amazonaws.com")
NTH_DESCRIBE_ACTIONS: tuple[str, ...] = (
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeTags",
    "ec2:DescribeInstances",
)
NTH_QUEUE_ACTIONS: tuple[str, ...] = ("sqs:DeleteMessage", "sqs:ReceiveMessage")
NTH_LIFECYCLE_ACTIONS: tuple[str, ...] = ("autoscaling:CompleteLifecycleAction",)


def interruption_queue_policy(queue_arn: str, rule_arns: Sequence[str]) -> dict[str, Any]:
    """Only EventBridge/SQS may send, and only from this stack's rules (`aws:SourceArn`)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "InterruptionEvents",
                "Effect": "Allow",
                "Principal": {"Service": list(QUEUE_SENDERS)},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": list(rule_arns)}},
            }
        ],
    }


def asg_arn_pattern(region: str, account_id: str, asg_name: str, partition: str = "aws") -> str:
    """An ASG's ARN with its generated id wildcarded (IAM reference, "Amazon EC2 Auto Scaling resource types":
    `arn:${Partition}:autoscaling:${Region}:${Account}:autoScalingGroup:${GroupId}:autoScalingGroupName/${Name}`)."""
    return f"arn:{partition}:autoscaling:{region}:{account_id}:autoScalingGroup:*:autoScalingGroupName/{asg_name}"


def node_termination_handler_policy(queue_arn: str, asg_arns: Sequence[str]) -> dict[str, Any]:
    """The [NTH] action list (facts §7b), each on the narrowest resource it supports: describes on `*`, the
    queue's two actions on this queue, CompleteLifecycleAction on the spot pools' ASGs only."""
    statements: list[dict[str, Any]] = [
        {"Sid": "Describe", "Effect": "Allow", "Action": list(NTH_DESCRIBE_ACTIONS), "Resource": "*"},
        {"Sid": "Queue", "Effect": "Allow", "Action": list(NTH_QUEUE_ACTIONS), "Resource": queue_arn},
    ]
    if asg_arns:
        statements.append(
            {"Sid": "Lifecycle", "Effect": "Allow", "Action": list(NTH_LIFECYCLE_ACTIONS), "Resource": list(asg_arns)}
        )
    return {"Version": "2012-10-17", "Statement": statements}


def node_termination_handler_values(spec: StackConfig, plans: Sequence[PoolPlan], queue_url: str) -> dict[str, Any]:
    """Helm values of the handler in queue mode (a Deployment on the system pool, [NTH] chart values).

    It drains only instances tagged `aws-node-termination-handler/managed` (the chart's `checkTagBeforeDraining`,
    on by default), which node pools set on spot ASGs (`components.tags.NTH_MANAGED`); the same key is given here
    so the two can never differ.
    """
    return {
        "enableSqsTerminationDraining": True,
        "queueURL": queue_url,
        "awsRegion": spec.region,
        "checkTagBeforeDraining": True,
        "managedTag": tags.NTH_MANAGED,
        "serviceAccount": {"create": True, "name": NTH_SERVICE_ACCOUNT},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "tolerations": tolerations_for(system_plans(plans)),
    }


# --------------------------------------------------------------------------------- GPU-utilization scaling
#: The CloudWatch agent's NVIDIA GPU metric (CloudWatch UG, "Collect NVIDIA GPU metrics",
#: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Agent-NVIDIA-GPU.html:
#: measurement `utilization_gpu` is published as `nvidia_smi_utilization_gpu`), in the agent's default namespace.
GPU_UTILIZATION_METRIC = "nvidia_smi_utilization_gpu"
GPU_UTILIZATION_NAMESPACE = "CWAgent"
ASG_DIMENSION = "AutoScalingGroupName"
#: One datapoint per minute: the alarm period and the agent's collection interval.
METRIC_PERIOD_SECONDS = 60
#: The extra agent that publishes it (an entry of the add-on's `agents` list, see `gpu_metrics_agent`).
GPU_METRICS_AGENT = "gpu-utilization-agent"


@dataclass(frozen=True)
class StepScalingPolicy:
    """An `aws.autoscaling.Policy` of type StepScaling with one step."""

    suffix: str
    adjustment: int
    #: Bounds of the step, relative to the alarm threshold (AWS: metric - threshold); None = unbounded.
    lower_bound: float | None
    upper_bound: float | None
    #: Seconds before a new instance's metrics count. Step scaling has no cooldown (the `Cooldown` parameter is
    #: SimpleScaling-only, pulumi-aws `autoscaling.Policy` docs / EC2 Auto Scaling API PutScalingPolicy); the
    #: estimated warm-up is its step-scaling counterpart for scale-out.
    estimated_instance_warmup: int | None


@dataclass(frozen=True)
class MetricAlarmPlan:
    """An `aws.cloudwatch.MetricAlarm` on one metric; `dimensions` may hold the placeholder ASG_NAME."""

    suffix: str
    description: str
    namespace: str
    metric_name: str
    statistic: str
    comparison: str
    threshold: float
    period: int
    evaluation_periods: int
    dimensions: Mapping[str, str]
    treat_missing_data: str


@dataclass(frozen=True)
class GpuScalingPlan:
    """Both directions of one pool's GPU-utilization scaling: each alarm triggers the policy of its direction."""

    pool: str
    scale_out_alarm: MetricAlarmPlan
    scale_out_policy: StepScalingPolicy
    scale_in_alarm: MetricAlarmPlan
    scale_in_policy: StepScalingPolicy


#: Stands for the pool's ASG name in `MetricAlarmPlan.dimensions`; the component substitutes the real name.
ASG_NAME = "${asg}"


def gpu_scaling_plan(plan: PoolPlan) -> GpuScalingPlan:
    """Default rule (issue 6): average GPU utilization of the pool's ASG > 85% for 15 min adds 2 instances,
    < 30% for 30 min removes 1. Evaluation periods are minutes, one 60-second period each.

    Missing data: an ASG at zero publishes nothing; that must not read as "idle" (scale-in) nor as "busy".
    Scale-in pacing: while the scale-in alarm stays in ALARM, CloudWatch invokes its Auto Scaling action once a
    minute (CloudWatch UG, "Alarm actions": "For Auto Scaling actions, the alarm continues to invoke the action
    once per minute that the alarm remains in the new state"), so an idle pool shrinks by one node per minute
    after the first 30 idle minutes until it is busy enough again or reaches `min`.
    """
    g: GpuUtilizationScaling = plan.pool.scaling.gpu_utilization
    return GpuScalingPlan(
        pool=plan.name,
        scale_out_alarm=_pool_gpu_alarm(
            "gpu-high",
            f"pool {plan.name}: average GPU utilization above {g.scale_out_above_percent:g}% for "
            f"{g.scale_out_after_minutes} min -> add {g.scale_out_by} instance(s)",
            "GreaterThanThreshold",
            g.scale_out_above_percent,
            g.scale_out_after_minutes,
        ),
        scale_out_policy=StepScalingPolicy(
            suffix="gpu-scale-out",
            adjustment=g.scale_out_by,
            lower_bound=0.0,
            upper_bound=None,
            estimated_instance_warmup=g.cooldown_seconds,
        ),
        scale_in_alarm=_pool_gpu_alarm(
            "gpu-low",
            f"pool {plan.name}: average GPU utilization below {g.scale_in_below_percent:g}% for "
            f"{g.scale_in_after_minutes} min -> remove {g.scale_in_by} instance(s)",
            "LessThanThreshold",
            g.scale_in_below_percent,
            g.scale_in_after_minutes,
        ),
        scale_in_policy=StepScalingPolicy(
            suffix="gpu-scale-in",
            adjustment=-g.scale_in_by,
            lower_bound=None,
            upper_bound=0.0,
            estimated_instance_warmup=None,
        ),
    )


def _pool_gpu_alarm(suffix: str, description: str, comparison: str, threshold: float, minutes: int) -> MetricAlarmPlan:
    """Average `nvidia_smi_utilization_gpu` of the pool's ASG, one-minute periods, `minutes` of them."""
    return MetricAlarmPlan(
        suffix=suffix,
        description=description,
        namespace=GPU_UTILIZATION_NAMESPACE,
        metric_name=GPU_UTILIZATION_METRIC,
        statistic="Average",
        comparison=comparison,
        threshold=threshold,
        period=METRIC_PERIOD_SECONDS,
        evaluation_periods=minutes,
        dimensions={ASG_DIMENSION: ASG_NAME},
        treat_missing_data="missing",
    )


def gpu_metrics_agent(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """An extra CloudWatch agent (an entry of the add-on's `agents` list) that publishes each GPU-utilization
    pool's `nvidia_smi_utilization_gpu` with the `AutoScalingGroupName` dimension.

    Why an extra agent: Container Insights' `node_gpu_utilization` carries ClusterName/InstanceId/NodeName only
    ([CWI] §7a), so it cannot be scoped to one ASG. The agent's `nvidia_gpu` input with `append_dimensions`
    `${aws:AutoScalingGroupName}` and `aggregation_dimensions [["AutoScalingGroupName"]]` publishes the per-ASG
    aggregate (CloudWatch UG, "Manually create or edit the CloudWatch agent configuration file", metrics section).

    How it runs (aws-observability/helm-charts, chart amazon-cloudwatch-observability, `agents` list: "each entry
    uses the schema & the defaults from $.agent", templates/linux/cloudwatch-agent-custom-resource.yaml @71a298f;
    per-agent `env` from chart 4.3.1, `nodeSelector`/`affinity`/`tolerations` from 3.7.0): a DaemonSet on the host
    network (the chart's `agent.hostNetwork: true`, so IMDS answers with hop limit 1) on the GPU-utilization pools
    only, under the add-on's `cloudwatch-agent` service account (its Pod Identity role holds
    CloudWatchAgentServerPolicy, incl. ec2:DescribeTags for the ASG name). `nvidia-smi` reaches the container
    through the NVIDIA container runtime, which nodeadm makes containerd's default on NVIDIA AMIs ([AMI]
    nodeadm/internal/containerd/runtime_config_nvidia.go), when `NVIDIA_VISIBLE_DEVICES=all` is set (the way GPU
    monitoring DaemonSets see every GPU without requesting one).
    """
    pools = gpu_scaling_plans(plans)
    config = {
        "agent": {"metrics_collection_interval": METRIC_PERIOD_SECONDS},
        "metrics": {
            "namespace": GPU_UTILIZATION_NAMESPACE,
            "append_dimensions": {ASG_DIMENSION: "${aws:AutoScalingGroupName}", "InstanceId": "${aws:InstanceId}"},
            "aggregation_dimensions": [[ASG_DIMENSION]],
            "metrics_collected": {
                "nvidia_gpu": {
                    "measurement": ["utilization_gpu"],
                    "metrics_collection_interval": METRIC_PERIOD_SECONDS,
                }
            },
        },
    }
    return {
        "name": GPU_METRICS_AGENT,
        "mode": "daemonset",
        "config": config,
        "env": [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
        "affinity": node_affinity(tags.POOL, [p.name for p in pools]),
        "tolerations": tolerations_for(pools),
    }


# ------------------------------------------------------------------------------------------------- monitoring
#: The add-on's main Container Insights agent; listed first because a custom `agents` list replaces the default.
CONTAINER_INSIGHTS_AGENT = "cloudwatch-agent"
CONTAINER_INSIGHTS_NAMESPACE = "ContainerInsights"
CLUSTER_DIMENSION = "ClusterName"
#: Placeholder for the EKS cluster name in alarm dimensions (known only once the cluster exists).
CLUSTER_NAME = "${cluster}"
#: GPU temperature must stay high for this many minutes before alerting, so one hot sample does not page anyone.
TEMPERATURE_MINUTES = 5


def cloudwatch_addon_configuration(spec: StackConfig, plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """`configuration_values` of the amazon-cloudwatch-observability add-on.

    - `tolerations` (the chart's root value, used by the agent, Fluent Bit and the DCGM exporter it runs for GPU
      metrics): every pool taint plus CriticalAddonsOnly, so GPU nodes are observed. The chart default is
      `operator: Exists`, but older add-on builds did not tolerate tainted nodes (containers-roadmap #2195), so
      we state the list explicitly;
    - `agents`: the Container Insights agent, plus the GPU metrics agent when a pool scales on GPU utilization.
    """
    config: dict[str, Any] = {"tolerations": tolerations_for(plans)}
    if gpu_scaling_plans(plans):
        config["agents"] = [{"name": CONTAINER_INSIGHTS_AGENT}, gpu_metrics_agent(plans)]
    return config


def container_insights_alarms(alerts: Alerts) -> list[MetricAlarmPlan]:
    """Alerts on Container Insights GPU metrics ([CWI] §7a, dimension ClusterName):

    - `node_gpu_temperature` Maximum above `gpuTemperatureCelsius` (85 °C) for 5 minutes;
    - `node_gpu_utilization` Average below `idleUtilizationPercent` (30%) for `idleMinutes` (30): GPUs paid for
      and idle. No GPU nodes means no data, which is not idle spend (`notBreaching`).
    Container Insights publishes no XID or ECC metric; those are covered on the DCGM/Prometheus path only.
    """
    dims = {CLUSTER_DIMENSION: CLUSTER_NAME}
    return [
        MetricAlarmPlan(
            suffix="gpu-temperature",
            description=f"a GPU is above {alerts.gpu_temperature_celsius:g} C for {TEMPERATURE_MINUTES} min",
            namespace=CONTAINER_INSIGHTS_NAMESPACE,
            metric_name="node_gpu_temperature",
            statistic="Maximum",
            comparison="GreaterThanThreshold",
            threshold=alerts.gpu_temperature_celsius,
            period=METRIC_PERIOD_SECONDS,
            evaluation_periods=TEMPERATURE_MINUTES,
            dimensions=dims,
            treat_missing_data="notBreaching",
        ),
        MetricAlarmPlan(
            suffix="gpu-idle",
            description=(
                f"average GPU utilization below {alerts.idle_utilization_percent:g}% for {alerts.idle_minutes} min "
                "(idle spend)"
            ),
            namespace=CONTAINER_INSIGHTS_NAMESPACE,
            metric_name="node_gpu_utilization",
            statistic="Average",
            comparison="LessThanThreshold",
            threshold=alerts.idle_utilization_percent,
            period=METRIC_PERIOD_SECONDS,
            evaluation_periods=alerts.idle_minutes,
            dimensions=dims,
            treat_missing_data="notBreaching",
        ),
    ]


def alerts_key_policy(account_id: str, partition: str = "aws") -> dict[str, Any]:
    """Key policy of the alerts topic's KMS key: the account administers it; CloudWatch alarms may encrypt
    messages for the topic. Alarms cannot publish to a topic encrypted with the AWS managed key `aws/sns`
    (CloudWatch UG, "Using Amazon SNS topics ... encrypted": the key policy must allow
    `cloudwatch.amazonaws.com` kms:Decrypt and kms:GenerateDataKey*)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AccountAdministers",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudWatchAlarmsEncrypt",
                "Effect": "Allow",
                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                "Resource": "*",
            },
        ],
    }


def alertmanager_sns_policy(topic_arn: str, key_arn: str | None) -> dict[str, Any]:
    """Alertmanager may publish to the alerts topic only (and use its key when the stack created one)."""
    statements: list[dict[str, Any]] = [
        {"Sid": "Publish", "Effect": "Allow", "Action": "sns:Publish", "Resource": topic_arn}
    ]
    if key_arn:
        statements.append(
            {
                "Sid": "EncryptForTopic",
                "Effect": "Allow",
                "Action": ["kms:GenerateDataKey*", "kms:Decrypt"],
                "Resource": key_arn,
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


#: DCGM fields exported by our dcgm-exporter: the chart's defaults that matter for GPU health and use, plus the
#: volatile ECC counters, which the default list ships commented out ([DCGM] etc/default-counters.csv @d5e5f51).
#: (field, Prometheus type, help); `customMetrics` replaces the whole default list.
DCGM_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
)


def dcgm_counters_csv() -> str:
    return "".join(f"{field}, {kind}, {text}\n" for field, kind, text in DCGM_COUNTERS)


def dcgm_exporter_values(plans: Sequence[PoolPlan], image_tag: str | None) -> dict[str, Any]:
    """Helm values of the DCGM exporter: on every GPU node (the chart tolerates only the control plane and selects
    nothing, [DCGM] §8), with the counters above and the chart's ServiceMonitor (its CRD comes from
    kube-prometheus-stack, installed first)."""
    values: dict[str, Any] = {
        "nodeSelector": {GPU_PRESENT_LABEL: "true"},
        "tolerations": tolerations_for(gpu_plans(plans)),
        "customMetrics": dcgm_counters_csv(),
        "serviceMonitor": {"enabled": True},
    }
    if image_tag:
        values["image"] = {"tag": image_tag}
    return values


def prometheus_rules(alerts: Alerts) -> dict[str, Any]:
    """PrometheusRule groups on DCGM metrics (kube-prometheus-stack `additionalPrometheusRulesMap`).

    XID: `DCGM_FI_DEV_XID_ERRORS` holds the last XID code, non-zero after any XID. ECC: an increase of the
    double-bit (uncorrectable) volatile counter. Temperature and idle spend mirror the CloudWatch alarms.
    """
    rules = [
        {
            "alert": "GpuXidError",
            "expr": "DCGM_FI_DEV_XID_ERRORS != 0",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}"},
        },
        {
            "alert": "GpuEccUncorrectableErrors",
            "expr": "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} had double-bit ECC errors"},
        },
        {
            "alert": "GpuTemperatureHigh",
            "expr": f"DCGM_FI_DEV_GPU_TEMP > {alerts.gpu_temperature_celsius:g}",
            "for": f"{TEMPERATURE_MINUTES}m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is at {{ $value }} C"},
        },
        {
            "alert": "GpuIdleSpend",
            "expr": f"avg(DCGM_FI_DEV_GPU_UTIL) < {alerts.idle_utilization_percent:g}",
            "for": f"{alerts.idle_minutes}m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "average GPU utilization is {{ $value }}%: GPUs are paid for and idle"},
        },
    ]
    return {"gpu-health": {"groups": [{"name": "gpu-health", "rules": rules}]}}


def alertmanager_config(region: str, topic_arn: str | None) -> dict[str, Any] | None:
    """Alertmanager routing to the alerts topic (Alertmanager `sns_configs` with SigV4 signing); None keeps the
    chart's default (alerts visible in Alertmanager only)."""
    if topic_arn is None:
        return None
    return {
        "route": {
            "receiver": "sns",
            "group_by": ["alertname"],
            "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}],
        },
        "receivers": [
            {"name": "null"},
            {"name": "sns", "sns_configs": [{"topic_arn": topic_arn, "sigv4": {"region": region}}]},
        ],
    }


def kube_prometheus_stack_values(spec: StackConfig, plans: Sequence[PoolPlan], topic_arn: str | None) -> dict[str, Any]:
    """Helm values of kube-prometheus-stack: controllers on the system pool, node-exporter on every node, our
    GPU rules, Alertmanager to SNS when a topic exists. Prometheus selects every ServiceMonitor/PrometheusRule
    (not only the release's), so the DCGM exporter's ServiceMonitor is scraped. Grafana stays off: the chart's
    default admin password is public; enable it with your own secret."""
    system = {"nodeSelector": dict(SYSTEM_NODE_SELECTOR), "tolerations": tolerations_for(system_plans(plans))}
    alertmanager: dict[str, Any] = {
        "serviceAccount": {"create": True, "name": ALERTMANAGER_SERVICE_ACCOUNT},
        "alertmanagerSpec": dict(system),
    }
    routing = alertmanager_config(spec.region, topic_arn)
    if routing is not None:
        alertmanager["config"] = routing
    return {
        "grafana": {"enabled": False},
        "prometheusOperator": dict(system),
        "kube-state-metrics": dict(system),
        "prometheus-node-exporter": {"tolerations": tolerations_for(plans)},
        "prometheus": {
            "prometheusSpec": {
                **system,
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
            }
        },
        "alertmanager": alertmanager,
        "additionalPrometheusRulesMap": prometheus_rules(spec.addons.monitoring.alerts),
    }


def as_json(document: Mapping[str, Any]) -> str:
    """Stable JSON for IAM and add-on documents (sorted keys: no spurious diffs between runs)."""
    return json.dumps(document, sort_keys=True)
