"""The rules of the policy pack, as plain functions over plain data.

Each resource rule takes one `Resource` and the policy's config and yields violation messages; each stack rule
takes the whole `Stack` and the config and yields `(message, urn)` pairs. `policies.pack` wraps them as the
policy SDK's `ResourceValidationPolicy` / `StackValidationPolicy` objects with names, descriptions and levels;
`blueprint.plan.check` runs those same objects over the offline plan. Nothing here imports Pulumi's engine, so the
rules are cheap to test and read the same everywhere.

Facts come from shared/reference/aws-gpu-facts.md (tags such as [EFAD], [BC], [NVDP], [NTH]) or from the AWS page
named next to the rule. Instance facts come from the catalog (`components.catalog`), Lustre sizing steps from the
storage planner (`components.planning.lustre`): one copy of each fact, shared with the components that obey it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from components import tags as tag_keys
from components.catalog import InstanceType, format_card_ranges, instance_type
from components.catalog.versions import EXACT_VERSION, chart, version_at_least
from components.planning import lustre as lustre_steps
from policies.resources import (
    AUTOSCALING_GROUP,
    BUCKET_ENCRYPTION,
    BUCKET_PUBLIC_ACCESS_BLOCK,
    BUCKET_VERSIONING,
    BUCKETS,
    EFS,
    EKS_CLUSTER,
    HELM_TYPES,
    KMS_KEY,
    LAUNCH_TEMPLATE,
    LUSTRE,
    PLACEMENT_GROUP,
    SECURITY_GROUP,
    SG_EGRESS_RULE,
    SG_INGRESS_RULE,
    SG_RULE,
    SUBNET,
    Resource,
    Stack,
    get,
    items,
    peek,
    strings,
    tag_map,
    truthy,
)

Config = Mapping[str, Any]
#: Stack rules yield (message, urn of the offending resource, or None for the stack as a whole).
StackViolations = Iterator[tuple[str, str | None]]

EFA_TYPES = ("efa", "efa-only")
#: Capacity types whose instances AWS places itself: a capacity block or reservation is already a fixed set of
#: hosts, and forcing a cluster placement group on it fails with InsufficientInstanceCapacity
#: (terraform-aws-eks PR #3730, eksctl #7949, aws-gpu-facts.md §2 "Placement / AZ").
RESERVED_CAPACITY = ("capacity-block", "reservation")
#: Chart names of the Helm releases the rules look for, as pinned in components/catalog/versions.yaml.
NVIDIA_DEVICE_PLUGIN_CHART = chart("nvidia-device-plugin").chart
EFA_DEVICE_PLUGIN_CHART = chart("aws-efa-k8s-device-plugin").chart
TERMINATION_HANDLER_CHART = chart("aws-node-termination-handler").chart
#: Tolerations the NVIDIA device plugin chart ships when `values.tolerations` is not set ([NVDP] values.yaml):
#: `CriticalAddonsOnly` Exists and `nvidia.com/gpu` Exists NoSchedule. Helm replaces lists, so setting
#: `tolerations` replaces these.
NVIDIA_DEVICE_PLUGIN_DEFAULT_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
#: The EFA device plugin chart's default `tolerations` is empty ([EKSCH], aws-gpu-facts.md §8).
EFA_DEVICE_PLUGIN_DEFAULT_TOLERATIONS: tuple[Mapping[str, str], ...] = ()
#: cluster-autoscaler reads a node group's taints from these ASG tags when scaling from zero ([CA], facts §6).
CA_TAINT_TAG_PREFIX = "k8s.io/cluster-autoscaler/node-template/taint/"


# ============================================================================================ launch templates
@dataclass(frozen=True)
class Interface:
    """One `networkInterfaces` entry of a launch template."""

    card: int
    device: int
    type: str
    public_ip: bool
    security_groups: tuple[str, ...]

    @property
    def is_efa(self) -> bool:
        return self.type in EFA_TYPES


def interfaces(lt: Resource) -> list[Interface]:
    out = []
    for nic in items(lt.get("networkInterfaces")):
        try:
            groups = tuple(strings(get(nic, "securityGroups")))
        except UnknownValueError:
            groups = ()
        out.append(
            Interface(
                card=int(get(nic, "networkCardIndex", default=0)),
                device=int(get(nic, "deviceIndex", default=0)),
                type=str(get(nic, "interfaceType", default="interface")),
                public_ip=truthy(get(nic, "associatePublicIpAddress", default=False)),
                security_groups=groups,
            )
        )
    return out


def is_efa_launch_template(lt: Resource | None) -> bool:
    """EFA pools are launch templates with at least one `efa` or `efa-only` interface."""
    return lt is not None and lt.type == LAUNCH_TEMPLATE and any(i.is_efa for i in interfaces(lt))


def catalog_entry(name: str) -> tuple[InstanceType | None, str]:
    """The catalog entry of an instance type, or None and the catalog's message (which suggests close names)."""
    try:
        return instance_type(name), ""
    except KeyError as e:
        return None, str(e.args[0] if e.args else e)


