"""The stack configuration schema: the one place it lives.

A stack file (`stacks/Pulumi.<stack>.yaml`) holds a handful of project keys (`gpu-clusters:cluster`,
`gpu-clusters:network`, `gpu-clusters:nodePools`, `gpu-clusters:storage`, `gpu-clusters:addons`). Together they
validate into a `StackConfig`. Keys are camelCase in YAML (Pulumi's convention) and snake_case in Python.

These models check each field on its own (types, ranges, enums). Rules that relate several fields or consult the
instance catalog live in `components.validation`, which reports every problem at once with its key path.
Defaults are chosen so a stack file stays short and a forgotten key errs on the safe side (private endpoint,
protected storage, IMDSv2, tainted GPU nodes).
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, StringConstraints
from pydantic.alias_generators import to_camel

#: The config keys of a stack, in the order they are read and reported.
SECTIONS = ("cluster", "network", "nodePools", "storage", "addons")


class Model(BaseModel):
    """Base for every config model: camelCase aliases, unknown keys rejected (a typo must not pass silently).

    Strict types: `true` is no number, `2.5` no integer, `"3"` no count; NaN and infinities are refused.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        frozen=True,
        validate_default=True,
        use_attribute_docstrings=True,
    )


# Kubernetes label keys and values (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/):
# values are at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric (or empty).
LabelValue = Annotated[str, StringConstraints(pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")]
LabelKey = Annotated[
    str,
    StringConstraints(
        pattern=r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
    ),
]
# Pool names become part of AWS resource names, Kubernetes label values and launch template names.
PoolName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")]
# EKS cluster names: 1-100 characters, start alphanumeric, then alphanumerics, hyphens and underscores
# (EKS API reference, CreateCluster `name`).
ClusterName = Annotated[str, StringConstraints(pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")]


def _cidr_text(value: object) -> object:
    """CIDRs are written as text (`10.0.0.0/16`); a bare number would silently become a /32."""
    if isinstance(value, IPv4Network | str):
        return value
    raise ValueError("give an IPv4 CIDR as text, e.g. 10.0.0.0/16")


#: An IPv4 network written as text; the one lax field type of the strict models.
Cidr = Annotated[IPv4Network, Strict(False), BeforeValidator(_cidr_text)]


# ---------------------------------------------------------------------------------------------------------- cluster
class EndpointAccess(Model):
    """Who can reach the Kubernetes API. Private by default; public only with an explicit allow-list."""

    private: bool = True
    public: bool = False
    public_access_cidrs: list[Cidr] = Field(default_factory=list)


class AdminAccess(Model):
    """An IAM principal given cluster-admin through an EKS access entry (authentication mode API)."""

    principal_arn: Annotated[str, StringConstraints(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+$")]
    policy: Literal[
        "AmazonEKSClusterAdminPolicy", "AmazonEKSAdminPolicy", "AmazonEKSEditPolicy", "AmazonEKSViewPolicy"
    ] = "AmazonEKSClusterAdminPolicy"


LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
DEFAULT_LOG_TYPES: tuple[LogType, ...] = ("api", "audit", "authenticator")


class ClusterConfig(Model):
    name: ClusterName
    kubernetes_version: str = "1.35"
    endpoint: EndpointAccess = EndpointAccess()
    logging: list[LogType] = Field(default_factory=lambda: list(DEFAULT_LOG_TYPES))
    """Control-plane log types (EKS `enabledClusterLogTypes`); api, audit and authenticator are the minimum the
    policy pack accepts."""
    support_type: Literal["STANDARD", "EXTENDED"] = "STANDARD"
    """EKS upgrade policy: STANDARD ends support after 14 months, EXTENDED adds 12 paid months."""
    service_cidr: Cidr = IPv4Network("172.20.0.0/16")
    """Kubernetes service CIDR; nodeadm needs it to infer the cluster DNS address."""
    admins: list[AdminAccess] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    """Cost-allocation and ownership tags put on every AWS resource."""
    protect_stateful: bool = True
    """Protect stateful resources (KMS keys, file systems, buckets) from `pulumi destroy` and replacement."""


# ---------------------------------------------------------------------------------------------------------- network
class ExistingVpc(Model):
    """Bring your own VPC: subnets are given per availability zone so pools can be pinned to one AZ."""

    vpc_id: Annotated[str, StringConstraints(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    private_subnet_ids: dict[str, Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(
        default_factory=dict
    )
    public_subnet_ids: dict[str, Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(
        default_factory=dict
    )


class NetworkConfig(Model):
    """A new VPC (default) or an existing one (`existingVpc`)."""

    vpc_cidr: Cidr = IPv4Network("10.0.0.0/16")
    availability_zones: list[str] = Field(default_factory=list)
    nat_gateways: Literal["one-per-az", "single"] = "one-per-az"
    """One NAT gateway per AZ (survives an AZ outage) or a single shared one (cheaper, for dev stacks)."""
    private_subnet_cidrs: list[Cidr] | None = None
    """Explicit subnet CIDRs, one per AZ in `availabilityZones` order; derived from `vpcCidr` when left out."""
    public_subnet_cidrs: list[Cidr] | None = None
    existing_vpc: ExistingVpc | None = None

    @property
    def zones(self) -> list[str]:
        """The AZs the network spans, whichever way it was given."""
        if self.existing_vpc is not None:
            return sorted(self.existing_vpc.private_subnet_ids)
        return list(self.availability_zones)


# ------------------------------------------------------------------------------------------------------- node pools
class Taint(Model):
    key: LabelKey
    value: LabelValue = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def render(self) -> str:
        """kubelet `--register-with-taints` form, also used by cluster-autoscaler node-template tags."""
        return f"{self.key}={self.value}:{self.effect}"


class GpuUtilizationScaling(Model):
    """Step scaling on the pool's average GPU utilization (CloudWatch), for pools in `gpu-utilization` mode."""

    scale_out_above_percent: float = Field(85, gt=0, lt=100)
    scale_out_after_minutes: int = Field(15, ge=1, le=1440)
    scale_out_by: int = Field(2, ge=1)
    scale_in_below_percent: float = Field(30, gt=0, lt=100)
    scale_in_after_minutes: int = Field(30, ge=1, le=1440)
    scale_in_by: int = Field(1, ge=1)
    cooldown_seconds: int = Field(300, ge=0)


class Scaling(Model):
    min: int = Field(0, ge=0)
    desired: int | None = Field(None, ge=0)
    """Initial size; ignored after creation so `pulumi up` never fights the autoscaler. Defaults to `min`."""
    max: int = Field(1, ge=0)
    mode: Literal["cluster-autoscaler", "gpu-utilization", "fixed"] = "cluster-autoscaler"
    gpu_utilization: GpuUtilizationScaling = GpuUtilizationScaling()

    @property
    def initial(self) -> int:
        return self.min if self.desired is None else self.desired


class Capacity(Model):
    """How instances are bought."""

    type: Literal["on-demand", "spot", "capacity-block", "reservation"] = "on-demand"
    spot_instance_types: list[str] = Field(default_factory=list)
    """Extra instance types with the same GPU shape for spot diversification (the pool's type comes first)."""
    on_demand_base_capacity: int = Field(0, ge=0)
    on_demand_percentage_above_base: int = Field(0, ge=0, le=100)
    spot_allocation_strategy: Literal["price-capacity-optimized", "capacity-optimized", "lowest-price"] = (
        "price-capacity-optimized"
    )
    reservation_id: Annotated[str, StringConstraints(pattern=r"^cr-[0-9a-f]{8,17}$")] | None = None
    """Capacity Block or On-Demand Capacity Reservation id (`cr-...`)."""
    reservation_resource_group_arn: str | None = None
    """Target a reservation resource group instead of one reservation (`reservation` only)."""


class Placement(Model):
    """Where the pool runs. EFA pools need one AZ; a cluster placement group keeps their fabric hops short."""

    availability_zones: list[str] | None = None
    """Defaults to the network's first AZ for EFA pools (EFA does not cross AZs) and to every AZ otherwise."""
    placement_group: Literal["auto", "on", "off"] = "auto"
    """`auto`: on for EFA pools, except capacity blocks and reservations (AWS places those; a forced placement
    group there fails with InsufficientInstanceCapacity, terraform-aws-eks #3730, eksctl #7949)."""


class InstanceRefresh(Model):
    """How launch template changes roll out. Training pools default to `false`: never kill a running job."""

    enabled: bool | None = None
    min_healthy_percentage: int = Field(90, ge=0, le=100)
    instance_warmup_seconds: int = Field(300, ge=0)
    skip_matching: bool = True


class HybridCredentials(Model):
    provider: Literal["ssm", "iam-roles-anywhere"] = "ssm"
    activation_expiry_hours: int = Field(24, ge=1, le=720)
    """SSM hybrid activation lifetime; nodes must register before it expires (default 24 h, max 30 days)."""
    activation_limit: int | None = Field(None, ge=1)
    """Registration limit of the SSM activation; defaults to the pool's node count."""
    trust_anchor_certificate: str | None = None
    """IAM Roles Anywhere: the PEM bundle of the CA that signs the nodes' certificates."""


class HybridNetwork(Model):
    """The on-prem networks of a hybrid pool (EKS `remoteNetworkConfig`)."""

    remote_node_cidrs: list[Cidr] = Field(default_factory=list)
    remote_pod_cidrs: list[Cidr] = Field(default_factory=list)
    webhooks_on_hybrid_nodes: bool = True
    """Webhooks (e.g. admission controllers) running on hybrid nodes must be reachable from the control plane,
    which needs routable pod CIDRs."""
    uplink_gbps: float = Field(10, gt=0)
    """Bandwidth of the site's uplink, used for the plan's storage throughput figures."""


class DevicePluginSettings(Model):
    """Per-pool NVIDIA device plugin settings, applied through the plugin's per-node config label."""

    time_slicing_replicas: int = Field(1, ge=1, le=64)
    """Time-slicing: advertise each GPU this many times (1 = off). Inference pools use it to pack small models."""


class NodePool(Model):
    name: PoolName
    kind: Literal["aws", "hybrid"] = "aws"
    role: Literal["training", "inference", "system"]
    instance_type: str | None = None
    """AWS pools: the instance type (or give gpuModel + gpusPerNode and the cheapest matching type is chosen)."""
    gpu_model: str | None = None
    """Hybrid pools: the on-prem GPU model; AWS pools: alternative to instanceType."""
    gpus_per_node: int | None = Field(None, ge=1, le=16)
    capacity: Capacity = Capacity()
    scaling: Scaling = Scaling()
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    taints: list[Taint] | None = None
    """Node taints; GPU pools default to `nvidia.com/gpu=true:NoSchedule` when left out."""
    efa: Literal["auto", "on", "off"] = "auto"
    efa_layout: Literal["efa-only", "efa"] = "efa-only"
    """`efa-only`: AWS's current layout (ENA primary, efa-only elsewhere); `efa`: the older all-`efa` layout."""
    placement: Placement = Placement()
    local_storage: Literal["RAID0", "RAID10", "Mount", "none"] | None = None
    """nodeadm local NVMe strategy; defaults to RAID0 for training pools whose type has instance store."""
    root_volume_gib: int = Field(200, ge=20, le=16384)
    ami_family: Literal["al2023", "bottlerocket"] = "al2023"
    imds_hop_limit: int = Field(1, ge=1, le=64)
    """IMDSv2 hop limit: 1 keeps pods off the instance role; 2 is needed only by pods on the host network that
    call IMDS through a container runtime hop."""
    instance_refresh: InstanceRefresh = InstanceRefresh()
    device_plugin: DevicePluginSettings = DevicePluginSettings()
    # hybrid pools only
    nodes: int | None = Field(None, ge=1)
    network: HybridNetwork | None = None
    credentials: HybridCredentials = HybridCredentials()


# ---------------------------------------------------------------------------------------------------------- storage
S3Event = Literal["NEW", "CHANGED", "DELETED"]
DEFAULT_IMPORT_EVENTS: tuple[S3Event, ...] = ("NEW", "CHANGED")


class DataRepository(Model):
    """An S3 data repository association of the Lustre file system (datasets in, checkpoints out)."""

    file_system_path: Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9_./-]*$")]
    data_repository_path: Annotated[str, StringConstraints(pattern=r"^s3://[a-z0-9.-]{3,63}(/.*)?$")] | None = None
    """`s3://bucket/prefix/`; leave out to use the bucket the stack creates, at `prefix`."""
    prefix: str = ""
    import_events: list[S3Event] = Field(default_factory=lambda: list(DEFAULT_IMPORT_EVENTS))
    export_events: list[S3Event] = Field(default_factory=list)
    batch_import_metadata_on_create: bool = True


class LustreMetadata(Model):
    mode: Literal["AUTOMATIC", "USER_PROVISIONED"] = "AUTOMATIC"
    iops: int | None = Field(None, ge=1500, le=192000)


class KubernetesVolume(Model):
    """How pods reach a file system: a PersistentVolumeClaim in a namespace."""

    namespace: str = "default"
    claim_name: str | None = None
    storage_class: bool = False


class LustreConfig(Model):
    name: PoolName = "lustre"
    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = "PERSISTENT_2"
    storage_capacity_gib: int = Field(4800, ge=1200)
    per_unit_storage_throughput: int | None = 250
    efa_enabled: bool = False
    metadata: LustreMetadata | None = None
    compression: Literal["LZ4", "NONE"] = "LZ4"
    backup_retention_days: int = Field(7, ge=0, le=90)
    availability_zone: str | None = None
    """Defaults to the AZ of the training pools that mount it."""
    pools: list[str] | None = None
    """Pools that mount it; defaults to every training pool."""
    create_bucket: bool = True
    """Create a bucket for the data repositories (versioned, encrypted, private) when none is given by path."""
    data_repositories: list[DataRepository] = Field(default_factory=list)
    kubernetes: KubernetesVolume = KubernetesVolume()


class NfsConfig(Model):
    """Shared NFS for inference: Amazon EFS, or an existing (e.g. on-prem) NFS server through csi-driver-nfs."""

    name: PoolName = "models"
    kind: Literal["efs", "existing"] = "efs"
    # EFS
    throughput_mode: Literal["elastic", "bursting", "provisioned"] = "elastic"
    provisioned_throughput_mibps: float | None = Field(None, ge=1, le=3414)
    transition_to_ia: Literal[
        "AFTER_1_DAY",
        "AFTER_7_DAYS",
        "AFTER_14_DAYS",
        "AFTER_30_DAYS",
        "AFTER_60_DAYS",
        "AFTER_90_DAYS",
        "NONE",
    ] = "AFTER_30_DAYS"
    # existing server
    server: str | None = None
    share: str | None = None
    mount_options: list[str] = Field(default_factory=lambda: ["nfsvers=4.1"])
    capacity_gib: int = Field(1024, ge=1)
    """Nominal size the claim requests (NFS does not enforce it) and the server's bandwidth for the plan."""
    bandwidth_gbps: float | None = Field(None, gt=0)
    pools: list[str] | None = None
    kubernetes: KubernetesVolume = KubernetesVolume()


class StorageConfig(Model):
    lustre: LustreConfig | None = None
    nfs: NfsConfig | None = None


# ----------------------------------------------------------------------------------------------------------- addons
class Switch(Model):
    enabled: bool = True


class NvidiaDevicePlugin(Model):
    enabled: bool = True
    mig_strategy: Literal["none", "single", "mixed"] = "none"


class EfaDevicePlugin(Model):
    enabled: Literal["auto", "on", "off"] = "auto"
    """`auto`: deployed when any pool wires EFA."""


class ClusterAutoscaler(Model):
    enabled: Literal["auto", "on", "off"] = "auto"
    expander: Literal["least-waste", "priority", "most-pods", "random", "price"] = "least-waste"
    scale_down_unneeded_time: Annotated[str, StringConstraints(pattern=r"^\d+[smh]$")] = "10m"
    scale_down_utilization_threshold: float = Field(0.5, gt=0, le=1)
    scale_down_delay_after_add: Annotated[str, StringConstraints(pattern=r"^\d+[smh]$")] = "10m"


class NodeTerminationHandler(Model):
    enabled: Literal["auto", "on", "off"] = "auto"
    """`auto`: deployed when any pool uses spot."""


class Alerts(Model):
    gpu_temperature_celsius: float = Field(85, gt=0)
    idle_utilization_percent: float = Field(30, gt=0, lt=100)
    idle_minutes: int = Field(30, ge=5)
    sns_topic_arn: str | None = None
    """SNS topic to deliver alerts to (created when `email` is set and this is not)."""
    email: str | None = None


class Monitoring(Model):
    container_insights: bool = True
    dcgm_prometheus: bool = False
    alerts: Alerts = Alerts()


class AddonVersions(Model):
    """Pins for EKS managed add-ons (`v1.20.4-eksbuild.1`); unpinned ones resolve to EKS's default."""

    pins: dict[str, Annotated[str, StringConstraints(pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")]] = Field(
        default_factory=dict
    )


class AddonsConfig(Model):
    nvidia_device_plugin: NvidiaDevicePlugin = NvidiaDevicePlugin()
    efa_device_plugin: EfaDevicePlugin = EfaDevicePlugin()
    cluster_autoscaler: ClusterAutoscaler = ClusterAutoscaler()
    node_termination_handler: NodeTerminationHandler = NodeTerminationHandler()
    monitoring: Monitoring = Monitoring()
    managed: AddonVersions = AddonVersions()


# ------------------------------------------------------------------------------------------------------------ stack
class StackConfig(Model):
    """A whole stack, validated. Built by `components.validation.validate`, never directly from raw config."""

    region: str
    cluster: ClusterConfig
    network: NetworkConfig = NetworkConfig()
    node_pools: list[NodePool] = Field(default_factory=list)
    storage: StorageConfig = StorageConfig()
    addons: AddonsConfig = AddonsConfig()

    def pool(self, name: str) -> NodePool:
        return next(p for p in self.node_pools if p.name == name)

    @property
    def aws_pools(self) -> list[NodePool]:
        return [p for p in self.node_pools if p.kind == "aws"]

    @property
    def hybrid_pools(self) -> list[NodePool]:
        return [p for p in self.node_pools if p.kind == "hybrid"]
