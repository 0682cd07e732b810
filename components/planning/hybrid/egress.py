"""What the on-prem servers must reach outside the site (pure, no Pulumi): the AWS endpoints of their credential
provider, the endpoints nodeadm and the node agents call, and every registry the images run on them come from.

Invariant: the registries are derived from the images the plan puts on hybrid nodes (`hybrid_images`), never
listed by hand: the charts' images from the catalog (`components/catalog/images.yaml` `hybrid_node_images`, held to
the rendered charts by tests/charts/test_hybrid_images.py), the EKS add-ons' from the Region's EKS registry, the
serving workloads' from their config. The EKS regional API is left out: the NodeConfig carries the endpoint, CA and
service CIDR, so `nodeadm init` never calls `eks:DescribeCluster` (aws/eks-hybrid `configenricher.go`,
[NODEADMENRICH]). Endpoints: [HYBRIDEGRESS], [EKSAUTHEP], [ECRLAYERS], [EKSREGISTRY], [DOCKERALLOW].
Sources and the firewall table: docs/operations.md#what-the-servers-reach-egress.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from components.catalog.images import hybrid_node_images, image
from components.config import StackConfig
from components.planning.addons.selection import AddonSelection
from components.planning.hybrid.iam import Provider
from components.planning.mig import mig_devices
from components.planning.pools import PoolPlan

Phase = Literal["install", "ongoing"]

#: The account of the EKS image registry in every Region that is not opt-in (EKS user guide, "View Amazon container
#: image registries for Amazon EKS add-ons"; aws/eks-hybrid internal/aws/ecr/ecr.go `nonOptInRegionAccount`). An
#: opt-in Region has its own account, which that page lists.
EKS_REGISTRY_ACCOUNT = "602401143452"
#: The EKS managed add-ons whose pods run on hybrid nodes: kube-proxy and the Pod Identity agent's hybrid DaemonSet
#: on every server, a CoreDNS replica on one (components.managed_addons).
EKS_ADDONS_ON_HYBRID = ("coredns", "eks-pod-identity-agent", "kube-proxy")
#: The sandbox (pause) image nodeadm configures containerd with, from the same registry (aws/eks-hybrid
#: internal/aws/ecr/ecr.go `GetSandboxImage`: `eks/pause:3.5`).
PAUSE_IMAGE = "eks/pause:3.5"
#: Where Docker Hub images come from when the reference names no registry (`vllm/vllm-openai`).
DOCKER_HUB = "docker.io"
HTTPS = 443
#: Registries whose API lives on other hosts than their name: Docker Hub pulls go to registry-1.docker.io after a
#: token from auth.docker.io (Docker docs, "Allowlist for Docker Desktop": Authentication, Docker Pull/Push).
REGISTRY_HOSTS = {DOCKER_HUB: ("registry-1.docker.io", "auth.docker.io")}
#: What every registry entry adds: layer downloads may be redirected to a content delivery network whose hosts the
#: registry documents and changes (Docker's are listed on the same page).
CDN_NOTE = "layers may be redirected to the registry's CDN"


@dataclass(frozen=True)
class HybridImage:
    """An image that runs on hybrid nodes and what runs it (a chart release, an EKS add-on, a workload)."""

    runs_it: str
    reference: str

    @property
    def registry(self) -> str:
        return registry_of(self.reference)


@dataclass(frozen=True)
class Egress:
    """One destination the servers open HTTPS to: when (`install`: nodeadm install/upgrade; `ongoing`: every day),
    and why."""

    host: str
    phase: Phase
    why: str
    port: int = HTTPS

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "phase": self.phase, "why": self.why}


def registry_of(reference: str) -> str:
    """The registry host of an image reference, as container runtimes resolve it: the first path component when it
    looks like a host (has a dot or a port, or is `localhost`), else Docker Hub."""
    first, _, rest = reference.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return DOCKER_HUB


def eks_registry(region: str) -> str:
    return f"{EKS_REGISTRY_ACCOUNT}.dkr.ecr.{region}.amazonaws.com"


def hybrid_images(spec: StackConfig, addons: AddonSelection, plans: Sequence[PoolPlan]) -> list[HybridImage]:
    """Every image the plan runs on hybrid nodes, in a stable order; empty without hybrid pools.

    Charts: Cilium always; the NVIDIA device plugin and (with `dcgmPrometheus`) the DCGM exporter and node exporter
    when a hybrid pool has GPUs; the NFS CSI node plugin when a hybrid pool mounts `storage.nfs`; the MIG manager
    on a hybrid MIG pool. Then the EKS add-ons and nodeadm's pause image, then each serving workload on a hybrid
    pool.
    """
    hybrid = [p for p in plans if p.kind == "hybrid"]
    if not hybrid:
        return []
    names = {p.name for p in hybrid}
    gpu = any(p.is_gpu for p in hybrid)
    charts = ["cilium"]
    if gpu and addons.on("nvidia-device-plugin"):
        charts.append("nvidia-device-plugin")
    if gpu and addons.on("dcgm-prometheus"):
        charts += ["dcgm-exporter", "kube-prometheus-stack"]
    nfs = spec.storage.nfs
    # `storage.nfs.pools` defaults to every inference pool (components.config)
    mounting = (
        nfs.pools if nfs is not None and nfs.pools is not None else [p.name for p in hybrid if p.role == "inference"]
    )
    if nfs is not None and names & set(mounting):
        charts.append("csi-driver-nfs")
    found = [
        HybridImage(f"chart {chart}", pinned.reference) for chart in charts for pinned in hybrid_node_images(chart)
    ]
    if addons.on("mig-manager") and any(mig_devices(p) for p in hybrid):
        found.append(HybridImage("mig-manager", image("k8s-mig-manager").reference))
    registry = eks_registry(spec.region)
    found += [HybridImage(f"EKS add-on {name}", f"{registry}/eks/{name}") for name in EKS_ADDONS_ON_HYBRID]
    found.append(HybridImage("nodeadm (containerd sandbox)", f"{registry}/{PAUSE_IMAGE}"))
    for workload in spec.workloads.serving:
        if workload.pool in names:
            found.append(HybridImage(f"workload {workload.name}", workload.image or image("vllm-openai").reference))
    return found


def egress(region: str, providers: Iterable[Provider], images: Iterable[HybridImage]) -> list[Egress]:
    """The HTTPS destinations the servers need, after the EKS user guide's "Prepare networking for hybrid nodes"
    tables (install and ongoing) and aws/eks-hybrid; one entry per host, in a stable order.

    - install: hybrid-assets (nodeadm's artifacts and manifest); the SSM agent installer's bucket or the Roles
      Anywhere signing helper's host, per provider;
    - ongoing: SSM (credential refresh, heartbeats) or IAM Roles Anywhere; STS (`nodeadm init` checks the node's
      credentials with `sts:GetCallerIdentity`); EKS Auth (the Pod Identity agent); the ECR API, which issues the
      pull tokens of ECR registries, and the Region's ECR layer bucket (ECR user guide, "Amazon ECR interface VPC
      endpoints": layers come from `prod-<region>-starport-layer-bucket`); then every registry of `images`.
    """
    chosen = set(providers)
    rules = [
        Egress("hybrid-assets.eks.amazonaws.com", "install", "nodeadm install/upgrade: kubelet, CNI plugins, manifest")
    ]
    if "ssm" in chosen:
        rules.append(Egress(f"amazon-ssm-{region}.s3.{region}.amazonaws.com", "install", "SSM agent installer"))
        rules.append(
            Egress(
                f"ssm.{region}.amazonaws.com",
                "ongoing",
                "SSM hybrid activation: registration, credential refresh, heartbeats every 5 minutes",
            )
        )
    if "iam-roles-anywhere" in chosen:
        rules.append(Egress("rolesanywhere.amazonaws.com", "install", "IAM Roles Anywhere signing helper"))
        rules.append(
            Egress(f"rolesanywhere.{region}.amazonaws.com", "ongoing", "IAM Roles Anywhere credential refresh")
        )
    rules += [
        Egress(
            f"sts.{region}.amazonaws.com",
            "ongoing",
            "nodeadm init checks the node's credentials (sts:GetCallerIdentity)",
        ),
        Egress(f"eks-auth.{region}.api.aws", "ongoing", "EKS Pod Identity agent on each server"),
    ]
    by_registry: dict[str, list[str]] = {}
    for found in images:
        by_registry.setdefault(found.registry, [])
        if found.runs_it not in by_registry[found.registry]:
            by_registry[found.registry].append(found.runs_it)
    if any(host.endswith(".amazonaws.com") and ".dkr.ecr." in host for host in by_registry):
        rules += [
            Egress(f"api.ecr.{region}.amazonaws.com", "ongoing", "ECR pull tokens"),
            Egress(
                f"prod-{region}-starport-layer-bucket.s3.{region}.amazonaws.com",
                "ongoing",
                "ECR image layers (ECR serves them from this S3 bucket)",
            ),
        ]
    for registry, users in sorted(by_registry.items()):
        note = "" if ".dkr.ecr." in registry else f" ({CDN_NOTE})"  # ECR's layers: the bucket above
        why = f"image registry {registry}{note}: " + ", ".join(users)
        rules += [Egress(host, "ongoing", why) for host in REGISTRY_HOSTS.get(registry, (registry,))]
    return rules