def efa_interfaces_complete(lt: Resource, config: Config) -> Iterator[str]:
    """An EFA launch template wires every EFA device its instance type has, on the cards that carry EFA.

    A p5.48xlarge has 32 EFA interfaces on 32 network cards; wiring fewer silently caps the fabric (each missing
    interface is 100 Gbps). Counts and card indexes come from the catalog ([KP] `vpc.amazonaws.com/efa`, [EFAD]).
    The primary interface must sit at network card 0, device 0 and must not be `efa-only` ([BC] ec2
    `NetworkCardIndex`; [EFAD] "You can't use an EFA-only network interface as the primary network interface").
    """
    nics = interfaces(lt)
    efa = [i for i in nics if i.is_efa]
    if not efa:
        return
    type_name = str(lt.get("instanceType", default=""))
    entry, problem = catalog_entry(type_name)
    if entry is None:
        yield f"launch template '{lt.name}' wires EFA but its instance type cannot be checked: {problem}"
        return
    if not entry.efa_supported:
        yield f"launch template '{lt.name}' wires EFA, but {type_name} has no EFA"
        return
    if len(efa) != entry.max_efa_interfaces:
        yield (
            f"launch template '{lt.name}' wires {len(efa)} of the {entry.max_efa_interfaces} EFA devices of "
            f"{type_name}; wire one EFA interface on each EFA network card ({format_card_ranges(entry.efa_cards)})"
        )
    stray = sorted({i.card for i in efa} - set(entry.efa_cards))
    if stray:
        yield (
            f"launch template '{lt.name}' puts EFA interfaces on network cards {format_card_ranges(stray)}, "
            f"which carry no EFA on {type_name}"
        )
    seen: set[tuple[int, int]] = set()
    for nic in nics:
        if (nic.card, nic.device) in seen:
            yield f"launch template '{lt.name}' has two interfaces at network card {nic.card}, device {nic.device}"
        seen.add((nic.card, nic.device))
    primary = [i for i in nics if (i.card, i.device) == (0, 0)]
    if not primary:
        yield f"launch template '{lt.name}' has no primary interface at network card 0, device 0"
    elif primary[0].type == "efa-only":
        yield f"launch template '{lt.name}': the primary interface (card 0, device 0) cannot be efa-only"


def imdsv2_required(lt: Resource, config: Config) -> Iterator[str]:
    """Instance metadata needs session tokens (IMDSv2) and a small hop limit.

    IMDSv1 answers any request that reaches 169.254.169.254, which is how SSRF bugs leak node credentials;
    `httpTokens: required` turns it off (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-IMDS-new-instances.html).
    AWS recommends a hop limit of 2 in container environments, 1 to keep pods off the node's role entirely
    (same guide, "Instance metadata access considerations"); `maxHopLimit` sets the ceiling.
    """
    tokens = lt.get("metadataOptions", "httpTokens", default="optional")
    if tokens != "required":
        yield f"launch template '{lt.name}' allows IMDSv1 (metadataOptions.httpTokens is '{tokens}', not 'required')"
    hops = lt.get("metadataOptions", "httpPutResponseHopLimit")
    ceiling = config.get("maxHopLimit")
    if hops is not None and ceiling is not None and int(hops) > int(ceiling):
        yield f"launch template '{lt.name}' sets an IMDS hop limit of {hops}; at most {ceiling} is allowed"


def no_public_ip(lt: Resource, config: Config) -> Iterator[str]:
    """Nodes live in private subnets and never get a public IP address; they reach AWS through NAT or endpoints."""
    for nic in interfaces(lt):
        if nic.public_ip:
            yield (
                f"launch template '{lt.name}' asks for a public IP on network card {nic.card}, device {nic.device} "
                "(associatePublicIpAddress)"
            )


def encrypted_root_volume(lt: Resource, config: Config) -> Iterator[str]:
    """Every EBS volume of a node, the root volume first, is encrypted (with a KMS key when `requireKmsKey`).

    Without a block device mapping the root volume inherits the AMI snapshot's setting, which for the EKS AMIs is
    unencrypted unless the account turned on EBS encryption by default
    (https://docs.aws.amazon.com/ebs/latest/userguide/ebs-encryption.html); the policy cannot see that account
    setting, so the launch template has to say it.
    """
    mappings = [m for m in items(lt.get("blockDeviceMappings")) if get(m, "ebs") is not None]
    if not mappings:
        yield (
            f"launch template '{lt.name}' has no EBS block device mapping, "
            "so its root volume encryption is left to the AMI"
        )
        return
    for m in mappings:
        device = get(m, "deviceName", default="?")
        if not truthy(get(m, "ebs", "encrypted", default=False)):
            yield f"launch template '{lt.name}': EBS volume {device} is not encrypted"
        elif config.get("requireKmsKey", False) and not get(m, "ebs", "kmsKeyId"):
            yield f"launch template '{lt.name}': EBS volume {device} is encrypted without a KMS key (kmsKeyId)"


# ======================================================================================================= data
def storage_encrypted(fs: Resource, config: Config) -> Iterator[str]:
    """File systems are encrypted at rest, with the cluster's KMS key when `requireKmsKey`.

    EFS encrypts only when asked (`encrypted` defaults to false, [BC] efs CreateFileSystem). FSx for Lustre always
    encrypts at rest, but only PERSISTENT deployment types take a customer-managed key; SCRATCH types use an
    FSx-managed key (https://docs.aws.amazon.com/fsx/latest/LustreGuide/encryption-at-rest.html).
    """
    require_kms = bool(config.get("requireKmsKey", False))
    if fs.type == EFS:
        if not truthy(fs.get("encrypted", default=False)):
            yield f"EFS file system '{fs.name}' is not encrypted at rest (encrypted: true)"
        elif require_kms and not fs.get("kmsKeyId"):
            yield f"EFS file system '{fs.name}' is encrypted without a KMS key (kmsKeyId)"
    elif fs.type == LUSTRE and require_kms:
        deployment = str(fs.get("deploymentType", default=LUSTRE_API_DEFAULT_DEPLOYMENT))
        if deployment.startswith("SCRATCH"):
            yield (
                f"Lustre file system '{fs.name}' is {deployment}, which cannot use a KMS key of yours; "
                "use PERSISTENT_2 with kmsKeyId"
            )
        elif not fs.get("kmsKeyId"):
            yield f"Lustre file system '{fs.name}' is encrypted only with the FSx-managed key; set kmsKeyId"


#: Types whose loss loses data: file systems, buckets and the KMS key that decrypts them.
STATEFUL_TYPES = frozenset({LUSTRE, EFS, KMS_KEY, *BUCKETS})


