"""Helm values of the device plugins that make GPUs and EFA devices schedulable (pure, no Pulumi).

Sources (docs/sources.md: aws-gpu-facts.md): [NVDP] NVIDIA/k8s-device-plugin chart 0.20.0 (§8), [EKSCH]
aws/eks-charts aws-efa-k8s-device-plugin (§8).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from components import tags
from components.config import NvidiaDevicePlugin
from components.planning.addons.placement import (
    NODE_CRITICAL,
    SYSTEM_NODE_SELECTOR,
    gpu_plans,
    node_affinity,
    system_plans,
    tolerations_for,
)
from components.planning.dra import dra_plans
from components.planning.gpu_runtime import NVIDIA_RUNTIME_CLASS, runtime_class_plans
from components.planning.mig import (
    MIG_CONFIG_STATE_LABEL,
    MIG_STATE_SUCCESS,
    mig_devices,
    mig_plans,
    mig_resource,
)
from components.planning.pools import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    EFA_LABEL,
    GPU_PRESENT_LABEL,
    GPU_RESOURCE,
    MIG_CONFIG_LABEL,
    PoolPlan,
)

#: Helm release names of the two device plugins, and of the NVIDIA plugin's second release on the hybrid pools
#: whose pods name the `nvidia` RuntimeClass (the chart's `runtimeClassName` applies to its whole DaemonSet).
NVIDIA_DEVICE_PLUGIN_RELEASE = "nvidia-device-plugin"
NVIDIA_DEVICE_PLUGIN_RUNTIME_CLASS_RELEASE = "nvidia-device-plugin-runtime-class"
EFA_DEVICE_PLUGIN_RELEASE = "aws-efa-k8s-device-plugin"
#: The config-map entry nodes without a per-node config label get ([NVDP] `config.default`).
DEVICE_PLUGIN_DEFAULT_CONFIG = "default"


def device_plugin_config(
    mig_strategy: str, time_slicing_replicas: int = 1, mig_profiles: Sequence[str] = ()
) -> dict[str, Any]:
    """One device-plugin config file ([NVDP] `version: v1` format, facts §8): MIG strategy, and time-slicing
    when a GPU is advertised more than once.

    Time-sliced resources are the ones the node advertises: `nvidia.com/gpu` (whole GPUs, or MIG devices under the
    `single` strategy) or, on a MIG pool under `mixed`, each profile's `nvidia.com/mig-<profile>` ([NVDP] README
    "Shared Access to GPUs": time-slicing applies to `nvidia.com/gpu` and to the resources of the mixed strategy).

    `failRequestsGreaterThanOne` stays `false` although NVIDIA recommends `true` (the plugin then fails any
    container asking for more than one shared resource, [NVDP] README "With CUDA Time-Slicing"): a pod that needs a
    node's GPUs to itself asks for every slot (`blueprint verify`'s DCGM and NCCL pods, a training job on a
    time-sliced training pool), and `true` would refuse it. Serving replicas, which could get slices of one GPU,
    are held to one GPU by validation instead (`shared_gpus.serving_replicas_use_one_shared_gpu`).
    """
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
    if time_slicing_replicas > 1:
        names = [mig_resource(p) for p in mig_profiles] if mig_profiles and mig_strategy == "mixed" else [GPU_RESOURCE]
        config["sharing"] = {
            "timeSlicing": {
                "renameByDefault": False,
                "failRequestsGreaterThanOne": False,
                "resources": [{"name": name, "replicas": time_slicing_replicas} for name in names],
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
            entries[name] = device_plugin_config(
                mig_strategy, plan.pool.device_plugin.time_slicing_replicas, sorted(mig_devices(plan))
            )
    return {name: yaml.safe_dump(config, sort_keys=False) for name, config in entries.items()}


def nvidia_device_plugin_values(
    settings: NvidiaDevicePlugin, plans: Sequence[PoolPlan], runtime_class: bool = False
) -> dict[str, Any]:
    """Helm values of the NVIDIA device plugin: the release on every GPU node whose containerd runs the NVIDIA
    runtime by default, or (`runtime_class`) the release on the hybrid pools that reach it through the `nvidia`
    RuntimeClass (`components.planning.gpu_runtime`).

    Scheduling: the chart's default affinity needs node-feature-discovery labels or `nvidia.com/gpu.present=true`
    ([NVDP] §8); nodeadm sets that label by itself only from Kubernetes 1.35 ([AMI] §5b). Every GPU pool, cloud
    or hybrid, sets it through kubelet `--node-labels` (`PoolPlan.labels`), and the affinity here requires exactly
    that label, so the plugin lands on every GPU node and nowhere else, whatever the Kubernetes version.
    GPU feature discovery runs beside the plugin (same placement, same runtime class) for its version labels
    (`nvidia.com/cuda.driver-version.full`, `nvidia.com/cuda.runtime-version.full`, [GFDLABELS]), which
    `blueprint verify` compares with the catalog's pins (`node_feature_discovery_values`).
    Tolerations: every taint of every GPU pool the release serves (the chart's default tolerates only
    `nvidia.com/gpu` with any value), plus CriticalAddonsOnly.
    Bottlerocket NVIDIA nodes run the device plugin bundled in the OS (`settings.kubelet-device-plugins.nvidia`,
    aws-gpu-facts.md §5a); a second plugin there would fight it for `nvidia.com/gpu`, so those pools are excluded.
    DRA pools (`gpuAllocation: dra`) are excluded the same way: each pool has exactly one GPU allocator ([DRAGPU]
    templates/validation.yaml: the DRA driver and the device plugin cannot serve the same node).
    Runtime class: the chart sets `runtimeClassName` on its DaemonSet ([NVDP] templates/daemonset-device-plugin.yml
    @v0.20.0); under runc the plugin finds no NVIDIA library and advertises no GPU, so the pools that need the
    class get their own release with it, and the first release keeps off them (`gpu-clusters/pool NotIn`).
    """
    mig = settings.mig_strategy
    by_class = runtime_class_plans(plans)
    class_pools = {p.name for p in by_class}
    gpu = by_class if runtime_class else [p for p in gpu_plans(plans) if p.name not in class_pools]
    affinity = node_affinity(GPU_PRESENT_LABEL, ["true"])
    term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    if runtime_class:
        term["matchExpressions"].append({"key": tags.POOL, "operator": "In", "values": sorted(class_pools)})
    else:
        bundled = {p.name for p in gpu if p.kind == "aws" and p.pool.ami_family == "bottlerocket"}
        # DRA pools get their GPUs from NVIDIA's DRA driver alone (components.planning.addons.dra_driver)
        kept_off = bundled | class_pools | {p.name for p in dra_plans(gpu)}
        if kept_off:
            term["matchExpressions"].append({"key": tags.POOL, "operator": "NotIn", "values": sorted(kept_off)})
        if mig_plans(gpu):
            affinity = _after_mig_partitioning(affinity)
    values: dict[str, Any] = {
        "migStrategy": mig,
        "priorityClassName": NODE_CRITICAL,
        "tolerations": tolerations_for(gpu),
        "affinity": affinity,
        "gfd": {"enabled": True},
        "nfd": {"enabled": False} if runtime_class else node_feature_discovery_values(plans),
        "config": {"map": device_plugin_config_map(mig, gpu), "default": DEVICE_PLUGIN_DEFAULT_CONFIG},
    }
    if runtime_class:
        values["runtimeClassName"] = NVIDIA_RUNTIME_CLASS
    return values


def node_feature_discovery_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """The chart's node-feature-discovery dependency, in the first release only (one NFD per cluster; the chart
    enables it with `gfd.enabled` unless `nfd.enabled` says otherwise, [NVDP] Chart.yaml `condition`).

    GPU feature discovery writes its labels to a file under `/etc/kubernetes/node-feature-discovery/features.d` on
    the host ([NVDP] templates/daemonset-gfd.yml); NFD's worker on the same node reads that directory and its master
    puts the labels on the Node (`extraLabelNs: nvidia.com`, the chart's default). So the worker runs on every GPU
    node, cloud and hybrid, tolerating their taints, and nowhere else; master and garbage collector run on the
    system pool like the other controllers, tolerating its taints (its own, when it names them: the release waits
    for the master, so a master that cannot land there fails `pulumi up`).
    """
    gpu = gpu_plans(plans)
    controller = {"nodeSelector": dict(SYSTEM_NODE_SELECTOR), "tolerations": tolerations_for(system_plans(plans))}
    return {
        "enabled": True,
        "master": controller,
        "gc": controller,
        "worker": {
            "tolerations": tolerations_for(gpu),
            "affinity": node_affinity(GPU_PRESENT_LABEL, ["true"]),
            "priorityClassName": NODE_CRITICAL,
        },
    }


def _after_mig_partitioning(affinity: dict[str, Any]) -> dict[str, Any]:
    """Keep the plugin off a MIG node until its partitions exist: the node's single selector term becomes two (terms
    are ORed): nodes without `nvidia.com/mig.config`, and nodes whose mig-manager reports
    `nvidia.com/mig.config.state=success`.

    Without this the plugin would start on a fresh MIG node before the mig-manager partitioned it, advertise whole
    GPUs, and a pending pod could take one that is about to be split (NVIDIA/gpu-operator#2670 reports that race and
    the plugin failing to start on half-configured GPUs). The mig-manager sets the state to `pending` before it
    changes anything ([MIGPARTED] pkg/mig/reconfigure), so the DaemonSet controller also removes the plugin from a
    node whose config is changed later, and puts it back once the state is `success`.
    """
    required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = required["nodeSelectorTerms"]
    base = term["matchExpressions"]
    required["nodeSelectorTerms"] = [
        {"matchExpressions": [*base, {"key": MIG_CONFIG_LABEL, "operator": "DoesNotExist"}]},
        {"matchExpressions": [*base, {"key": MIG_CONFIG_STATE_LABEL, "operator": "In", "values": [MIG_STATE_SUCCESS]}]},
    ]
    return affinity


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
