"""What a deployed cluster must show, derived from the stack's config exactly as `blueprint plan` derives it.

The stack's plan (`components.planning.stack_plan.plan_stack`: pools, add-on selection, storage) and the catalog
are the one source: pools and their min/max, GPUs and EFA devices per node, fabric Gbps, storage throughput, which
DaemonSets run where. Nothing here is a second table of facts; `blueprint verify` only compares.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blueprint.verify.pods import DEFAULT_RUN_AS
from components import catalog, tags
from components.catalog.node_software import NodeSoftware, ami_release_software, ami_releases, on_prem_software
from components.config import LustreConfig, StackConfig
from components.planning.addons.device_plugins import (
    EFA_DEVICE_PLUGIN_RELEASE,
    NVIDIA_DEVICE_PLUGIN_RELEASE,
    NVIDIA_DEVICE_PLUGIN_RUNTIME_CLASS_RELEASE,
)
from components.planning.addons.dra_driver import DRA_DRIVER_RELEASE
from components.planning.addons.monitoring import (
    CLOUDWATCH_NAMESPACE,
    DCGM_EXPORTER_RELEASE,
    DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE,
    DCGM_EXPORTER_RUNTIME_CLASS_RELEASE,
    MONITORING_NAMESPACE,
)
from components.planning.addons.node_monitoring import (
    AGENT_CONDITIONS,
    AGENT_DAEMONSET,
    DCGM_SERVER_DAEMONSET,
    NODE_MONITORING_NAMESPACE,
    monitored_gpu_plans,
)
from components.planning.addons.placement import KUBE_SYSTEM
from components.planning.addons.selection import AddonSelection
from components.planning.dra import allocates_through_dra
from components.planning.gpu_runtime import NVIDIA_RUNTIME_CLASS, runtime_class_plans
from components.planning.health_checks import nvlink_links_per_gpu
from components.planning.lustre_directories import workload_directories
from components.planning.mig import advertised_gpus, advertised_resources, mig_devices
from components.planning.pools import GPU_RESOURCE, PoolPlan
from components.planning.stack_plan import plan_stack
from components.planning.storage import EFS_PER_CLIENT_MIBPS, MB_PER_GBIT, MB_PER_MIB
from components.planning.tolerations import toleration

#: The DaemonSet each chart creates is named after its release: the charts' `fullname` helper returns the release
#: name when it contains the chart name ([NVDP] templates/_helpers.tpl and daemonset-device-plugin.yml @v0.20.0;
#: [EKSCH] aws-efa-k8s-device-plugin templates/_helpers.tpl and daemonset.yaml; [DCGM] deployment/templates). The
#: CloudWatch add-on's exporter is its `DcgmExporter` resource `dcgm-exporter` in `amazon-cloudwatch`, which the
#: add-on's operator runs as a DaemonSet of the same name and namespace ([CWCHART]).
NVIDIA_DEVICE_PLUGIN_DAEMONSETS = (NVIDIA_DEVICE_PLUGIN_RELEASE, NVIDIA_DEVICE_PLUGIN_RUNTIME_CLASS_RELEASE)
EFA_DEVICE_PLUGIN_DAEMONSETS = (EFA_DEVICE_PLUGIN_RELEASE,)
PROMETHEUS_EXPORTER_DAEMONSETS = (DCGM_EXPORTER_RELEASE, DCGM_EXPORTER_RUNTIME_CLASS_RELEASE)
CLOUDWATCH_EXPORTER_DAEMONSETS = ("dcgm-exporter",)
#: The DRA driver's kubelet plugin: `<chart name>-kubelet-plugin` ([DRAGPU] templates/kubeletplugin.yaml).
DRA_KUBELET_PLUGIN_DAEMONSETS = (f"{DRA_DRIVER_RELEASE}-kubelet-plugin",)


@dataclass(frozen=True)
class Daemon:
    """A DaemonSet that must have a Ready pod on a node: its namespace and the names it may have."""

    what: str
    namespace: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Interconnect:
    """How the GPUs of one node must see each other in `nvidia-smi topo -m`: NVLink between every pair (`NV<links>`,
    any count when the catalog does not give one), or PCIe only."""

    nvlink: bool
    links: int | None
    description: str


@dataclass(frozen=True)
class PoolExpectation:
    name: str
    kind: str
    role: str
    min_nodes: int
    max_nodes: int
    gpu_model: str | None
    #: `nvidia.com/gpu` a node advertises: GPUs times time-slicing replicas (by instance type for mixed pools).
    gpus_by_type: dict[str, int]
    #: Every `nvidia.com/gpu` slot a node advertises (GPUs x replicas; MIG devices under `single`, 0 under
    #: `mixed`): a test pod requests all of them, so it holds the node's GPUs alone.
    gpus_per_node: int
    #: Physical GPUs per node: what `-g` and the topology matrix count.
    physical_gpus: int
    #: Every GPU resource a node advertises by instance type (`components.planning.mig.advertised_resources`:
    #: `nvidia.com/gpu`, and one `nvidia.com/mig-<profile>` per profile on a `mixed` MIG pool).
    resources_by_type: dict[str, dict[str, int]]
    resources_per_node: dict[str, int]
    #: `7x 1g.10gb per GPU` on a MIG pool, None on whole GPUs.
    mig_layout: str | None
    efa_devices: int
    fabric_gbps: float
    network_gbps: float
    tolerations: tuple[dict[str, str], ...]
    daemons: tuple[Daemon, ...]
    interconnect: Interconnect | None
    #: The node conditions the EKS node monitoring agent must report True on the pool's nodes (its cloud GPU pools;
    #: none where the agent does not run: on-prem servers, CPU pools).
    health_conditions: tuple[str, ...] = ()
    #: The RuntimeClass a GPU pod on the pool names (`nvidia` on `gpuRuntime: runtime-class` hybrid pools, whose
    #: containerd runs the NVIDIA runtime only for pods that ask for it), None elsewhere.
    runtime_class: str | None = None
    #: The driver, CUDA and container toolkit versions the catalog pins for the pool's nodes (its AMI release, or
    #: the on-prem runbook); None on CPU pools and where the catalog pins none, `node_software_gap` saying why.
    node_software: NodeSoftware | None = None
    node_software_gap: str | None = None
    #: GPUs allocated through NVIDIA's DRA driver: no `nvidia.com/gpu` on the nodes, so the checks whose pods ask
    #: for it skip the pool (`components.planning.dra`).
    dra: bool = False

    @property
    def is_gpu(self) -> bool:
        return self.physical_gpus > 0

    @property
    def selector(self) -> dict[str, str]:
        return {tags.POOL: self.name}

    def advertised_gpus(self, instance_type: str | None) -> int:
        """What a node of this instance type must advertise (the pool's figure for hybrid or unknown types)."""
        return self.gpus_by_type.get(instance_type or "", self.gpus_per_node)

    def advertised_resources(self, instance_type: str | None) -> dict[str, int]:
        """Every GPU resource a node of this instance type must advertise (the pool's figures when unknown)."""
        return self.resources_by_type.get(instance_type or "", self.resources_per_node)


@dataclass(frozen=True)
class StorageExpectation:
    name: str
    kind: str
    namespace: str
    claim: str
    pools: tuple[str, ...]
    #: The file system's throughput (plan summary `throughputMBps`), and what one client can reach at most.
    throughput_mbps: float | None
    per_client_mbps: float | None
    #: The (uid, gid) the probe runs as, and the directory under the claim's root it writes in: for Lustre the
    #: namespace's workload directory and its owner (`storage.lustre.workloadDirectories`), else the root.
    run_as: tuple[int, int] = DEFAULT_RUN_AS
    directory: str | None = None


@dataclass(frozen=True)
class Expectations:
    cluster: str
    pools: tuple[PoolExpectation, ...]
    storage: tuple[StorageExpectation, ...]

    def pool(self, name: str) -> PoolExpectation | None:
        return next((p for p in self.pools if p.name == name), None)


def load_spec(stack: str | None, config_file: Path | None) -> StackConfig:
    """The validated stack config, read as `blueprint plan` reads it (no Pulumi run needed: only the plans are
    used). Raises ConfigError or FileNotFoundError."""
    from blueprint.plan.runner import load_stack
    from components.validation import validate_config

    files = load_stack(stack, config_file)
    return validate_config(files.config, project=files.project)


def interconnect(plan: PoolPlan) -> Interconnect | None:
    """From the catalog: an instance type with an `nvlink` entry has NVLink (NVSwitch) between every GPU pair; a
    PCIe GPU model without one has PCIe paths only. None when the catalog does not say."""
    if not plan.is_gpu:
        return None
    nvlink = plan.instance.nvlink if plan.instance else None
    if nvlink:
        # "NVSwitch, NVLink 4 (18 links/GPU), ...": every GPU pair shows `NV18`
        return Interconnect(True, nvlink_links_per_gpu(plan), nvlink)
    model = catalog.gpu_models().get(plan.gpu_model or "")
    if model is not None and model.form_factor == "PCIe":
        return Interconnect(False, None, f"{model.name} PCIe: no NVLink switch")
    return None


def _resources_by_type(plan: PoolPlan) -> dict[str, dict[str, int]]:
    """The pool's advertised resources scaled to each instance type's GPU count (every figure is GPUs x a per-GPU
    count, so the division is exact)."""
    per_node = _advertised(plan)
    types = catalog.instance_types()
    if not plan.gpus_per_node:
        return {}
    return {
        t: {r: n // plan.gpus_per_node * types[t].gpu_count for r, n in per_node.items()}
        for t in plan.instance_types
        if t in types
    }


def _advertised(plan: PoolPlan) -> dict[str, int]:
    """The GPU resources a node shows in `allocatable`: none on a DRA pool, whose GPUs are ResourceSlice devices."""
    return {} if allocates_through_dra(plan) else advertised_resources(plan, plan.mig_strategy)


def mig_layout(plan: PoolPlan) -> str | None:
    """`7x 1g.10gb per GPU`: the pool's MIG partitioning in words, None on whole GPUs."""
    devices = mig_devices(plan)
    if not devices:
        return None
    return ", ".join(f"{count}x {profile}" for profile, count in sorted(devices.items())) + " per GPU"


def _daemons(plan: PoolPlan, selection: AddonSelection) -> tuple[Daemon, ...]:
    found: list[Daemon] = []
    bundled = plan.kind == "aws" and plan.pool.ami_family == "bottlerocket"
    if allocates_through_dra(plan):
        found.append(Daemon("NVIDIA DRA driver kubelet plugin", KUBE_SYSTEM, DRA_KUBELET_PLUGIN_DAEMONSETS))
    elif plan.is_gpu and selection.on("nvidia-device-plugin") and not bundled:
        found.append(Daemon("NVIDIA device plugin", KUBE_SYSTEM, NVIDIA_DEVICE_PLUGIN_DAEMONSETS))
    if plan.efa and selection.on("efa-device-plugin"):
        found.append(Daemon("EFA device plugin", KUBE_SYSTEM, EFA_DEVICE_PLUGIN_DAEMONSETS))
    if plan.is_gpu and selection.on("dcgm-prometheus"):
        by_class = plan.kind == "hybrid" and plan.pool.gpu_runtime == "runtime-class"
        namespace = DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE if by_class else MONITORING_NAMESPACE
        found.append(Daemon("DCGM exporter", namespace, PROMETHEUS_EXPORTER_DAEMONSETS))
    elif plan.is_gpu and plan.kind == "aws" and selection.on("container-insights"):
        found.append(Daemon("DCGM exporter (Container Insights)", CLOUDWATCH_NAMESPACE, CLOUDWATCH_EXPORTER_DAEMONSETS))
    if monitored_gpu_plans([plan]):
        found.append(Daemon("EKS node monitoring agent", NODE_MONITORING_NAMESPACE, (AGENT_DAEMONSET,)))
        found.append(
            Daemon("node monitoring agent's DCGM host engine", NODE_MONITORING_NAMESPACE, (DCGM_SERVER_DAEMONSET,))
        )
    return tuple(found)


def node_software(plan: PoolPlan) -> tuple[NodeSoftware | None, str | None]:
    """What the catalog pins for a GPU pool's nodes, or why it pins nothing: hybrid servers follow the on-prem
    runbook, AL2023 pools their AMI release; Bottlerocket releases are not in the catalog."""
    if not plan.is_gpu:
        return None, None
    if plan.kind == "hybrid":
        return on_prem_software(), None
    if plan.pool.ami_family != "al2023":
        return None, f"{plan.pool.ami_family} pool: the catalog pins no driver versions for its releases"
    pinned = ami_release_software(plan.ami_release or "")
    if pinned is None:
        known = ", ".join(sorted(ami_releases()))
        return None, (
            f"the catalog lists no driver versions for AMI release {plan.ami_release} (it knows {known}): add them "
            "from the release notes to node_software in components/catalog/versions.yaml"
        )
    return pinned, None


def pool_expectation(plan: PoolPlan, selection: AddonSelection) -> PoolExpectation:
    software, gap = node_software(plan)
    return PoolExpectation(
        name=plan.name,
        kind=plan.kind,
        role=plan.role,
        min_nodes=plan.min_nodes,
        max_nodes=plan.max_nodes,
        gpu_model=plan.gpu_model,
        gpus_by_type={t: r.get(GPU_RESOURCE, 0) for t, r in _resources_by_type(plan).items()},
        gpus_per_node=advertised_gpus(plan),
        physical_gpus=plan.gpus_per_node,
        resources_by_type=_resources_by_type(plan),
        resources_per_node=_advertised(plan),
        mig_layout=mig_layout(plan),
        efa_devices=plan.efa_devices,
        fabric_gbps=plan.fabric_gbps,
        network_gbps=plan.instance.network_gbps if plan.instance else 0.0,
        tolerations=tuple(toleration(t) for t in plan.taints),
        dra=allocates_through_dra(plan),
        daemons=_daemons(plan, selection),
        interconnect=interconnect(plan),
        runtime_class=NVIDIA_RUNTIME_CLASS if runtime_class_plans([plan]) else None,
        health_conditions=AGENT_CONDITIONS if monitored_gpu_plans([plan]) else (),
        node_software=software,
        node_software_gap=gap,
    )


def _storage(
    entry: dict[str, Any], pools: dict[str, PoolExpectation], lustre: LustreConfig | None = None
) -> StorageExpectation:
    """One file system: what one client may reach is the least of the file system's throughput, the mounting
    nodes' network bandwidth and, for EFS, its per-client limit (components.planning.storage)."""
    namespace, _, claim = str(entry["claim"]).partition("/")
    mounted = tuple(entry.get("mountedBy") or ())
    limits = [pools[p].network_gbps * MB_PER_GBIT for p in mounted if p in pools and pools[p].network_gbps]
    if entry["kind"] == "efs":
        limits.append(EFS_PER_CLIENT_MIBPS * MB_PER_MIB)
    if entry.get("throughputMBps"):
        limits.append(float(entry["throughputMBps"]))
    return StorageExpectation(
        name=str(entry["name"]),
        kind=str(entry["kind"]),
        namespace=namespace,
        claim=claim,
        pools=mounted,
        throughput_mbps=entry.get("throughputMBps"),
        per_client_mbps=min(limits) if limits else None,
        **_probe_user(entry, lustre),
    )


def _probe_user(entry: dict[str, Any], lustre: LustreConfig | None) -> dict[str, Any]:
    """Lustre: the namespace's workload directory and its owner, so the probe writes where a workload pod can."""
    if entry["kind"] != "lustre" or lustre is None:
        return {}
    directories = workload_directories(lustre)
    if not directories:
        return {}
    return {"run_as": (directories[0].uid, directories[0].gid), "directory": directories[0].namespace}


def expectations(spec: StackConfig) -> Expectations:
    stack_plan = plan_stack(spec)
    pools = tuple(pool_expectation(p, stack_plan.addons) for p in stack_plan.pools)
    by_name = {p.name: p for p in pools}
    storage = tuple(_storage(e, by_name, spec.storage.lustre) for e in stack_plan.storage)
    return Expectations(cluster=spec.cluster.name, pools=pools, storage=storage)