def stateful_protected(r: Resource, config: Config) -> Iterator[str]:
    """Stateful resources carry Pulumi's `protect` option, so no `destroy` or replacement deletes them by accident.

    Stateful means a file system, a bucket, a KMS key, or any resource tagged `gpu-clusters/stateful=true`
    (https://www.pulumi.com/docs/iac/concepts/options/protect/).
    """
    stateful = r.type in STATEFUL_TYPES or r.tags().get(tag_keys.STATEFUL) == "true"
    if stateful and not r.protect:
        yield f"{r.type.split(':')[-1]} '{r.name}' holds state but is not protected (ResourceOptions(protect=True))"


#: FSx for Lustre API default deployment type when none is given ([BC] `LustreDeploymentType`).
LUSTRE_API_DEFAULT_DEPLOYMENT = "SCRATCH_1"
#: SCRATCH_1: 1200, 2400, then increments of 3600 GiB ([BC] CreateFileSystem `StorageCapacity`).
SCRATCH_1_FIRST_STEPS = (1200, 2400)
SCRATCH_1_INCREMENT = 3600
#: PERSISTENT_1: SSD takes 50/100/200 MB/s/TiB on the SSD steps; HDD takes 12 or 40 MB/s/TiB and grows in
#: 6000 or 1800 GiB steps ([BC] `PerUnitStorageThroughput`, `StorageCapacity`).
PERSISTENT_1_SSD_THROUGHPUTS = (50, 100, 200)
PERSISTENT_1_HDD_INCREMENTS = {12: 6000, 40: 1800}


def lustre_valid_size(fs: Resource, config: Config) -> Iterator[str]:
    """Lustre storage capacity and per-unit throughput are on the steps the FSx API accepts.

    The API rejects other values at create time, after the rest of the stack is half built; the steps are the
    planner's (`components.planning.lustre`, [BC] and the FSx guide) plus the deployment types the blueprint does
    not create itself (SCRATCH_1, PERSISTENT_1). EFA needs PERSISTENT_2 with a metadata configuration ([3c]).
    """
    deployment = str(fs.get("deploymentType", default=LUSTRE_API_DEFAULT_DEPLOYMENT))
    capacity = int(fs.get("storageCapacity", default=0))
    throughput = fs.get("perUnitStorageThroughput")
    storage_type = str(fs.get("storageType", default="SSD"))
    efa = truthy(fs.get("efaEnabled", default=False))
    where = f"Lustre file system '{fs.name}' ({deployment}, {capacity} GiB)"

    def on_steps(first: tuple[int, ...], step: int) -> bool:
        return capacity in first or (capacity > 0 and capacity % step == 0)

    if efa:
        if deployment != "PERSISTENT_2":
            yield f"{where}: EFA needs PERSISTENT_2"
        if fs.get("metadataConfiguration") is None:
            yield f"{where}: EFA needs a metadataConfiguration"
    if deployment == "PERSISTENT_2":
        if throughput not in lustre_steps.PERSISTENT_2_THROUGHPUTS:
            valid = list(lustre_steps.PERSISTENT_2_THROUGHPUTS)
            yield f"{where}: perUnitStorageThroughput {throughput} is not one of {valid}"
        elif efa:
            step = lustre_steps.EFA_INCREMENTS[int(throughput)]
            if capacity <= 0 or capacity % step:
                yield f"{where}: an EFA-enabled file system at {throughput} MB/s/TiB grows in steps of {step} GiB"
        elif not on_steps(lustre_steps.SSD_FIRST_STEPS, lustre_steps.SSD_INCREMENT):
            yield f"{where}: capacity must be 1200, 2400 or a multiple of {lustre_steps.SSD_INCREMENT} GiB"
    elif deployment == "SCRATCH_2" or deployment == "SCRATCH_1":
        if throughput is not None:
            yield f"{where}: SCRATCH file systems take no perUnitStorageThroughput"
        first, step = (
            (lustre_steps.SSD_FIRST_STEPS, lustre_steps.SSD_INCREMENT)
            if deployment == "SCRATCH_2"
            else (SCRATCH_1_FIRST_STEPS, SCRATCH_1_INCREMENT)
        )
        if not on_steps(first, step):
            yield f"{where}: capacity must be {first[0]}, {first[1]} or a multiple of {step} GiB"
    elif deployment == "PERSISTENT_1":
        if storage_type == "HDD":
            if throughput not in PERSISTENT_1_HDD_INCREMENTS:
                yield f"{where}: HDD perUnitStorageThroughput must be 12 or 40, not {throughput}"
            elif capacity <= 0 or capacity % (step := PERSISTENT_1_HDD_INCREMENTS[int(throughput)]):
                yield f"{where}: HDD at {throughput} MB/s/TiB grows in steps of {step} GiB"
        else:
            if throughput not in PERSISTENT_1_SSD_THROUGHPUTS:
                valid = list(PERSISTENT_1_SSD_THROUGHPUTS)
                yield f"{where}: SSD perUnitStorageThroughput must be one of {valid}, not {throughput}"
            if not on_steps(lustre_steps.SSD_FIRST_STEPS, lustre_steps.SSD_INCREMENT):
                yield f"{where}: capacity must be 1200, 2400 or a multiple of {lustre_steps.SSD_INCREMENT} GiB"
    else:
        yield f"{where}: unknown deployment type"


# ============================================================================================== control plane
def eks_endpoint_private(cluster: Resource, config: Config) -> Iterator[str]:
    """The Kubernetes API has a private endpoint; a public one only behind an allow-list.

    EKS defaults to a public endpoint open to 0.0.0.0/0 and no private endpoint
    (https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html).
    """
    if not truthy(cluster.get("vpcConfig", "endpointPrivateAccess", default=False)):
        yield f"EKS cluster '{cluster.name}' has no private API endpoint (vpcConfig.endpointPrivateAccess)"
    if truthy(cluster.get("vpcConfig", "endpointPublicAccess", default=True)):
        cidrs = strings(cluster.get("vpcConfig", "publicAccessCidrs"))
        if not cidrs:
            yield f"EKS cluster '{cluster.name}' has a public API endpoint without an allow-list (publicAccessCidrs)"
        for cidr in cidrs:
            if is_world(cidr):
                yield f"EKS cluster '{cluster.name}' opens its public API endpoint to {cidr}"


def eks_secrets_encryption(cluster: Resource, config: Config) -> Iterator[str]:
    """Kubernetes secrets are envelope-encrypted with a KMS key of the cluster's own
    (https://docs.aws.amazon.com/eks/latest/userguide/enable-kms.html)."""
    raw = cluster.get("encryptionConfig")
    # pulumi-aws 7 takes one object; older providers took a list of them.
    configs = [raw] if isinstance(raw, Mapping) else items(raw)
    if not any("secrets" in strings(get(c, "resources")) and get(c, "provider", "keyArn") for c in configs):
        yield f"EKS cluster '{cluster.name}' does not encrypt secrets with a KMS key (encryptionConfig)"


def eks_control_plane_logging(cluster: Resource, config: Config) -> Iterator[str]:
    """The control plane ships the `requiredLogTypes` logs to CloudWatch; `audit` is who did what
    (https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html)."""
    enabled = set(strings(cluster.get("enabledClusterLogTypes")))
    missing = [t for t in config.get("requiredLogTypes") or [] if t not in enabled]
    if missing:
        yield f"EKS cluster '{cluster.name}' does not log {', '.join(missing)} (enabledClusterLogTypes)"


# ================================================================================================== network
def is_world(cidr: str) -> bool:
    """0.0.0.0/0 and ::/0, however written (`0.0.0.0/0`, `::/0`, `0::0/0`)."""
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def no_public_ingress(r: Resource, config: Config) -> Iterator[str]:
    """No security group accepts traffic from the whole internet (0.0.0.0/0 or ::/0).

    Nodes, file systems and the API endpoint are private; an open ingress rule is almost always a mistake
    (AWS Security Hub EC2.18/EC2.19, https://docs.aws.amazon.com/securityhub/latest/userguide/ec2-controls.html).
    """
    if r.type == SECURITY_GROUP:
        for rule in items(r.get("ingress")):
            for cidr in strings(get(rule, "cidrBlocks")) + strings(get(rule, "ipv6CidrBlocks")):
                if is_world(cidr):
                    yield f"security group '{r.name}' accepts ingress from {cidr} on {port_range(rule)}"
    elif r.type == SG_INGRESS_RULE:
        for cidr in strings(r.get("cidrIpv4")) + strings(r.get("cidrIpv6")):
            if is_world(cidr):
                yield f"ingress rule '{r.name}' accepts traffic from {cidr} on {port_range(r.props)}"
    elif r.type == SG_RULE and r.get("type") == "ingress":
        for cidr in strings(r.get("cidrBlocks")) + strings(r.get("ipv6CidrBlocks")):
            if is_world(cidr):
                yield f"ingress rule '{r.name}' accepts traffic from {cidr} on {port_range(r.props)}"


def port_range(rule: Any) -> str:
    protocol = str(get(rule, "ipProtocol", default=get(rule, "protocol", default="?")))
    if protocol in ("-1", "all"):
        return "all ports"
    return f"{protocol} {get(rule, 'fromPort', default='?')}-{get(rule, 'toPort', default='?')}"


# ============================================================================================= supply chain


def chart_name(release: Resource) -> str:
    """A release's chart name without repository or OCI path (`oci://.../aws-node-termination-handler`)."""
    return str(release.get("chart", default="")).rstrip("/").rsplit("/", 1)[-1]


def helm_chart_pinned(release: Resource, config: Config) -> Iterator[str]:
    """Helm releases pin an exact chart version from an explicit repository.

    Without `version` Helm installs whatever is newest at deploy time
    (https://helm.sh/docs/helm/helm_install/, `--version`), so two deploys of one commit can differ; a version range
    does the same more slowly. "Exact" is the catalog's definition (`components.catalog.versions.EXACT_VERSION`).
    """
    ref = str(release.get("chart", default=""))
    version = str(release.get("version", default="") or "")
    if not EXACT_VERSION.match(version):
        shown = f"'{version}'" if version else "no version"
        yield f"Helm release '{release.name}' ({chart_name(release)}) floats: {shown} is not an exact chart version"
    local = ref.startswith(("./", "../", "/"))
    repo = str(release.get("repositoryOpts", "repo", default="") or "")
    if not local and not ref.startswith("oci://") and not repo.startswith(("https://", "oci://")):
        yield f"Helm release '{release.name}' ({chart_name(release)}) has no https/oci repositoryOpts.repo"


# ===================================================================================================== cost
@cache
def taggable(resource_type: str) -> bool | None:
    """Whether the AWS provider's resource takes `tags`, read from the provider SDK itself (None if unknown)."""
    import importlib
    import inspect

    try:
        _, module, name = resource_type.split(":")
        module = module.split("/")[0]
        package = importlib.import_module("pulumi_aws" if module == "index" else f"pulumi_aws.{module}")
        cls = getattr(package, name)
        return "tags" in inspect.signature(cls._internal_init).parameters
    except (ValueError, ImportError, AttributeError):
        return None


def cost_allocation_tags(r: Resource, config: Config) -> Iterator[str]:
    """Every taggable AWS resource carries the cost-allocation tags listed in `requiredTags`.

    AWS cost allocation reports group spend only by tags that are on the resource
    (https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/cost-alloc-tags.html); provider `defaultTags`
    count.
    """
    if not r.type.startswith("aws:"):
        return
    present = {**r.default_tags, **tag_map(r.get("tagsAll")), **r.tags()}
    if not present and r.get("tags") is None and taggable(r.type) is not True:
        return  # a type without tags (or one the provider SDK does not describe)
    missing = [t for t in config.get("requiredTags") or [] if not present.get(t)]
    if missing:
        yield f"{r.type.split(':')[-1]} '{r.name}' lacks the cost-allocation tags {', '.join(missing)}"


# ============================================================================================ node pools (stack)
@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, text: str) -> Taint:
        """`key=value:Effect` (kubelet `--register-with-taints` form; the value may be empty)."""
        spec, _, effect = text.strip().rpartition(":")
        key, _, value = spec.partition("=")
        return cls(key, value, effect)

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


def tolerates(tolerations: list[Any], taint: Taint) -> bool:
    """Kubernetes toleration matching (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/):
    an empty key with Exists tolerates everything; otherwise keys match, effects match (or the toleration has
    none), and the operator is Exists or Equal with the same value (Equal is the default operator)."""
    for t in tolerations:
        key, operator = get(t, "key", default=""), get(t, "operator", default="Equal")
        effect = get(t, "effect", default="")
        if effect and effect != taint.effect:
            continue
        if not key and operator == "Exists":
            return True
        if key == taint.key and (operator == "Exists" or str(get(t, "value", default="")) == taint.value):
            return True
    return False


@dataclass(frozen=True)
class Pool:
    """A node pool as deployed: its Auto Scaling group and (when it can be resolved) its launch template."""

    asg: Resource
    launch_template: Resource | None

    @property
    def name(self) -> str:
        return self.asg.tags().get(tag_keys.POOL, self.asg.name)

    @property
    def role(self) -> str | None:
        return self.asg.tags().get(tag_keys.ROLE)

    @property
    def efa(self) -> bool:
        return is_efa_launch_template(self.launch_template)

    @property
    def instance_types(self) -> list[str]:
        """The overrides of a mixed-instances policy (which replace the template's type), else the template's."""
        overrides = [
            str(get(o, "instanceType"))
            for o in items(self.asg.get("mixedInstancesPolicy", "launchTemplate", "overrides"))
            if get(o, "instanceType")
        ]
        if overrides:
            return list(dict.fromkeys(overrides))
        primary = self.launch_template.get("instanceType") if self.launch_template else None
        return [str(primary)] if primary else []

    @property
    def capacity_type(self) -> str:
        """on-demand | spot | capacity-block | reservation: the pool's tag, else what its settings say."""
        tagged = self.asg.tags().get(tag_keys.CAPACITY_TYPE)
        if tagged:
            return tagged
        lt = self.launch_template
        market = lt.get("instanceMarketOptions", "marketType") if lt else None
        if market in ("spot", "capacity-block"):
            return str(market)
        if lt and lt.get("capacityReservationSpecification", "capacityReservationTarget") is not None:
            return "reservation"
        # Without the setting AWS runs 100 % on-demand above the base capacity (autoscaling InstancesDistribution).
        distribution = self.asg.get("mixedInstancesPolicy", "instancesDistribution")
        on_demand_percent = int(get(distribution, "onDemandPercentageAboveBaseCapacity", default=100))
        if self.asg.get("mixedInstancesPolicy") is not None and on_demand_percent < 100:
            return "spot"
        return "on-demand"

    @property
    def taints(self) -> list[Taint]:
        tags = self.asg.tags()
        found = [Taint.parse(t) for t in tags.get(tag_keys.TAINTS, "").split(",") if t.strip()]
        for key, value in tags.items():
            if key.startswith(CA_TAINT_TAG_PREFIX):
                taint = Taint.parse(f"{key.removeprefix(CA_TAINT_TAG_PREFIX)}={value}")
                if taint not in found:
                    found.append(taint)
        return found

    def catalog_entries(self) -> list[InstanceType]:
        return [e for e in (catalog_entry(t)[0] for t in self.instance_types) if e is not None]

    @property
    def is_gpu(self) -> bool:
        """GPU pools: a GPU instance type per the catalog, or tagged as a training/inference or GPU pool."""
        tags = self.asg.tags()
        return (
            any(e.is_gpu for e in self.catalog_entries())
            or self.role in ("training", "inference")
            or bool(tags.get(tag_keys.GPU_MODEL))
        )


def node_pools(stack: Stack) -> list[Pool]:
    pools = []
    for asg in stack.of_type(AUTOSCALING_GROUP):
        if asg.get("launchTemplate") is not None:
            prop, spec = "launchTemplate", asg.get("launchTemplate")
            values = [peek(spec, "id"), peek(spec, "name")]
        else:
            prop = "mixedInstancesPolicy"
            spec = asg.get("mixedInstancesPolicy", "launchTemplate", "launchTemplateSpecification")
            values = [peek(spec, "launchTemplateId"), peek(spec, "launchTemplateName")]
        found = stack.referenced(asg, prop, [v for v in values if isinstance(v, str)], [LAUNCH_TEMPLATE])
        pools.append(Pool(asg, found[0] if len(found) == 1 else None))
    return pools


def helm_releases(stack: Stack, chart: str) -> list[Resource]:
    return [r for r in stack.of_type(HELM_TYPES) if chart_name(r) == chart]


# ============================================================================================== fabric (stack)
def efa_security_group_self_referencing(stack: Stack, config: Config) -> StackViolations:
    """The security group of every EFA interface allows all traffic from and to itself, in both directions.

    "To enable OS-bypass functionality, the EFA must be a member of a security group that allows all inbound and
    outbound traffic to and from the security group itself"; the egress self rule is needed even when egress to
    0.0.0.0/0 exists, because SRD traffic is authorized by group membership (aws-gpu-facts.md §2, AWS PCS
    https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_efa_create-sg.html). The EKS
    cluster security group has both self rules built in (EKS "sec-group-reqs"), so it passes.
    """
    cluster_sgs = {
        str(peek(c.props, "vpcConfig", "clusterSecurityGroupId"))
        for c in stack.of_type(EKS_CLUSTER)
        if peek(c.props, "vpcConfig", "clusterSecurityGroupId")
    }
    for lt in stack.of_type(LAUNCH_TEMPLATE):
        efa = [i for i in interfaces(lt) if i.is_efa]
        if not efa:
            continue
        engine_linked = "networkInterfaces" in lt.property_dependencies
        if any(not i.security_groups for i in efa) and not engine_linked:
            yield (f"launch template '{lt.name}' has EFA interfaces without a security group", lt.urn)
            continue
        known = {g for i in efa for g in i.security_groups}
        if known and known <= cluster_sgs and not engine_linked:
            continue
        values = sorted(known - cluster_sgs)
        managed = stack.referenced(lt, "networkInterfaces", values, [SECURITY_GROUP])
        # Through the engine's property dependencies, the cluster security group shows up as the EKS cluster.
        via_cluster = engine_linked and any(
            stack.by_urn[u].type == EKS_CLUSTER
            for u in lt.property_dependencies["networkInterfaces"]
            if u in stack.by_urn
        )
        if not managed and not via_cluster and values:
            yield (
                f"launch template '{lt.name}': EFA security groups {values} are not in this stack, so their "
                "self-referencing rules cannot be checked",
                lt.urn,
            )
        for sg in managed:
            missing = [d for d in ("ingress", "egress") if not _allows_all_from_self(stack, sg, d)]
            if missing:
                yield (
                    f"security group '{sg.name}' (EFA interfaces of launch template '{lt.name}') lacks an all-traffic "
                    f"self-referencing {' and '.join(missing)} rule",
                    sg.urn,
                )


def _all_protocols(rule: Any) -> bool:
    return str(get(rule, "ipProtocol", default=get(rule, "protocol", default=""))) in ("-1", "all")


def _allows_all_from_self(stack: Stack, sg: Resource, direction: str) -> bool:
    """Does some rule let all traffic flow between `sg` and itself in `direction` (ingress or egress)?"""
    for inline in items(sg.get(direction)):
        if _all_protocols(inline) and (
            truthy(get(inline, "self", default=False)) or sg.urn in _inline_groups(stack, inline)
        ):
            return True
    standalone = SG_INGRESS_RULE if direction == "ingress" else SG_EGRESS_RULE
    for rule in stack.of_type(standalone):
        if _all_protocols(rule.props) and _rule_is_self(
            stack, rule, sg, "securityGroupId", "referencedSecurityGroupId"
        ):
            return True
    for rule in stack.of_type(SG_RULE):
        if rule.get("type") != direction or not _all_protocols(rule.props):
            continue
        if truthy(rule.get("self", default=False)) and sg in _targets(stack, rule, "securityGroupId"):
            return True
        if _rule_is_self(stack, rule, sg, "securityGroupId", "sourceSecurityGroupId"):
            return True
    return False


def _inline_groups(stack: Stack, inline: Any) -> set[str]:
    groups = strings(get(inline, "securityGroups"))
    return {r.urn for r in stack.of_type(SECURITY_GROUP) if any(g == peek(r.props, "id") for g in groups)}


def _targets(stack: Stack, rule: Resource, prop: str) -> list[Resource]:
    value = rule.get(prop) if prop not in rule.property_dependencies else None
    return stack.referenced(rule, prop, [value] if isinstance(value, str) else [], [SECURITY_GROUP])


def _rule_is_self(stack: Stack, rule: Resource, sg: Resource, target: str, peer: str) -> bool:
    """A rule on `sg` whose peer is `sg` itself: by property dependencies when the engine gives them, else by value."""
    if target in rule.property_dependencies and peer in rule.property_dependencies:
        return set(rule.property_dependencies[target]) == set(rule.property_dependencies[peer]) == {sg.urn}
    group, other = rule.get(target), rule.get(peer)
    return bool(group) and group == other and sg in _targets(stack, rule, target)


def efa_pool_single_az(stack: Stack, config: Config) -> StackViolations:
    """An EFA pool's subnets are all in one Availability Zone: "EFA isn't supported over different availability
    zones" (https://docs.amazonaws.cn/en_us/parallelcluster/latest/ug/efa-v3.html, aws-gpu-facts.md §2)."""
    for pool in node_pools(stack):
        if not pool.efa:
            continue
        values = strings(pool.asg.get("vpcZoneIdentifiers"))
        subnets = stack.referenced(pool.asg, "vpcZoneIdentifiers", values, [SUBNET])
        zones = {str(s.get("availabilityZone") or s.get("availabilityZoneId") or "?") for s in subnets}
        unresolved = max(len(values) - len(subnets), 0)
        if len(zones - {"?"}) > 1:
            yield (f"EFA pool '{pool.name}' spans availability zones {sorted(zones - {'?'})}", pool.asg.urn)
        elif (unresolved or "?" in zones) and max(len(values), len(subnets)) > 1:
            yield (
                f"EFA pool '{pool.name}' has {max(len(values), len(subnets))} subnets whose zones cannot all be "
                "read; give it one subnet",
                pool.asg.urn,
            )
        azs = strings(pool.asg.get("availabilityZones"))
        if len(set(azs)) > 1:
            yield (f"EFA pool '{pool.name}' spans availability zones {sorted(set(azs))}", pool.asg.urn)


def efa_placement_group(stack: Stack, config: Config) -> StackViolations:
    """EFA pools bought on demand or spot launch into a cluster placement group; capacity blocks and reservations
    do not (AWS already placed that capacity, and a forced group fails to launch).

    AWS: "We recommended you launch all instances that use EFA in a cluster placement group"
    (https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_efa_create-placement-group.html);
    capacity blocks run without one (aws-parallelcluster tests; terraform-aws-eks #3730; eksctl #7949).
    """
    for pool in node_pools(stack):
        if not pool.efa or pool.capacity_type in RESERVED_CAPACITY:
            continue
        lt = pool.launch_template
        if lt is None:  # pool.efa implies a resolved launch template; this keeps the type checker informed
            continue
        asg_group, lt_group = _set_value(pool.asg, "placementGroup"), _set_value(lt, "placement", "groupName")
        if asg_group is None and lt_group is None:
            yield (
                f"EFA pool '{pool.name}' ({pool.capacity_type}) has no cluster placement group "
                "(placementGroup on the Auto Scaling group or placement.groupName on the launch template)",
                pool.asg.urn,
            )
            continue
        source, prop, value = (
            (pool.asg, "placementGroup", asg_group) if asg_group is not None else (lt, "placement", lt_group)
        )
        for group in stack.referenced(source, prop, [str(value)] if value else [], [PLACEMENT_GROUP]):
            if group.get("strategy") != "cluster":
                yield (
                    f"EFA pool '{pool.name}' uses placement group '{group.name}' with strategy "
                    f"'{group.get('strategy')}', not 'cluster'",
                    pool.asg.urn,
                )


def _set_value(r: Resource, *path: str) -> str | None:
    """A property's value; "" when it is set but not known yet (a preview), None when it is not set."""
    try:
        value = r.get(*path)
    except UnknownValueError:
        return ""
    return str(value) if value else None


def efa_device_plugin_deployed(stack: Stack, config: Config) -> StackViolations:
    """When any pool wires EFA, the AWS EFA device plugin runs and tolerates the taints of every EFA pool.

    The EKS AMIs carry the EFA host software but not the device plugin, so without it pods cannot request
    `vpc.amazonaws.com/efa` (aws-gpu-facts.md §2 "EFA on EKS"); its chart tolerates nothing by default ([EKSCH]),
    so on tainted GPU nodes it never starts (facts §10.5). An `image.tag` override must not go below the plugin
    release versions.yaml sets as the floor (peers.md #8: older plugins count NVLink devices as EFA).
    """
    efa_pools = [p for p in node_pools(stack) if p.efa]
    if not efa_pools:
        return
    releases = helm_releases(stack, EFA_DEVICE_PLUGIN_CHART)
    if not releases:
        yield (
            f"EFA pools {[p.name for p in efa_pools]} but no {EFA_DEVICE_PLUGIN_CHART} Helm release",
            efa_pools[0].asg.urn,
        )
        return
    floor = chart("aws-efa-k8s-device-plugin").minimum_app_version
    for release in releases:
        tag = get(release.get("values", default={}), "image", "tag")
        if floor and isinstance(tag, str) and EXACT_VERSION.match(tag) and not version_at_least(tag, floor):
            yield (
                f"Helm release '{release.name}' runs EFA device plugin {tag}, older than {floor}: "
                f"{chart('aws-efa-k8s-device-plugin').minimum_reason}",
                release.urn,
            )
    yield from _untolerated(efa_pools, releases, EFA_DEVICE_PLUGIN_DEFAULT_TOLERATIONS)


def _untolerated(
    pools: list[Pool], releases: list[Resource], defaults: tuple[Mapping[str, str], ...]
) -> StackViolations:
    for release in releases:
        values = release.get("values", default={})
        tolerations = items(get(values, "tolerations")) if get(values, "tolerations") is not None else list(defaults)
        for pool in pools:
            for taint in pool.taints:
                if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                    yield (
                        f"Helm release '{release.name}' ({chart_name(release)}) does not tolerate taint {taint} "
                        f"of pool '{pool.name}', so it never runs there",
                        release.urn,
                    )


# ========================================================================================== GPU pools (stack)
def gpu_pools_tainted_and_tolerated(stack: Stack, config: Config) -> StackViolations:
    """GPU pools repel ordinary pods with a NoSchedule/NoExecute taint, and the NVIDIA device plugin tolerates it.

    Untainted GPU nodes fill up with CPU-only pods that block GPU jobs and keep costly nodes from scaling down;
    a device plugin that does not tolerate the taint never advertises `nvidia.com/gpu` and no GPU pod schedules.
    The chart's default tolerations cover only `nvidia.com/gpu` and CriticalAddonsOnly ([NVDP], facts §8).
    """
    gpu_pools = [p for p in node_pools(stack) if p.is_gpu]
    for pool in gpu_pools:
        if not any(t.effect in ("NoSchedule", "NoExecute") for t in pool.taints):
            yield (
                f"GPU pool '{pool.name}' has no NoSchedule/NoExecute taint (tag {tag_keys.TAINTS})",
                pool.asg.urn,
            )
    if not gpu_pools:
        return
    releases = helm_releases(stack, NVIDIA_DEVICE_PLUGIN_CHART)
    if not releases:
        yield (
            f"GPU pools {[p.name for p in gpu_pools]} but no {NVIDIA_DEVICE_PLUGIN_CHART} Helm release",
            gpu_pools[0].asg.urn,
        )
        return
    yield from _untolerated(gpu_pools, releases, NVIDIA_DEVICE_PLUGIN_DEFAULT_TOLERATIONS)


# ============================================================================================== spot (stack)
def spot_instance_diversification(stack: Stack, config: Config) -> StackViolations:
    """Spot pools offer at least `minInstanceTypes` instance types, all of one GPU shape.

    "Be flexible about instance types": each type is a separate spot capacity pool, so one type alone is
    interrupted and starved together (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-best-practices.html).
    The types must share the GPU shape (model, count, memory per the catalog) and EFA device count, or pods sized
    for one do not fit the other and the template's EFA wiring is wrong for it.
    """
    minimum = int(config.get("minInstanceTypes") or 1)
    for pool in node_pools(stack):
        if pool.capacity_type != "spot":
            continue
        types = pool.instance_types
        if len(types) < minimum:
            yield (
                f"spot pool '{pool.name}' offers {len(types)} instance type(s) {types}; at least {minimum} are needed "
                "(mixedInstancesPolicy overrides)",
                pool.asg.urn,
            )
        entries = pool.catalog_entries()
        shapes = {e.gpu_shape for e in entries}
        if len(shapes) > 1:
            yield (f"spot pool '{pool.name}' mixes GPU shapes {sorted(map(str, shapes))}", pool.asg.urn)
        efa_counts = {e.max_efa_interfaces for e in entries}
        if pool.efa and len(efa_counts) > 1:
            yield (f"spot EFA pool '{pool.name}' mixes types with {sorted(efa_counts)} EFA devices", pool.asg.urn)


def spot_capacity_rebalance(stack: Stack, config: Config) -> StackViolations:
    """Spot Auto Scaling groups turn on capacity rebalancing, so a replacement launches on a rebalance
    recommendation instead of after the two-minute interruption notice
    (https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-capacity-rebalancing.html)."""
    for pool in node_pools(stack):
        if pool.capacity_type == "spot" and not truthy(pool.asg.get("capacityRebalance", default=False)):
            yield (f"spot pool '{pool.name}' does not enable capacityRebalance", pool.asg.urn)


def spot_interruption_handler(stack: Stack, config: Config) -> StackViolations:
    """A stack with spot pools deploys the AWS Node Termination Handler, which cordons and drains a node when its
    interruption notice or rebalance recommendation arrives ([NTH], aws-gpu-facts.md §7b)."""
    spot = [p for p in node_pools(stack) if p.capacity_type == "spot"]
    if spot and not helm_releases(stack, TERMINATION_HANDLER_CHART):
        yield (
            f"spot pools {[p.name for p in spot]} but no {TERMINATION_HANDLER_CHART} Helm release",
            spot[0].asg.urn,
        )


# ================================================================================================ cost (stack)
def gpu_budget(stack: Stack, config: Config) -> StackViolations:
    """At maximum size the stack's node pools stay within `maxGpus` GPUs and `maxUsdPerHour` dollars an hour.

    Counts every Auto Scaling group at `maxSize`, each at the GPU count and us-east-1 on-demand price of its
    largest / dearest instance type in the catalog ([KPP]); spot and reservations cost less, so this is an upper
    bound. A pool whose type has no catalog price cannot be bounded and is reported.
    """
    max_gpus, max_usd = config.get("maxGpus"), config.get("maxUsdPerHour")
    total_gpus, total_usd = 0, 0.0
    for pool in node_pools(stack):
        size = int(pool.asg.get("maxSize", default=0))
        entries = pool.catalog_entries()
        if not entries:
            if size > 0:
                yield (f"pool '{pool.name}': instance types {pool.instance_types} are not in the catalog", pool.asg.urn)
            continue
        total_gpus += size * max(e.gpu_count for e in entries)
        prices = [e.on_demand_usd_per_hour for e in entries]
        known = [p for p in prices if p is not None]
        if size > 0 and max_usd is not None and len(known) < len(prices):
            yield (f"pool '{pool.name}': the catalog has no on-demand price for {pool.instance_types}", pool.asg.urn)
        total_usd += size * max(known, default=0.0)
    if max_gpus is not None and total_gpus > int(max_gpus):
        yield (f"the node pools reach {total_gpus} GPUs at maximum size; the budget is {max_gpus}", None)
    if max_usd is not None and total_usd > float(max_usd):
        yield (
            f"the node pools cost ${total_usd:,.2f}/hour at maximum size; the budget is ${float(max_usd):,.2f}",
            None,
        )


# ================================================================================================ data (stack)
def s3_bucket_hardened(stack: Stack, config: Config) -> StackViolations:
    """Buckets (checkpoints, datasets) keep versions, block every kind of public access, and use SSE-KMS when
    `requireKmsKey`.

    Versioning lets a bad checkpoint write be rolled back; the four public access block settings stop a policy or
    ACL from exposing data (https://docs.aws.amazon.com/AmazonS3/latest/userguide/access-control-block-public-access.html).
    S3 already encrypts every new object with SSE-S3 (since 2023-01-05,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/default-encryption-faq.html), so only a KMS requirement
    needs an explicit configuration.
    """
    require_kms = bool(config.get("requireKmsKey", False))
    settings = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")

    def covering(types: Any, bucket: Resource) -> list[Resource]:
        found = []
        for r in stack.of_type(types):
            value = r.get("bucket") if "bucket" not in r.property_dependencies else None
            if bucket in stack.referenced(r, "bucket", [value] if isinstance(value, str) else [], BUCKETS):
                found.append(r)
        return found

    for bucket in stack.of_type(BUCKETS):
        versioned = truthy(bucket.get("versioning", "enabled", default=False)) or any(
            v.get("versioningConfiguration", "status") == "Enabled" for v in covering(BUCKET_VERSIONING, bucket)
        )
        if not versioned:
            yield (f"bucket '{bucket.name}' is not versioned", bucket.urn)
        blocks = covering(BUCKET_PUBLIC_ACCESS_BLOCK, bucket)
        if not any(all(truthy(b.get(s, default=False)) for s in settings) for b in blocks):
            yield (f"bucket '{bucket.name}' does not block public access ({', '.join(settings)})", bucket.urn)
        if require_kms:
            rules = [bucket.get("serverSideEncryptionConfiguration", "rule")] + [
                rule for c in covering(BUCKET_ENCRYPTION, bucket) for rule in items(c.get("rules"))
            ]
            algorithms = {get(r, "applyServerSideEncryptionByDefault", "sseAlgorithm") for r in rules}
            if not algorithms & {"aws:kms", "aws:kms:dsse"}:
                yield (f"bucket '{bucket.name}' does not encrypt with a KMS key (SSE-KMS)", bucket.urn)
