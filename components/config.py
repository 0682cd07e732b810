"""The stack configuration schema: the one place it lives.

A stack file (`stacks/Pulumi.<stack>.yaml`) holds a handful of project keys (`gpu-clusters:cluster`,
`gpu-clusters:network`, `gpu-clusters:nodePools`, `gpu-clusters:storage`, `gpu-clusters:addons`,
`gpu-clusters:workloads`). Together they
validate into a `StackConfig`. Keys are camelCase in YAML (Pulumi's convention) and snake_case in Python.

These models check each field on its own (types, ranges, enums). Rules that relate several fields or consult the
instance catalog live in `components.validation`, which reports every problem at once with its key path.
Defaults are chosen so a stack file stays short and a forgotten key errs on the safe side (private endpoint,
protected storage, IMDSv2, tainted GPU nodes).
"""

from __future__ import annotations

import re
from datetime import datetime
from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, StringConstraints
from pydantic.alias_generators import to_camel

#: The config keys of a stack, in the order they are read and reported.
SECTIONS = ("cluster", "network", "nodePools", "storage", "addons", "workloads")


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


def _address_text(value: object) -> object:
    """Addresses are written as text (`192.168.100.1`); a bare number would silently become some other address."""
    if isinstance(value, IPv4Address | str):
        return value
    raise ValueError("give an IPv4 address as text, e.g. 192.168.100.1")


#: An IPv4 address written as text.
IpAddress = Annotated[IPv4Address, Strict(False), BeforeValidator(_address_text)]
#: A BGP autonomous system number: 4-byte ASNs are 1 to 4294967295 (RFC 6793).
Asn = Annotated[int, Field(ge=1, le=4_294_967_295)]


#: The date and time at the start of an RFC 3339 timestamp; pydantic alone would also read "1893497400" as seconds.
_RFC3339_START = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}")


def _instant_text(value: object) -> object:
    """Instants are written as RFC 3339 text with an offset (`2026-12-01T11:30:00Z`); a bare number would be read
    as seconds since 1970, and a time without an offset as local time."""
    if isinstance(value, datetime) or (isinstance(value, str) and _RFC3339_START.match(value)):
        return value
    raise ValueError("give an RFC 3339 time with its offset as text, e.g. 2026-12-01T11:30:00Z")


def _with_offset(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("give the time with its offset, e.g. 2026-12-01T11:30:00Z (UTC)")
    return value


#: A moment written as RFC 3339 text with an offset; parsed like `Cidr`, from text only.
Instant = Annotated[datetime, Strict(False), BeforeValidator(_instant_text), AfterValidator(_with_offset)]
#: An EKS-optimized AL2023 AMI release, `v` and its date (awslabs/amazon-eks-ami releases, e.g. `v20260714`).
Al2023Release = Annotated[str, StringConstraints(pattern=r"^v\d{8}$")]
#: A Bottlerocket release, `1.42.0` (a leading `v`, as GitHub writes it, is accepted and dropped in the SSM path).
BottlerocketRelease = Annotated[str, StringConstraints(pattern=r"^v?\d+\.\d+\.\d+$")]


# ---------------------------------------------------------------------------------------------------------- cluster
class EndpointAccess(Model):
    """Who can reach the Kubernetes API. Private by default; public only with an explicit allow-list."""

    private: bool = True
    """Serve the Kubernetes API on a private endpoint inside the VPC (reachable over VPN or Direct Connect too).
    Default `true`."""
    public: bool = False
    """Also serve the API on the internet. Default `false`; `true` requires `publicAccessCidrs`."""
    public_access_cidrs: list[Cidr] = Field(default_factory=list)
    """IPv4 CIDRs allowed to reach the public endpoint (office, CI egress). Only valid with `public: true`;
    `0.0.0.0/0` is rejected. Default empty."""
    private_access_cidrs: list[Cidr] = Field(default_factory=list)
    """IPv4 CIDRs allowed on TCP 443 of the cluster security group, i.e. to the private endpoint: a VPN, Direct
    Connect or transit-gateway network, or a bastion's subnet. `0.0.0.0/0` is rejected. Default empty."""
    private_access_security_group_ids: list[Annotated[str, StringConstraints(pattern=r"^sg-[0-9a-f]{8,17}$")]] = Field(
        default_factory=list
    )
    """Security groups (`sg-...`, in the cluster's VPC) allowed on TCP 443 of the cluster security group: a bastion's
    or a CI runner's. Default empty."""
    deploy_from_vpc: bool = False
    """`true`: `pulumi up` runs inside the cluster's VPC (a runner in `existingVpc`), so the whole VPC CIDR is
    allowed on TCP 443 of the cluster security group. A private-only endpoint needs this, `privateAccessCidrs` or
    `privateAccessSecurityGroupIds`: otherwise nothing lets the deployer reach the API. Default `false`."""


#: An IAM role or user ARN, as an EKS access entry names a principal.
PrincipalArn = Annotated[str, StringConstraints(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+$")]


class AdminAccess(Model):
    """An IAM principal given Kubernetes access through an EKS access entry (authentication mode API): cluster-wide,
    or in named namespaces only (a team's admins and editors)."""

    principal_arn: PrincipalArn
    """ARN of the IAM role or user (`arn:aws:iam::<account>:role/...` or `:user/...`) that gets a `STANDARD` access
    entry."""
    policy: Literal[
        "AmazonEKSClusterAdminPolicy", "AmazonEKSAdminPolicy", "AmazonEKSEditPolicy", "AmazonEKSViewPolicy"
    ] = "AmazonEKSClusterAdminPolicy"
    """EKS access policy: `AmazonEKSClusterAdminPolicy` (default, cluster-wide only), `AmazonEKSAdminPolicy`,
    `AmazonEKSEditPolicy` or `AmazonEKSViewPolicy`."""
    namespaces: list[str] | None = Field(None, min_length=1)
    """Namespaces the policy applies in (access scope `namespace`): each a workload namespace of the stack (a claim
    namespace under `storage` or a team namespace under `workloads.namespaces`). Left out: the whole cluster (access
    scope `cluster`). `AmazonEKSClusterAdminPolicy` takes no namespaces."""


LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
#: Every control-plane log type: scanners (Security Hub EKS.8, tfsec/Trivy `enable-control-plane-logging`) want audit
#: at least and all five at best, and controllerManager and scheduler are the low-volume ones (docs/security.md).
DEFAULT_LOG_TYPES: tuple[LogType, ...] = ("api", "audit", "authenticator", "controllerManager", "scheduler")
#: The retention periods CloudWatch Logs accepts (PutRetentionPolicy `retentionInDays`).
LogRetentionDays = Literal[
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653
]
#: The highest IMDS hop limit EC2 accepts (launch template `HttpPutResponseHopLimit`, 1-64).
MAX_IMDS_HOP_LIMIT = 64
#: A year: what Security Hub's CloudWatch.16 asks of log groups by default.
DEFAULT_LOG_RETENTION_DAYS: LogRetentionDays = 365


class Encryption(Model):
    key_per_domain: bool = False
    """One KMS key per data domain instead of the one cluster key: `cluster` (Kubernetes secrets, node and CSI EBS
    volumes), `logs` (control-plane and flow log groups), `training-data` (the Lustre file system and its S3 bucket,
    with Lustre) and `inference-data` (the EFS file system, with EFS), each key's policy naming only the services of
    its domain (docs/security.md, "Keys and encryption"). Set it when the stack is created, never later: turning it
    on or off on a deployed stack re-encrypts nothing, replaces the Lustre and EFS file systems (their key is fixed at
    creation; with `protectStateful` the preview fails instead) and leaves earlier log events under a key that no
    longer admits CloudWatch Logs. Default `false`."""


class ClusterConfig(Model):
    name: ClusterName
    """EKS cluster name: 1 to 100 letters, digits, `-` and `_`, starting with a letter or digit. Every resource name
    of the stack derives from it. Required."""
    kubernetes_version: str = "1.35"
    """Kubernetes minor version, e.g. `"1.35"`. Must be one EKS supports today (`components/catalog/versions.yaml`);
    an unsupported one is rejected with the supported list."""
    endpoint: EndpointAccess = Field(default_factory=EndpointAccess)
    """Who can reach the Kubernetes API server; private only by default."""
    logging: list[LogType] = Field(default_factory=lambda: list(DEFAULT_LOG_TYPES))
    """Control-plane log types (EKS `enabledClusterLogTypes`). Default all five; api, audit and authenticator are the
    minimum the policy pack accepts. They go to the log group `/aws/eks/<name>/cluster`, which the stack creates
    before the cluster, encrypted with the cluster's KMS key."""
    log_retention_days: LogRetentionDays = DEFAULT_LOG_RETENTION_DAYS
    """Days CloudWatch Logs keeps the control-plane logs, one of the periods CloudWatch accepts (1, 3, 5, 7, 14, 30,
    60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653). Default 365."""
    support_type: Literal["STANDARD", "EXTENDED"] = "STANDARD"
    """EKS upgrade policy: STANDARD ends support after 14 months, EXTENDED adds 12 paid months."""
    service_cidr: Cidr = IPv4Network("172.20.0.0/16")
    """Kubernetes service CIDR: RFC 1918, /12 to /24, not overlapping the VPC; fixed when the cluster is created.
    nodeadm needs it to infer the cluster DNS address. Default `172.20.0.0/16`."""
    admins: list[AdminAccess] = Field(default_factory=list)
    """IAM principals given an access entry and an access policy with cluster scope. The principal running
    `pulumi up` gets its own entry with `AmazonEKSClusterAdminPolicy` (the program creates Kubernetes objects), so
    list it here only to give it a different policy as well; EKS's implicit creator admin is off. Default none."""
    deployer_principal_arn: PrincipalArn | None = None
    """The IAM role or user that runs `pulumi up` and gets the cluster-admin access entry the program needs. Default:
    whoever runs it (an assumed-role session resolved to its role). Set it when previews run as another identity
    (a pull-request role) than deployments, so the entry does not follow whoever ran last; the principal running
    `pulumi up` must then be this one, or it cannot create the Kubernetes objects."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Cost-allocation and ownership tags put on every AWS resource; keys starting with `aws:` are reserved. The
    policy pack requires `team` and `cost-center` by default. Default none."""
    protect_stateful: bool = True
    """Protect stateful resources (KMS keys, file systems, buckets) from `pulumi destroy` and replacement."""
    encryption: Encryption = Field(default_factory=Encryption)
    """The stack's customer-managed KMS keys: one for the cluster (default) or one per data domain."""
    deletion_protection: bool = True
    """EKS deletion protection: EKS refuses to delete the cluster until it is turned off, so a stray `pulumi destroy`
    or replacement stops before the cluster goes. Default `true`; to delete the cluster, set `false` and run
    `pulumi up` first (docs/operations.md, "Stateful resources and `pulumi destroy`")."""
    ami_release: Al2023Release = "v20260714"
    """The EKS-optimized Amazon Linux 2023 AMI release every `al2023` pool boots, e.g. `v20260714` (releases:
    https://github.com/awslabs/amazon-eks-ami/releases). Read from its own SSM parameter, so a new AWS release changes
    nothing until this changes; changing it rolls system and inference pools (docs/operations.md, "Upgrading node
    images"). Default `v20260714`, the release the catalog was checked against ([AMI])."""
    bottlerocket_release: BottlerocketRelease | None = None
    """The Bottlerocket release every `bottlerocket` pool boots, e.g. `1.42.0`; required when a pool uses
    Bottlerocket (no default: the catalog pins no Bottlerocket release). Changing it rolls pools as `amiRelease`
    does."""


# ---------------------------------------------------------------------------------------------------------- network
class ExistingVpc(Model):
    """Bring your own VPC: subnets are given per availability zone so pools can be pinned to one AZ."""

    vpc_id: Annotated[str, StringConstraints(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    """Id of the VPC to use (`vpc-` and 8 or 17 hex digits). The stack registers no VPC, subnet, route, NAT gateway
    or endpoint."""
    private_subnet_ids: dict[str, Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(
        default_factory=dict
    )
    """Private subnets as `{availability zone: subnet id}`, at least two AZs. Nodes, the control plane's network
    interfaces and file systems go here; the keys are the network's AZs."""
    public_subnet_ids: dict[str, Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(
        default_factory=dict
    )
    """Public subnets as `{availability zone: subnet id}`, for internet-facing load balancers only. Optional."""


class SiteConnection(Model):
    """The gateway that already connects the region to the site (VPN or Direct Connect): a new VPC is attached to it
    and routes the site's networks through it (EKS user guide, "Prepare networking for hybrid nodes" [EKSUG]). Give
    exactly one of the two ids."""

    transit_gateway_id: Annotated[str, StringConstraints(pattern=r"^tgw-[0-9a-f]{8,17}$")] | None = None
    """A transit gateway (`tgw-` and 8 or 17 hex digits) whose route tables reach the site: the stack attaches the
    VPC's private subnets to it. Its route table must send the VPC CIDR back to the attachment (the default route
    table propagation does) and accept the attachment (auto-accept, or accept it when the gateway is shared from
    another account)."""
    virtual_private_gateway_id: Annotated[str, StringConstraints(pattern=r"^vgw-[0-9a-f]{8,17}$")] | None = None
    """A virtual private gateway (`vgw-` and 8 or 17 hex digits) the site's VPN or Direct Connect gateway ends on,
    attached to no other VPC (a VGW serves one VPC): the stack attaches it to the new VPC."""


class FlowLogs(Model):
    """VPC flow logs of a new VPC, delivered to a CloudWatch Logs group encrypted with the cluster's KMS key."""

    enabled: bool = True
    """Record the VPC's traffic (accepted and rejected) to the log group `/aws/vpc/<cluster>/flow-logs`. Default
    `true`; `false` turns them off and must be written out. With `existingVpc` the VPC's owner keeps its flow logs and
    the stack records none."""
    retention_days: LogRetentionDays = DEFAULT_LOG_RETENTION_DAYS
    """Days CloudWatch Logs keeps the flow log records, one of the periods CloudWatch accepts (see
    `cluster.logRetentionDays`). Default 365."""


class NetworkConfig(Model):
    """A new VPC (default) or an existing one (`existingVpc`)."""

    vpc_cidr: Cidr = IPv4Network("10.0.0.0/16")
    """IPv4 block of the VPC, /16 to /24 (pods take VPC addresses, so prefer a /16); must not overlap
    `cluster.serviceCidr`. With `existingVpc`, set it to that VPC's CIDR. Default `10.0.0.0/16`."""
    availability_zones: list[str] = Field(default_factory=list)
    """AZs of the stack's region for a new VPC, 2 to 6 (the EKS control plane needs two); one private and one public
    subnet each. Leave out with `existingVpc`."""
    availability_zone_ids: dict[str, Annotated[str, StringConstraints(pattern=r"^[a-z]+\d+-az\d+$")]] = Field(
        default_factory=dict
    )
    """This account's AZ ID of each AZ the network spans, `{us-east-1a: use1-az4, ...}` (`aws ec2
    describe-availability-zones --query 'AvailabilityZones[].[ZoneName,ZoneId]'`, or `blueprint preflight`). AZ names
    map to different zones in different accounts of older regions; with the IDs, a mapped AZ's subnets are placed by
    zone ID, validation refuses a pool in an AZ that does not offer its instance type
    (components/catalog/offerings.yaml) and an AZ whose ID EKS refuses for cluster subnets (`use1-az3`, `usw1-az2`,
    `cac1-az3`). The names stay the keys; this maps them. Without it, the cluster's subnets leave out those zones by
    the account's mapping at deploy time. Optional."""
    s3_endpoint_buckets: list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9*]$")]] = (
        Field(default_factory=list)
    )
    """More buckets (names, or a prefix ending in `*`) that workloads in a new VPC reach through its S3 gateway
    endpoint, whose policy admits only the stack's own buckets and the AWS buckets nodes read (ECR layers, AL2023
    repositories, the SSM agent's, registry.k8s.io's): datasets elsewhere, another registry serving layers from S3
    in the Region, the Pulumi state bucket when `pulumi up` runs in the VPC. Default none."""
    nat_gateways: Literal["one-per-az", "single"] = "one-per-az"
    """One NAT gateway per AZ (survives an AZ outage) or a single shared one (cheaper, for dev stacks)."""
    private_subnet_cidrs: list[Cidr] | None = None
    """Explicit subnet CIDRs, one per AZ in `availabilityZones` order; derived from `vpcCidr` when left out."""
    public_subnet_cidrs: list[Cidr] | None = None
    """Public subnet CIDRs, one per AZ in `availabilityZones` order, inside `vpcCidr`. Derived when left out: the
    last eighth of the VPC split into eighths (a /22 in a /16). They hold only NAT gateways and load balancers."""
    existing_vpc: ExistingVpc | None = None
    """Use subnets you already have instead of creating a VPC. Default: a new VPC."""
    flow_logs: FlowLogs = Field(default_factory=FlowLogs)
    """VPC flow logs of a new VPC (on by default). Not used with `existingVpc`."""
    site_connection: SiteConnection | None = None
    """The gateway to the site, for a new VPC: its private subnets route the hybrid pools' remote node and pod CIDRs
    and `cluster.endpoint.privateAccessCidrs` outside the VPC through it. Required when a new VPC has either; not
    used with `existingVpc`, whose routes are yours. Default none."""

    @property
    def zones(self) -> list[str]:
        """The AZs the network spans, whichever way it was given."""
        if self.existing_vpc is not None:
            return sorted(self.existing_vpc.private_subnet_ids)
        return list(self.availability_zones)


# ------------------------------------------------------------------------------------------------------- node pools
class Taint(Model):
    key: LabelKey
    """Taint key, a Kubernetes label key such as `nvidia.com/gpu`."""
    value: LabelValue = ""
    """Taint value, a Kubernetes label value (at most 63 characters); default empty."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"
    """`NoSchedule` (default), `PreferNoSchedule` or `NoExecute`."""

    def render(self) -> str:
        """kubelet `--register-with-taints` form, also used by cluster-autoscaler node-template tags."""
        return f"{self.key}={self.value}:{self.effect}"


class GpuUtilizationScaling(Model):
    """The GPU-utilization rule of a serving workload: its replicas scale on their own GPUs' average utilization
    (DCGM exporter, in Prometheus; KEDA turns the rule into the workload's HPA), and cluster-autoscaler adds nodes
    for the replicas that do not fit and removes the nodes they leave. Steps are counted in nodes: one node's worth
    of replicas is the node's GPUs divided by the replica's (docs/addons.md, "Serving autoscaling")."""

    scale_out_above_percent: float = Field(85, gt=0, lt=100)
    """Add replicas when the serving pods' average GPU utilization is above this percentage (0-100 exclusive).
    Default 85."""
    scale_out_after_minutes: int = Field(15, ge=1, le=1440)
    """Minutes over which the utilization (one-minute averages) must average above `scaleOutAbovePercent` before
    replicas are added, 1-1440. Default 15."""
    scale_out_by: int = Field(2, ge=1)
    """Nodes' worth of replicas added per scale-out step, at least 1. Default 2."""
    scale_in_below_percent: float = Field(30, gt=0, lt=100)
    """Remove replicas when the serving pods' average GPU utilization is below this percentage (0-100 exclusive).
    Default 30."""
    scale_in_after_minutes: int = Field(30, ge=1, le=1440)
    """Minutes over which the utilization (one-minute averages) must average below `scaleInBelowPercent` before
    replicas are removed, 1-1440. Default 30."""
    scale_in_by: int = Field(1, ge=1)
    """Nodes' worth of replicas removed per scale-in step, at least 1. Default 1."""
    cooldown_seconds: int = Field(300, ge=1, le=1800)
    """Seconds after a step before the next step in the same direction (the HPA scaling policies' `periodSeconds`,
    which Kubernetes limits to 1-1800). Default 300."""


class ServingAutoscaling(GpuUtilizationScaling):
    """A serving workload's scaling rule: `queue` (default), KEDA on vLLM's own requests in flight per replica, or
    `gpu-utilization`, the rule above on the replicas' GPU utilization. Each rule's settings are refused under the
    other (docs/addons.md, "Serving autoscaling")."""

    rule: Literal["queue", "gpu-utilization"] = "queue"
    """`queue` (default): replicas follow the requests running and waiting on the workload's vLLM servers
    (`vllm:num_requests_running` + `vllm:num_requests_waiting`), `targetInFlightPerReplica` per replica; it reads no
    GPU metric, so it works on MIG and time-sliced pools too. `gpu-utilization`: the GPU-utilization rule, with the
    settings above."""
    target_in_flight_per_replica: float | None = Field(None, gt=0, le=4096)
    """`rule: queue`: requests in flight (running + waiting) per replica the autoscaler aims for, above 0 and at
    most 4096. Default 70% of the benchmark concurrency at which one replica of the model on the pool's GPU gives
    its rated throughput (`components/catalog/serving_capacity.yaml`), 70% of 50 (35) for a pair not listed there."""


class Scaling(Model):
    min: int = Field(0, ge=0)
    """Minimum number of nodes in the pool's Auto Scaling group, at least 0. Default 0."""
    desired: int | None = Field(None, ge=0)
    """Initial size; ignored after creation so `pulumi up` never fights the autoscaler. Defaults to `min`."""
    max: int = Field(1, ge=0)
    """Maximum number of nodes, at least `min`. Default 1."""
    mode: Literal["cluster-autoscaler", "gpu-utilization", "fixed"] = "cluster-autoscaler"
    """Who resizes the pool: `cluster-autoscaler` (default; the group gets auto-discovery and scale-from-zero
    node-template tags), `gpu-utilization` (the serving workloads on the pool scale their replicas on their GPU
    utilization by `gpuUtilization`, and cluster-autoscaler sizes the pool for them) or `fixed` (nobody)."""
    gpu_utilization: GpuUtilizationScaling = Field(default_factory=GpuUtilizationScaling)
    """The rule of `mode: gpu-utilization`, applied to every serving workload on the pool; refused in the other
    modes."""

    @property
    def initial(self) -> int:
        return self.min if self.desired is None else self.desired


class Capacity(Model):
    """How instances are bought."""

    type: Literal["on-demand", "spot", "capacity-block", "reservation"] = "on-demand"
    """How instances are bought: `on-demand` (default), `spot`, `capacity-block` (Capacity Blocks for ML, needs
    `reservationId`) or `reservation` (On-Demand Capacity Reservation by id or resource group)."""
    spot_instance_types: list[str] = Field(default_factory=list)
    """Extra instance types with the same GPU shape for spot diversification (the pool's type comes first)."""
    on_demand_base_capacity: int = Field(0, ge=0)
    """Spot pools: number of nodes always bought on demand before any spot node. Default 0."""
    on_demand_percentage_above_base: int = Field(0, ge=0, le=100)
    """Spot pools: percentage (0-100) of nodes above the base bought on demand. Default 0 (all spot)."""
    spot_allocation_strategy: Literal["price-capacity-optimized", "capacity-optimized", "lowest-price"] = (
        "price-capacity-optimized"
    )
    """Spot pools: the mixed instances policy's spot allocation strategy, `price-capacity-optimized` (default),
    `capacity-optimized` or `lowest-price`."""
    reservation_id: Annotated[str, StringConstraints(pattern=r"^cr-[0-9a-f]{8,17}$")] | None = None
    """Capacity Block or On-Demand Capacity Reservation id (`cr-...`)."""
    reservation_resource_group_arn: str | None = None
    """Target a reservation resource group instead of one reservation (`reservation` only)."""
    availability_zone: str | None = None
    """The Availability Zone of the reservation named by `reservationId` (one reservation lives in one AZ: `aws ec2
    describe-capacity-reservations --capacity-reservation-ids cr-...` shows it). The pool launches only there; may be
    left out when `placement.availabilityZones` names exactly that one AZ."""
    end_time: Instant | None = None
    """`capacity-block` only, required there: when the Capacity Block ends, as RFC 3339 text with its offset
    (`2026-12-01T11:30:00Z`; the `EndDate` of `aws ec2 describe-capacity-reservations`). The pool scales to zero,
    draining its nodes, at least an hour before (components/planning/reservations.py)."""


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
    """Roll out launch template changes by instance refresh. Default: `false` for training pools (a refresh would
    kill running jobs), `true` for inference and system pools."""
    min_healthy_percentage: int | None = Field(None, ge=0, le=100)
    """Percentage (0-100) of the group kept in service during a refresh. Default 100 (with `maxHealthyPercentage`
    200: new nodes join before old ones drain, so CoreDNS and the controllers never lose their nodes and an
    inference pool keeps every GPU serving)."""
    max_healthy_percentage: int | None = Field(None, ge=100, le=200)
    """Percentage (100-200) of the group that may be in service or launching during a refresh; above 100, new
    instances launch before old ones terminate. At most 100 above `minHealthyPercentage` (EC2 Auto Scaling
    RefreshPreferences). Default: 100 above the minimum, at most 200 (200 with the default minimum). Set 100 to
    terminate before launching, e.g. on a reservation with no instance to spare."""
    instance_warmup_seconds: int = Field(300, ge=0)
    """Seconds a new instance gets before it counts as healthy in a refresh. Default 300."""
    skip_matching: bool = True
    """Skip instances that already run the latest launch template version. Default `true`."""


class RepairOverride(Model):
    """One condition and reason of the node monitoring agent with its own repair action and wait (EKS
    `NodeRepairConfigOverrides`; all four fields are required by EKS)."""

    condition: Literal[
        "AcceleratedHardwareReady", "ContainerRuntimeReady", "KernelReady", "NetworkingReady", "StorageReady"
    ]
    """The node condition the agent reports (`nodeMonitoringCondition`). Required."""
    reason: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]{1,128}$")]
    """The agent's reason code for the unhealthy condition (`nodeUnhealthyReason`), e.g. `NvidiaXID79Error`.
    Required."""
    wait_minutes: int = Field(ge=1, le=1440)
    """Minutes the condition must persist before the node is repaired (`minRepairWaitTimeMins`), 1-1440. Required."""
    action: Literal["Replace", "Reboot", "NoAction"]
    """`Replace` (terminate, the group launches a new node), `Reboot` or `NoAction` (`repairAction`). Required."""


class RepairLimit(Model):
    """A limit of EKS node auto repair as a count of nodes or a percentage of the group: one of the two (EKS takes
    one of each pair)."""

    count: int | None = Field(None, ge=1)
    """A number of nodes, at least 1."""
    percentage: int | None = Field(None, ge=1, le=100)
    """A percentage of the node group's nodes, 1-100."""


class EksRepair(Model):
    """EKS node auto repair of a managed pool (`nodeRepairConfig`): which nodes EKS replaces or reboots on the node
    monitoring agent's conditions, and how many at once. Managed pools only (docs/node-pools.md, "Management and
    node auto repair")."""

    enabled: bool = True
    """Turn node auto repair on. Default `true`."""
    max_parallel: RepairLimit | None = None
    """Repair at most this many nodes (`count`, `maxParallelNodesRepairedCount`) or this percentage of the unhealthy
    ones (`percentage`, `maxParallelNodesRepairedPercentage`) at a time. Default `{count: 1}`: one GPU node at a
    time."""
    max_unhealthy: RepairLimit | None = None
    """Stop repairing while more than this many (`count`, `maxUnhealthyNodeThresholdCount`) or this percentage
    (`percentage`, `maxUnhealthyNodeThresholdPercentage`) of the nodes is unhealthy. Default: EKS's own (repairs stop
    when more than 20% of a group of more than five nodes is unhealthy)."""
    overrides: list[RepairOverride] = Field(default_factory=list)
    """Per-condition repair actions and waits (`nodeRepairConfigOverrides`). Default none: EKS's table (GPU faults
    after 10 minutes, others after 30)."""


class PoolRepair(Model):
    """How the pool's failed nodes are repaired: the health loop's cap and, on managed pools, EKS node auto repair
    (docs/operations.md, "Repair"; docs/node-pools.md, "Management and node auto repair")."""

    max_per_hour: int = Field(3, ge=0, le=100)
    """Replacements the health loop may start on this pool in any hour, 0-100: self-managed `aws` pools' failed
    nodes, managed pools' gate failures. One runs at a time; a failure past the cap keeps its node cordoned,
    undrained and unreplaced, and is counted in `gpu_clusters_node_health_repairs_held_total` (the storm alert). 0:
    failed nodes are only cordoned and drained, never replaced, and nothing is counted as held. On-prem servers are
    never replaced: `hybrid` pools refuse it. Default 3."""
    eks: EksRepair = Field(default_factory=EksRepair)
    """Managed pools only: EKS node auto repair and its limits. Default on, one node at a time."""


#: SSM CreateActivation `RegistrationLimit`: "Valid Range: Minimum value of 1. Maximum value of 1000." (AWS Systems
#: Manager API Reference, CreateActivation).
SSM_REGISTRATION_LIMIT_MAX = 1000


class HybridCredentials(Model):
    provider: Literal["ssm", "iam-roles-anywhere"] = "ssm"
    """How the servers get AWS credentials: `ssm` (SSM hybrid activation, default) or `iam-roles-anywhere`
    (certificates from your own CA)."""
    activation_expiry_hours: int = Field(24, ge=1, le=720)
    """SSM hybrid activation lifetime; nodes must register before it expires (default 24 h, max 30 days)."""
    activation_limit: int | None = Field(None, ge=1, le=SSM_REGISTRATION_LIMIT_MAX)
    """Registration limit of the SSM activation, 1 to 1000 (SSM CreateActivation `RegistrationLimit`); defaults to
    `nodes` plus `spareRegistrations`. Set it or `spareRegistrations`, not both."""
    spare_registrations: int = Field(2, ge=0, le=100)
    """SSM only: registrations the activation admits beyond `nodes`, for a replacement server (a new machine for a
    failed one) while the activation lives. A server that leaves with `nodeadm uninstall` cannot register again with
    the same activation (SSM DeregisterManagedInstance): a rejoin re-issues it (`activationRevision`). Default 2."""
    activation_revision: int = Field(1, ge=1)
    """SSM only: bump it to re-issue the activation (a new code and expiry) for a rejoin or a late server: the
    revision is part of the activation's name, and a new name replaces it. Servers already registered stay.
    Default 1 (docs/operations.md, 'Rejoining a server')."""
    trust_anchor_certificate: str | None = None
    """IAM Roles Anywhere: the PEM bundle of the CA that signs the nodes' certificates."""


class CiliumBgp(Model):
    """Cilium's BGP control plane on a hybrid pool's servers: each server peers with the site router and advertises
    the pod block Cilium gave it, so the site (and through it the VPC) routes the remote pod CIDRs."""

    peer_address: IpAddress
    """The site router's address the servers peer with (e.g. 192.168.100.1). Required."""
    peer_asn: Asn
    """The site router's autonomous system number. Required."""
    local_asn: Asn
    """The servers' autonomous system number (Cilium's `localASN`). Required."""


class HybridNetwork(Model):
    """The on-prem networks of a hybrid pool (EKS `remoteNetworkConfig`)."""

    remote_node_cidrs: list[Cidr] = Field(default_factory=list)
    """The servers' own networks, RFC 1918, /8 to /32; must not overlap the VPC, the service CIDR or each other.
    Required for a hybrid pool."""
    remote_pod_cidrs: list[Cidr] = Field(default_factory=list)
    """Pod networks Cilium hands out on the servers (its cluster-pool, a /25 per server), RFC 1918, same overlap
    rules as `remoteNodeCidrs`. Required for a hybrid pool: Cilium's pool is exactly these CIDRs."""
    webhooks_on_hybrid_nodes: bool = True
    """Webhooks (e.g. admission controllers) may run on hybrid nodes: the control plane's security group may reach
    the remote pod CIDRs on webhook ports (443 and 1025-65535). The site must route the pod CIDRs (`bgp`, or
    static routes on its router). Default `true`."""
    bgp: CiliumBgp | None = None
    """Advertise the pod CIDRs to the site router with Cilium's BGP control plane (peer address and ASNs). Without
    it, the site router needs static routes for each server's pod block."""


#: Keys people write that no model reads, each with the reason: refused with it rather than with a spelling hint.
UNSUPPORTED_KEYS: dict[type[Model], dict[str, str]] = {
    ClusterConfig: {
        "autoscalingServiceLinkedRole": "no longer a setting: every stack creates its own Auto Scaling service-linked "
        "role, AWSServiceRoleForAutoScaling_<cluster.name>.<aws:region>, names it in the KMS key policy and on every "
        "node group, and deletes it on `pulumi destroy` (docs/network-and-cluster.md, 'The Auto Scaling "
        "service-linked role'); remove the key",
    },
    HybridNetwork: {
        "uplinkGbps": "not supported: nothing the stack plans crosses the site's uplink (hybrid nodes mount neither "
        "FSx for Lustre nor EFS; an existing NFS server's bandwidth is storage.nfs.bandwidthGbps); remove it",
    },
}


#: A MIG profile name as NVIDIA writes it: `<compute slices>g.<memory>gb`, `+me` for the media-engine variant.
MigProfileName = Annotated[str, StringConstraints(pattern=r"^\d+g\.\d+gb(\+me)?$")]


class DevicePluginSettings(Model):
    """Per-pool GPU sharing: time-slicing (through the device plugin's per-node config label) and MIG partitions
    (through NVIDIA's mig-manager and the `nvidia.com/mig.config` node label)."""

    time_slicing_replicas: int = Field(1, ge=1, le=64)
    """Time-slicing: advertise each GPU this many times (1 = off). Inference pools use it to pack small models. On a
    MIG pool each MIG device is advertised this many times."""
    mig_devices: dict[MigProfileName, Annotated[int, Field(ge=1, le=7)]] | None = None
    """Multi-Instance GPU: partition every GPU of the pool into these MIG devices, `{profile: count per GPU}`, e.g.
    `{"1g.10gb": 7}` or `{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}` (mig-parted's `mig-devices`). The profiles must
    be ones the pool's GPU has (components/catalog/gpus.yaml) and fit one GPU; needs `addons.nvidiaDevicePlugin.
    migStrategy` `single` (one profile) or `mixed`, and an `al2023` image. Default none: whole GPUs
    (docs/gpu-sharing.md)."""


class HealthGate(Model):
    """The health gate of a GPU pool's new nodes (docs/operations.md, "The health loop")."""

    enabled: bool = True
    """Register the pool's nodes with the startup taint and admit them to GPU work only once their check passes.
    Default `true`; ignored on CPU pools and on MIG pools (DCGM's diagnostic needs whole GPUs). Needs
    `addons.nodeHealth.enabled`."""
    dcgm_level: Literal[1, 2] = 1
    """The DCGM diagnostic level of the check (`dcgmi diag -r`): 1 (seconds) or 2 (about two minutes). Default 1."""


class NodePool(Model):
    name: PoolName
    """Pool name: 2 to 32 lower-case letters, digits and `-`, starting with a letter. Part of resource names and of
    the `gpu-clusters/pool` node label. Required."""
    kind: Literal["aws", "hybrid"] = "aws"
    """`aws` (default): an Auto Scaling group of EC2 instances; `hybrid`: on-prem servers joined as EKS Hybrid Nodes."""
    role: Literal["training", "inference", "system"]
    """`training`, `inference` or `system`; decides defaults (EFA, placement, local storage, instance refresh) and
    which pools mount shared storage. Required."""
    instance_type: str | None = None
    """AWS pools: the instance type (or give gpuModel + gpusPerNode and the cheapest matching type is chosen)."""
    gpu_model: str | None = None
    """Hybrid pools: the on-prem GPU model; AWS pools: alternative to instanceType."""
    gpus_per_node: int | None = Field(None, ge=1, le=16)
    """GPUs per node, 1-16. Hybrid pools: required, with `gpuModel`. AWS pools: with `gpuModel`, selects the cheapest
    catalog type with that many GPUs."""
    capacity: Capacity = Field(default_factory=Capacity)
    """How the pool's instances are bought (AWS pools). Default on-demand."""
    scaling: Scaling = Field(default_factory=Scaling)
    """Size bounds of the pool's Auto Scaling group and who resizes it (AWS pools)."""
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Extra node labels passed to kubelet at registration, added to the ones the stack sets (`gpu-clusters/pool`,
    `gpu-clusters/role`, GPU labels). Default none."""
    taints: list[Taint] | None = None
    """Node taints; when left out, GPU pools get `nvidia.com/gpu=true:NoSchedule` and system pools
    `CriticalAddonsOnly=true:NoSchedule` (every add-on tolerates it; user pods stay off the system nodes)."""
    efa: Literal["auto", "on", "off"] = "auto"
    """Wire EFA interfaces: `auto` (default) for training pools whose instance type has EFA, `on` to force (rejected
    on types without EFA), `off` to skip."""
    efa_layout: Literal["efa-only", "efa"] = "efa-only"
    """`efa-only`: AWS's current layout (ENA primary, efa-only elsewhere); `efa`: the older all-`efa` layout."""
    placement: Placement = Field(default_factory=Placement)
    """Availability zones and cluster placement group of the pool (AWS pools)."""
    local_storage: Literal["RAID0", "RAID10", "Mount", "none"] | None = None
    """nodeadm local NVMe strategy; defaults to RAID0 for training pools whose type has instance store."""
    root_volume_gib: int = Field(200, ge=20, le=16384)
    """Size of the encrypted gp3 root volume in GiB, 20-16384, encrypted with the cluster's KMS key. Default 200."""
    ami_family: Literal["al2023", "bottlerocket"] = "al2023"
    """`al2023` (default): the EKS-optimized Amazon Linux 2023 AMI (NVIDIA variant for GPU types) bootstrapped by
    nodeadm; `bottlerocket`: the Bottlerocket (NVIDIA) variant with TOML settings."""
    imds_hop_limit: int = Field(1, ge=1, le=MAX_IMDS_HOP_LIMIT)
    """IMDSv2 hop limit. Default 1: pods on the pod network cannot reach the instance metadata service, so they never
    get the node role's credentials (pods on the host network, such as the VPC CNI, still can). More than 1 needs
    `imdsHopLimitReason`."""
    imds_hop_limit_reason: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9 _.:/=+@-]{1,256}$")] | None = None
    """Why the pool needs an IMDS hop limit above 1 (which pod reads instance metadata from the pod network): required
    with `imdsHopLimit` above 1 and refused otherwise. It becomes the launch template's tag
    `gpu-clusters/imds-hop-limit-reason`, which the policy pack reads as the justification. At most 256 characters of
    letters, digits, spaces and `_ . : / = + @ -` (EC2 tag values)."""
    instance_refresh: InstanceRefresh = Field(default_factory=InstanceRefresh)
    """How launch template changes roll out to running nodes (AWS pools)."""
    management: Literal["auto", "managed", "self-managed"] = "auto"
    """AWS pools: `managed` (an EKS managed node group with node auto repair), `self-managed` (a self-managed Auto
    Scaling group) or `auto` (default): managed when every feature the pool uses works there, else self-managed
    (`blueprint plan` shows the choice and why; docs/node-pools.md, "Management and node auto repair")."""
    device_plugin: DevicePluginSettings = Field(default_factory=DevicePluginSettings)
    """Per-pool GPU sharing: time-slicing and MIG partitions (docs/gpu-sharing.md)."""
    gpu_allocation: Literal["device-plugin", "dra"] = "device-plugin"
    """GPU pools: how pods get the pool's GPUs. `device-plugin` (default): NVIDIA's device plugin advertises
    `nvidia.com/gpu`; `dra`: NVIDIA's DRA driver for GPUs publishes them as devices of the DeviceClass
    `gpu.nvidia.com`, the device plugin keeps off the pool, and the stack's workloads there ask for GPUs through a
    ResourceClaimTemplate. `dra` needs an `aws` pool on `al2023` without MIG or time-slicing, named in no
    ClusterQueue's `pools` (the default queues leave it out), and at least one node when cluster-autoscaler resizes
    it (docs/gpu-sharing.md#gpus-through-dra)."""
    repair: PoolRepair = Field(default_factory=PoolRepair)
    """How the pool's failed nodes are repaired: the health loop's hourly cap (`maxPerHour`) and, on managed pools,
    EKS node auto repair (`eks`) (docs/operations.md, "Repair")."""
    # hybrid pools only
    nodes: int | None = Field(None, ge=1)
    """Hybrid pools: number of on-prem servers that join, at least 1; with `spareRegistrations`, the default SSM
    activation limit. Required for hybrid pools."""
    vcpus_per_node: int | None = Field(None, ge=1, le=4096)
    """Hybrid pools: vCPUs of each server (threads the OS sees), 1-4096. EKS bills Hybrid Nodes per vCPU-hour, so the
    plan's cost counts the fee from it; left out, the fee is listed unpriced. Default none."""
    network: HybridNetwork | None = None
    """Hybrid pools: the site's node and pod networks (EKS `remoteNetworkConfig`). Required for hybrid pools."""
    credentials: HybridCredentials = Field(default_factory=HybridCredentials)
    """Hybrid pools: how the servers authenticate to AWS (SSM activation or IAM Roles Anywhere). Default SSM."""
    unreachable_toleration_seconds: int | None = Field(None, ge=300, le=86400)
    """Hybrid pools: how long (300-86400 s) pods that run only on this pool (the serving replicas, and the on-prem
    CoreDNS replica and Cilium operator) stay bound to a server that is unreachable or not ready, where Kubernetes
    gives every pod 300 s. Default 1800, the value of AWS's hybrid nodes pod-failover guidance: a site-link outage
    shorter than that evicts nothing (the servers keep serving on-prem clients, and nothing is killed and reloaded
    on reconnection), while the pods of one dead server still move to the others after it (docs/operations.md,
    "Pods only the servers can run")."""
    health_gate: HealthGate = Field(default_factory=HealthGate)
    """GPU pools: the health check a new node passes before it takes GPU work, and again when idle."""
    gpu_runtime: Literal["default-runtime", "runtime-class"] = "default-runtime"
    """Hybrid pools: how GPU containers get the NVIDIA container runtime, which nodeadm does not configure on
    hybrid nodes (containerd's default stays runc). `default-runtime` (default): each server makes `nvidia`
    containerd's default runtime with `nvidia-ctk`, as the EKS NVIDIA AMIs do, so the same pod spec gets its GPUs on
    cloud and on-prem nodes and no pod names a runtime; `runtime-class`: each server only registers the `nvidia`
    handler, the stack registers a RuntimeClass `nvidia`, and the device plugin and DCGM exporter pods on the pool run
    with it (every GPU workload there must set `runtimeClassName: nvidia` too, or it sees no GPU)."""


# ---------------------------------------------------------------------------------------------------------- storage
S3Event = Literal["NEW", "CHANGED", "DELETED"]
DEFAULT_IMPORT_EVENTS: tuple[S3Event, ...] = ("NEW", "CHANGED")


class DataRepository(Model):
    """An S3 data repository association of the Lustre file system (datasets in, checkpoints out)."""

    file_system_path: Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9_./-]*$")]
    """Absolute path in the Lustre file system where the S3 data appears, e.g. `/datasets`; paths of one file system
    must be distinct and not nested. Required."""
    data_repository_path: Annotated[str, StringConstraints(pattern=r"^s3://[a-z0-9.-]{3,63}(/.*)?$")] | None = None
    """`s3://bucket/prefix/`; leave out to use the bucket the stack creates, at `prefix`."""
    prefix: str = ""
    """Prefix in the stack's own bucket (used when `dataRepositoryPath` is left out), e.g. `datasets/`. Default
    empty."""
    import_events: list[S3Event] = Field(default_factory=lambda: list(DEFAULT_IMPORT_EVENTS))
    """S3 changes Lustre picks up automatically: any of `NEW`, `CHANGED`, `DELETED`. Default `[NEW, CHANGED]`."""
    export_events: list[S3Event] = Field(default_factory=list)
    """Lustre changes written back to S3 automatically: any of `NEW`, `CHANGED`, `DELETED`. Default none."""
    batch_import_metadata_on_create: bool = True
    """List the existing objects' metadata into Lustre when the association is created. Default `true`."""


class LustreMetadata(Model):
    mode: Literal["AUTOMATIC", "USER_PROVISIONED"] = "AUTOMATIC"
    """`AUTOMATIC` (default; FSx sizes metadata IOPS from capacity) or `USER_PROVISIONED` (give `iops`)."""
    iops: int | None = Field(None, ge=1500, le=192000)
    """`USER_PROVISIONED` only: metadata IOPS, 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000."""


class KubernetesVolume(Model):
    """How pods reach a file system: a PersistentVolumeClaim in a namespace."""

    namespace: str = "default"
    """Namespace of the PersistentVolumeClaim, a workload namespace: created by the stack at Pod Security `restricted`
    with a default-deny NetworkPolicy and a GPU quota (`default` is labelled, not created; kube-system and the
    add-ons' namespaces are refused). Default `default`."""
    claim_name: str | None = None
    """Name of the PersistentVolumeClaim pods mount. Default: the file system's `name`."""
    storage_class: bool = False
    """Lustre only: also create the StorageClass `<name>-fsx`, which provisions more file systems on demand with the
    same subnet, security group, KMS key and tier (its CSI controller then gets create/delete rights). Default
    `false`."""


#: FSx `RootSquash`: `UID:GID`, both non-zero (0 would be root, which disables squashing), at most 4294967294
#: (FSx API reference, LustreRootSquashConfiguration).
MAX_SQUASH_ID = 4294967294


def _squash_ids_in_range(value: str) -> str:
    if any(int(part) > MAX_SQUASH_ID for part in value.split(":")):
        raise ValueError(f"UID and GID are at most {MAX_SQUASH_ID}")
    return value


SquashIds = Annotated[
    str,
    StringConstraints(pattern=r"^[1-9][0-9]{0,9}:[1-9][0-9]{0,9}$"),
    AfterValidator(_squash_ids_in_range),
]
#: FSx `NoSquashNids`: a Lustre NID or a range of them over TCP, e.g. `10.0.1.6@tcp`, `10.0.[2-10].[1-255]@tcp`.
LustreNid = Annotated[
    str, StringConstraints(pattern=r"^([0-9\[\]\-]*\.){3}([0-9\[\]\-]*)@tcp$", min_length=11, max_length=43)
]


class LustreRootSquash(Model):
    """Lustre root squash: root on a client acts as an unprivileged user on the file system, so a pod that became
    root on its node cannot read or change every file (FSx guide, "Lustre root squash")."""

    uid_gid: SquashIds
    """`UID:GID` root is mapped to, both non-zero, e.g. `65534:65534` (nobody). Required."""
    no_squash_nids: list[LustreNid] = Field(default_factory=list, max_length=64)
    """Clients that keep root (Lustre NIDs, `10.0.1.6@tcp` or ranges `10.0.[2-10].[1-255]@tcp`), at most 64, e.g. an
    administration host. Default none."""


class LustreWorkloadDirectories(Model):
    """The directory each Lustre client node creates at boot for the claim's namespace, `/<namespace>` in the file
    system, so pods that run as a user (Pod Security `restricted`) can write: the file system's root is owned by
    root with mode 0755 (docs/storage.md#writable-directories-on-lustre)."""

    enabled: bool = True
    """Create the directory when a Lustre client node boots, if it is absent. Default `true`."""
    uid: int = Field(1000, ge=1, le=MAX_SQUASH_ID)
    """Numeric owner of the directory, the `runAsUser` of the namespace's pods; not 0. Default 1000."""
    gid: int = Field(1000, ge=1, le=MAX_SQUASH_ID)
    """Numeric group of the directory, the `runAsGroup` or a `supplementalGroups` entry of the namespace's pods; not
    0. Default 1000."""
    mode: Annotated[str, StringConstraints(pattern=r"^[0-7]?[0-7]{3}$")] = "2770"
    """Octal mode of the directory, e.g. `2770` (default): owner and group read, write and enter, nobody else;
    setgid, so files made inside belong to the group and a team shares them."""


class LustreConfig(Model):
    name: PoolName = "lustre"
    """Names the file system, its resources and the default claim; same pattern as pool names. Default `lustre`."""
    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = "PERSISTENT_2"
    """`PERSISTENT_2` (default; replicated, KMS-encrypted, backed up) or `SCRATCH_2` (no replication or backups,
    fixed 200 MB/s/TiB)."""
    storage_capacity_gib: int = Field(4800, ge=1200)
    """Capacity in GiB: 1200, 2400, then multiples of 2400; EFA-enabled: multiples of 38400 / 19200 / 9600 / 4800 at
    125 / 250 / 500 / 1000 MB/s/TiB. Off-step sizes are rejected with the nearest valid ones. Default 4800."""
    per_unit_storage_throughput: int | None = 250
    """PERSISTENT_2 throughput in MB/s per TiB of capacity: 125, 250 (default), 500 or 1000. SCRATCH_2 has a fixed
    200 MB/s/TiB: leave the key out."""
    efa_enabled: bool = False
    """Serve clients over EFA (and GPUDirect Storage); needs PERSISTENT_2 and `metadata`, and adds all-traffic rules
    between the file system's and the nodes' security groups. AWS recommends it above 10 GB/s. Default `false`."""
    metadata: LustreMetadata | None = None
    """PERSISTENT_2 metadata configuration (required with `efaEnabled`). Default none."""
    compression: Literal["LZ4", "NONE"] = "LZ4"
    """Data compression: `LZ4` (default) or `NONE`."""
    root_squash: LustreRootSquash | None = None
    """Map root on every client to an unprivileged `UID:GID` (FSx `RootSquashConfiguration`). Default off. Workload
    pods already run as non-root users (their namespaces enforce Pod Security `restricted`); root squash guards
    against root on a client itself: a node, a host-access pod, another mount of the file system. Recommended on
    for clusters shared by several teams."""
    backup_retention_days: int = Field(7, ge=0, le=90)
    """Days of automatic daily backups, 0-90. Default 7; 0 on SCRATCH_2 and on a file system linked to S3
    (`dataRepositories`), which FSx does not back up (more days are refused there)."""
    availability_zone: str | None = None
    """Defaults to the AZ of the training pools that mount it."""
    pools: list[str] | None = None
    """Pools that mount it; defaults to every training pool."""
    create_bucket: bool = True
    """Create a bucket for the data repositories (versioned, encrypted, private) when none is given by path."""
    data_repositories: list[DataRepository] = Field(default_factory=list)
    """S3 data repository associations, at most 8. Default none."""
    kubernetes: KubernetesVolume = Field(default_factory=KubernetesVolume)
    """Namespace and claim pods mount the file system through (a static PersistentVolume with `reclaimPolicy:
    Retain`)."""
    workload_directories: LustreWorkloadDirectories = Field(default_factory=LustreWorkloadDirectories)
    """The directory `/<namespace>` the client nodes create at boot for the claim's namespace, its owner and mode."""


class NfsMount(Model):
    """The mount options of an existing NFS server's volume, each a Linux NFS client option (nfs(5) man page).

    The defaults are for reading large files (model weights) from one server over a fast link: NFS 4.1, several
    TCP connections, the client's largest transfer size, and hard mounts so a server restart stalls reads instead of
    failing them.
    """

    nfs_version: Literal["3", "4.0", "4.1", "4.2"] = "4.1"
    """`nfsvers`: the NFS protocol version the server exports, as text (`"4.1"`, like `kubernetesVersion`). Default
    `"4.1"`."""
    nconnect: int = Field(8, ge=1, le=16)
    """`nconnect`: TCP connections per node to the server, 1-16 (nfs(5): "up to a limit of 16"; Linux 5.3 and
    later). More connections spread reads over the NICs' queues and links. Default 8."""
    rsize: int = Field(1048576, ge=1024, le=1048576)
    """`rsize`: bytes per read request, 1024 or 2048 or a multiple of 4096 (the page size) up to 1048576, the Linux
    client's largest (nfs(5): other values are rounded down); the server may lower it. Default 1048576."""
    wsize: int = Field(1048576, ge=1024, le=1048576)
    """`wsize`: bytes per write request, as `rsize`. Default 1048576."""
    hard: bool = True
    """`hard` (default `true`): retry a request until the server answers; `false` mounts `soft`, which fails it
    after `retrans` retries and "can cause silent data corruption" (nfs(5))."""
    timeo: int = Field(600, ge=1, le=600)
    """`timeo`: tenths of a second the client waits for a reply before it retries, 1-600 (nfs(5): over TCP a larger
    value is set to the default, 600). Default 600 (60 s)."""
    retrans: int = Field(2, ge=0)
    """`retrans`: retries before the client logs "server not responding" (hard) or fails the request (soft).
    Default 2 (nfs(5))."""


class NfsConfig(Model):
    """Shared NFS for inference: Amazon EFS, or an existing (e.g. on-prem) NFS server through csi-driver-nfs."""

    name: PoolName = "models"
    """Names the file system, StorageClass and default claim; same pattern as pool names. Default `models`."""
    kind: Literal["efs", "existing"] = "efs"
    """`efs` (default): an Amazon EFS file system the stack creates; `existing`: an NFS server you run (e.g.
    on-prem), through csi-driver-nfs."""
    # EFS
    throughput_mode: Literal["elastic", "bursting", "provisioned"] = "elastic"
    """EFS only: `elastic` (default), `bursting` (throughput grows with the data stored) or `provisioned` (with
    `provisionedThroughputMibps`)."""
    provisioned_throughput_mibps: float | None = Field(None, ge=1, le=3414)
    """EFS `provisioned` mode only: throughput in MiB/s, 1-3414."""
    transition_to_ia: Literal[
        "AFTER_1_DAY",
        "AFTER_7_DAYS",
        "AFTER_14_DAYS",
        "AFTER_30_DAYS",
        "AFTER_60_DAYS",
        "AFTER_90_DAYS",
        "NONE",
    ] = "AFTER_30_DAYS"
    """EFS only: move files not read for this long to Infrequent Access (and back on first read); `NONE` turns it
    off. Default `AFTER_30_DAYS`."""
    # existing server
    server: str | None = None
    """`existing` only: DNS name or IP address of the NFS server. Required for `existing`."""
    share: str | None = None
    """`existing` only: absolute path of the export, e.g. `/exports/models`. Required for `existing`."""
    mount: NfsMount = Field(default_factory=NfsMount)
    """`existing` only: how every node mounts the share (NFS version, connections, transfer sizes, retries)."""
    mount_options: list[str] = Field(default_factory=list)
    """`existing` only: further NFS mount options, appended after those `mount` sets and not repeating them (e.g.
    `noatime`, `sec=krb5`; nfs(5)). Default none."""
    capacity_gib: int = Field(1024, ge=1)
    """Size in GiB the claim requests, at least 1. Neither EFS nor NFS enforces it. Default 1024."""
    bandwidth_gbps: float | None = Field(None, gt=0)
    """`existing` only: the server's network bandwidth in Gbit/s, used only for the plan's throughput figures (x 125
    MB/s). Optional."""
    pools: list[str] | None = None
    """Pools that mount the volume (for the plan's per-GPU throughput); never hybrid pools for EFS, whose CSI driver
    AWS does not list for EKS Hybrid Nodes. Default: every inference pool (for EFS, every cloud inference pool)."""
    kubernetes: KubernetesVolume = Field(default_factory=KubernetesVolume)
    """Namespace and claim pods mount the volume through."""


class StorageConfig(Model):
    lustre: LustreConfig | None = None
    """An FSx for Lustre file system for training pools. Default none."""
    nfs: NfsConfig | None = None
    """A shared NFS volume (EFS or an existing server) for inference pools. Default none."""


# ----------------------------------------------------------------------------------------------------------- addons
class NvidiaDevicePlugin(Model):
    enabled: bool = True
    """Deploy the NVIDIA device plugin when any pool has GPUs. Default `true`."""
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    """How the plugin advertises the MIG devices of pools with `devicePlugin.migDevices`: `none` (default, no pool
    uses MIG), `single` (every MIG pool has one profile; its devices are advertised as `nvidia.com/gpu`) or `mixed`
    (one resource per profile, `nvidia.com/mig-1g.10gb`; not on pools scaled by cluster-autoscaler)."""


class EfaDevicePlugin(Model):
    enabled: Literal["auto", "on", "off"] = "auto"
    """`auto`: deployed when any pool wires EFA."""


class ClusterAutoscaler(Model):
    enabled: Literal["auto", "on", "off"] = "auto"
    """`auto` (default): deployed when any `aws` pool is in `cluster-autoscaler` mode with `min < max`; `on` or `off`
    force it."""
    expander: Literal["least-waste", "priority", "most-pods", "random", "price"] = "least-waste"
    """How the autoscaler picks a pool to grow: `least-waste` (default), `priority`, `most-pods`, `random` or
    `price`."""
    scale_down_unneeded_time: Annotated[str, StringConstraints(pattern=r"^\d+[smh]$")] = "10m"
    """How long a node must be unneeded before it is removed, as `<n>s`, `<n>m` or `<n>h`. Default `10m`."""
    scale_down_utilization_threshold: float = Field(0.5, gt=0, le=1)
    """A CPU node whose requested CPU and memory are below this fraction (0-1] of its capacity may be removed.
    Default 0.5. GPU nodes are judged on their GPU requests alone, against cluster-autoscaler's GPU threshold (its
    default 0.5); a pool a serving workload runs on sets its own, so a node one replica short of full can go."""
    scale_down_delay_after_add: Annotated[str, StringConstraints(pattern=r"^\d+[smh]$")] = "10m"
    """Wait after a scale-up before any scale-down is considered, as `<n>s`, `<n>m` or `<n>h`. Default `10m`."""


class Kueue(Model):
    enabled: Literal["auto", "on", "off"] = "auto"
    """`auto` (default): deployed when the stack has a GPU pool (gang scheduling is a Kubernetes AI Conformance
    MUST, docs/conformance.md) or `workloads.queues` or `workloads.training` is set; `on` or `off` force it
    (docs/training.md#queues-and-quotas)."""


class NodeTerminationHandler(Model):
    enabled: Literal["auto", "on", "off"] = "auto"
    """`auto` (default): deployed when the stack has an `aws` pool, since every Auto Scaling group terminates
    instances (scale-in, instance refresh, spot, a Capacity Block's end) and each pool drains through it; `off`
    leaves terminations undrained."""
    drain_timeout_seconds: int = Field(600, ge=60, le=7080)
    """Seconds the handler gives a node's pods to leave before it gives up (its `nodeTerminationGracePeriod`, the
    drain timeout), 60-7080; each pool's terminate lifecycle hook holds the instance this long plus two minutes (a
    hook waits at most 7200 s). Default 600."""


class NodeHealth(Model):
    """The health loop: gates new GPU nodes behind a quick check and re-checks idle ones (docs/operations.md)."""

    enabled: bool = True
    """Run the loop, and register GPU pools whose `healthGate` is on with the startup taint. Default `true`."""
    idle_check_minutes: int | None = Field(360, ge=30, le=10080)
    """Check a passed GPU node again after this many minutes (30-10080) with no GPU pod and no check; `null` turns
    idle checks off. Default 360."""
    max_concurrent_checks: int = Field(16, ge=1, le=100)
    """Check pods running at once, 1-100: each uses only its own node, so a scale-up is gated at once; the cost is
    one DCGM image pull per node and a few API calls per check. Default 16."""
    check_timeout_seconds: int = Field(1200, ge=120, le=7200)
    """Seconds a started check may run before the node fails as hung, 120-7200. Default 1200."""
    schedule_timeout_seconds: int = Field(600, ge=60, le=3600)
    """Seconds a check pod may wait to be scheduled, 60-3600: a gate check then fails the node (its devices never
    registered), an idle check is cancelled (GPU work took the node). Default 600."""


class Alerts(Model):
    gpu_temperature_celsius: float = Field(85, gt=0)
    """Alert when a GPU's temperature is above this many degrees Celsius (5 minutes on the CloudWatch path). Default
    85."""
    idle_utilization_percent: float = Field(30, gt=0, lt=100)
    """Idle-spend alert: average GPU utilization below this percentage (0-100 exclusive) for `idleMinutes`. Default
    30."""
    idle_minutes: int = Field(30, ge=5)
    """Minutes of low utilization before the idle-spend alert fires, at least 5. Default 30."""
    sns_topic_arn: str | None = None
    """SNS topic to deliver alerts to (created when `email` is set and this is not)."""
    email: str | None = None
    """Email address subscribed to the alerts topic (confirm the email AWS sends): a KMS-encrypted SNS topic the
    stack creates, or the one `snsTopicArn` names. Optional."""


class Monitoring(Model):
    container_insights: bool = True
    """Install the `amazon-cloudwatch-observability` EKS add-on (Container Insights with GPU metrics), the
    CloudWatch GPU alarms and a CloudWatch dashboard. Default `true`."""
    dcgm_prometheus: bool = False
    """Install kube-prometheus-stack and NVIDIA's dcgm-exporter with Prometheus rules for XID, ECC, temperature and
    idle spend, and Grafana dashboards for GPUs, nodes, EFA and the stack's file systems; required by serving
    workloads, whose autoscaling reads the exporter's GPU utilization there. Default `false`."""
    alerts: Alerts = Field(default_factory=Alerts)
    """Alert thresholds and where alerts are delivered."""


class AddonVersions(Model):
    """Per-stack overrides of the EKS managed add-on versions the catalog pins (`v1.20.4-eksbuild.1`)."""

    pins: dict[str, Annotated[str, StringConstraints(pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")]] = Field(
        default_factory=dict
    )
    """`{add-on name: version}` for EKS managed add-ons, each an exact `vX.Y.Z-eksbuild.N` at or above the catalog's
    minimum (`vpc-cni` must accept efa-only interfaces). Unpinned add-ons get the exact version
    components/catalog/versions.yaml records for the cluster's Kubernetes version; EKS is never asked for its
    default, so a new AWS build changes nothing until this or the catalog changes (docs/operations.md, "Upgrading
    managed add-ons")."""


class AddonsConfig(Model):
    nvidia_device_plugin: NvidiaDevicePlugin = Field(default_factory=NvidiaDevicePlugin)
    """The NVIDIA device plugin (advertises `nvidia.com/gpu`)."""
    efa_device_plugin: EfaDevicePlugin = Field(default_factory=EfaDevicePlugin)
    """The EFA device plugin (advertises `vpc.amazonaws.com/efa`)."""
    cluster_autoscaler: ClusterAutoscaler = Field(default_factory=ClusterAutoscaler)
    """cluster-autoscaler, with scale-from-zero for GPU pools."""
    node_termination_handler: NodeTerminationHandler = Field(default_factory=NodeTerminationHandler)
    """AWS Node Termination Handler in queue mode, draining spot nodes before EC2 reclaims them."""
    kueue: Kueue = Field(default_factory=Kueue)
    """Kueue: job queues, quotas, all-or-nothing admission and topology-aware placement of training jobs."""
    monitoring: Monitoring = Field(default_factory=Monitoring)
    """Container Insights, DCGM/Prometheus and GPU alerts."""
    node_health: NodeHealth = Field(default_factory=NodeHealth)
    """The health loop: a check before a new GPU node takes work, checks of idle GPU nodes."""
    managed: AddonVersions = Field(default_factory=AddonVersions)
    """Version pins of the EKS managed add-ons."""


# -------------------------------------------------------------------------------------------------------- workloads
#: A Kubernetes object name that is also a DNS label (RFC 1123): Deployments, Services and PodDisruptionBudgets.
WorkloadName = Annotated[str, StringConstraints(pattern=r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")]


class ServingReplicas(Model):
    """Bounds of a serving workload's replica count."""

    min: int = Field(1, ge=1)
    """Fewest replicas, at least 1 (the service never goes dark). Default 1."""
    max: int | None = Field(None, ge=1)
    """Most replicas; default as many as the pool's nodes hold (its `max` or `nodes` times replicas per node)."""


class ServingApiKey(Model):
    """Where the server's API key lives: a Kubernetes Secret in the serving namespace, created outside the stack (the
    key never enters the stack's config or state)."""

    secret_name: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]
    """Name of the Secret, in the NFS claim's namespace. Required."""
    key: Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]{1,253}$")] = "api-key"
    """Key in the Secret's data that holds the API key. Default `api-key`."""


class ServingAllowFrom(Model):
    """Who may reach the server's port besides its own namespace and Prometheus (the serving NetworkPolicy)."""

    namespaces: list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]] = Field(
        default_factory=list
    )
    """Namespaces whose pods may call the server. Default none."""
    cidrs: list[str] = Field(default_factory=list)
    """IPv4 networks (CIDR) that may call the server, e.g. a site's client subnet routed to the pod network; at
    most /8 wide, never `0.0.0.0/0`. Default none."""


class ServingGateway(Model):
    """How the inference Gateway routes to the workload (docs/inference-routing.md): the workloads that serve one
    model name (`servedModelName`) are versions of it, behind one HTTPRoute that splits the model's requests between
    them by weight."""

    expose: bool = True
    """Whether the Gateway routes to the workload. Default true: the stack gets Envoy Gateway when any workload is
    exposed."""
    weight: int = Field(1, ge=0, le=1_000_000)
    """The workload's share of its model's requests, relative to the other exposed versions of the model (Gateway
    API `backendRefs[].weight`, 0-1000000; 0 sends it none). Default 1: an even split."""


class InferenceGatewayConfig(Model):
    """The inference Gateway: who may call it, besides the serving namespace (docs/inference-routing.md)."""

    allow_from: ServingAllowFrom = Field(default_factory=ServingAllowFrom)
    """Namespaces and IPv4 networks whose clients the Gateway's Envoy pods admit. Default none."""


class ServingWorkload(Model):
    """An OpenAI-compatible inference server (vLLM) on an inference pool, reading its weights from the NFS claim,
    behind a ClusterIP Service, with a PodDisruptionBudget and an autoscaler (`autoscaling.rule`)."""

    name: WorkloadName
    """Name of the Deployment, Service, PodDisruptionBudget and ScaledObject: a DNS label of at most 40 characters.
    Required."""
    pool: str
    """The inference GPU pool the replicas run on. Required."""
    model: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")]
    """Directory of the model's weights inside the NFS claim (`storage.nfs`), e.g. `Qwen2.5-7B-Instruct`; mounted
    read-only and served from `/models/<model>`, never downloaded. Required."""
    served_model_name: str | None = None
    """Model name clients send in requests; default the last part of `model`."""
    image: str | None = None
    """Container image; default the vLLM OpenAI-compatible server image pinned by tag and digest in the catalog
    (`components/catalog/images.yaml`). Any image whose entrypoint takes vLLM's `serve` arguments; a
    `vllm/vllm-openai` tag inside a published advisory's range is refused."""
    gpus_per_replica: int = Field(1, ge=1, le=16)
    """Whole GPUs each replica requests (vLLM's tensor parallel size), 1-16; must divide the pool's GPUs per node.
    Default 1."""
    replicas: ServingReplicas = Field(default_factory=ServingReplicas)
    """Replica bounds the autoscaler keeps to."""
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    """Share of each GPU's memory a replica takes (vLLM's `--gpu-memory-utilization`, which defaults to 0.9 of the
    whole GPU), above 0 and at most 1. Default vLLM's. Set it when replicas share GPUs through time-slicing: the
    replicas that can land on one GPU must fit together (docs/gpu-sharing.md#serving-on-shared-gpus)."""
    extra_args: list[str] = Field(default_factory=list)
    """Further vLLM server arguments, e.g. `[--max-model-len, "8192"]`. Default none. Arguments that run code from
    the model or open unsafe inputs (`--trust-remote-code`, `--enable-prompt-embeds`, `--allowed-local-media-path`,
    and the others in docs/security.md) are refused unless listed in `acceptUnsafeArgs`; `--api-key` is refused
    (use `apiKey`)."""
    accept_unsafe_args: list[str] = Field(default_factory=list)
    """Security-sensitive `extraArgs` flags this workload accepts, each written as in `extraArgs` (e.g.
    `[--trust-remote-code]`). Default none."""
    api_key: ServingApiKey | None = None
    """The API key clients send (`Authorization: Bearer <key>`), read from a Kubernetes Secret into
    `VLLM_API_KEY`. Default none: any client the NetworkPolicy admits is served."""
    allow_from: ServingAllowFrom = Field(default_factory=ServingAllowFrom)
    """Sources the serving NetworkPolicy admits to the server's port, besides the serving namespace itself and
    Prometheus in the monitoring namespace. Default none."""
    gateway: ServingGateway = Field(default_factory=ServingGateway)
    """Whether and with what weight the inference Gateway routes to the workload."""
    startup_seconds: int = Field(1200, ge=60, le=7200)
    """Seconds a replica may take to load its model before Kubernetes restarts it (the startup probe's budget),
    60-7200. Default 1200."""
    drain_seconds: int = Field(15, ge=1, le=300)
    """Seconds a stopping replica keeps serving after it leaves the Service's endpoints (its preStop pause), so
    clients stop sending before the server stops accepting, 1-300. Default 15."""
    termination_grace_seconds: int = Field(180, ge=30, le=600)
    """Seconds a stopping replica has, pause included, to finish its in-flight requests before it is killed
    (`terminationGracePeriodSeconds`), 30-600: cluster-autoscaler grants a drained pod at most 600 s (its
    `--max-graceful-termination-sec` default), and the node termination handler its `drainTimeoutSeconds`. Default
    180."""
    autoscaling: ServingAutoscaling | None = None
    """The replicas' scaling rule on a pool that is not in `gpu-utilization` mode (hybrid pools, `cluster-autoscaler`
    or `fixed` pools, whose nodes then stay as they are): default `rule: queue` on vLLM's requests in flight. On a
    `gpu-utilization` pool the pool's `scaling.gpuUtilization` is the rule and this is not set."""

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model.rsplit("/", 1)[-1]


class NamespaceQuota(Model):
    """The GPU ResourceQuota of one workload namespace (docs/security.md#pod-security-and-networkpolicy)."""

    gpus: int | None = Field(None, ge=0)
    """`nvidia.com/gpu` the namespace's pods may request at once. Default: every GPU its pools hold at their
    maximum size (the pools that mount its claims and run its serving workloads)."""
    efa_devices: int | None = Field(None, ge=0)
    """`vpc.amazonaws.com/efa` devices its pods may request at once. Default: every EFA device its pools hold at
    their maximum size (no EFA quota when none of them wires EFA)."""


#: A Kubernetes namespace name: a DNS-1123 label, 1-63 lowercase letters, digits and `-`, starting and ending
#: alphanumeric (Kubernetes, "Namespaces": names follow RFC 1123 labels).
NamespaceName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]


class TeamNamespace(Model):
    """A namespace of its own for a team sharing the cluster (docs/security.md#tenants): created at Pod Security
    `restricted`, behind the default-deny NetworkPolicy, with a GPU ResourceQuota; `cluster.admins[].namespaces` and
    `workloads.quotas` may name it."""

    name: NamespaceName
    """The namespace: a DNS-1123 label (1-63 lowercase letters, digits and `-`), not a file system's claim
    namespace (that is a workload namespace already), not Kubernetes' or an add-on's own. Required."""
    pools: list[str] | None = Field(None, min_length=1)
    """GPU pools whose GPUs the namespace's default quota counts (and a configured quota may reach): every GPU the
    named pools hold at their maximum size. Left out: every GPU pool of the stack. The quota caps what the team's
    pods request; it does not pin them to these pools (tolerations and node selectors do)."""


#: A Kueue object name (ClusterQueue, cohort): a DNS-1123 label, so it can also name a label value.
QueueName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
#: A duration as Kueue's configuration reads it (Go `time.Duration`): `<n>s`, `<n>m` or `<n>h`.
QueueDuration = Annotated[str, StringConstraints(pattern=r"^[1-9]\d*[smh]$")]


class PoolQuota(Model):
    """A ClusterQueue's quota on one GPU pool (its ResourceFlavor), in devices (docs/training.md#queues-and-quotas)."""

    gpus: int | None = Field(None, ge=0)
    """`nvidia.com/gpu` the ClusterQueue may use on the pool at once. Default: every GPU the pool holds at
    `scaling.max` (or `nodes` for hybrid pools)."""
    efa_devices: int | None = Field(None, ge=0)
    """`vpc.amazonaws.com/efa` devices on the pool. Default: every EFA device the pool wires at its maximum size (0
    on a pool without EFA)."""
    borrowing_limit_gpus: int | None = Field(None, ge=0)
    """GPUs above `gpus` the ClusterQueue may borrow from its cohort on this pool. Default: no limit (only with a
    `cohort`)."""
    lending_limit_gpus: int | None = Field(None, ge=0)
    """GPUs of `gpus` the ClusterQueue lends its cohort on this pool, at most `gpus`. Default: all of them (only with
    a `cohort`)."""


class QueuePreemption(Model):
    """Kueue's preemption policy of one ClusterQueue (Kueue ClusterQueue `spec.preemption`)."""

    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "LowerPriority"
    """Whether a pending job may evict jobs of its own ClusterQueue: `LowerPriority` (default), `Never` or
    `LowerOrNewerEqualPriority`."""
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Any"
    """Whether a pending job may evict jobs of other ClusterQueues of the cohort that borrowed its quota: `Any`
    (default: lent quota always comes back), `LowerPriority` or `Never`."""
    borrow_within_cohort: Literal["Never", "LowerPriority"] = "Never"
    """Whether a job that needs to borrow may evict lower-priority jobs of the cohort: `Never` (default) or
    `LowerPriority`."""


class ClusterQueueConfig(Model):
    """One Kueue ClusterQueue: which workload namespaces submit to it, which GPU pools it admits jobs onto, and its
    quota on each (docs/training.md#queues-and-quotas)."""

    name: QueueName
    """The ClusterQueue's name (a DNS-1123 label). Required."""
    namespaces: list[NamespaceName] | None = Field(None, min_length=1)
    """Workload namespaces whose LocalQueue points here. Left out: every workload namespace no other ClusterQueue
    names (at most one ClusterQueue may leave it out)."""
    pools: list[str] | None = Field(None, min_length=1)
    """GPU pools the ClusterQueue admits jobs onto, one ResourceFlavor each, tried in this order. Left out: every GPU
    pool of the stack, in config order."""
    quotas: dict[str, PoolQuota] = Field(default_factory=dict)
    """Quota by pool name (one of `pools`). A pool not named here: all it holds at its maximum size. The quotas of
    one pool over every ClusterQueue may not exceed what it holds."""
    cohort: QueueName | None = None
    """The cohort whose ClusterQueues borrow each other's unused quota. Default none."""
    preemption: QueuePreemption = Field(default_factory=QueuePreemption)
    """When a pending job may evict running ones."""


class GangAdmission(Model):
    """All-or-nothing start of a job (Kueue's waitForPodsReady) and, on pools cluster-autoscaler scales, capacity
    requested for the whole job before it is admitted (docs/training.md#all-or-nothing-admission)."""

    timeout: QueueDuration = "10m"
    """How long an admitted job's pods have to all be ready before Kueue evicts and requeues it. Default `10m`
    (Kueue's own default is `30m`)."""
    recovery_timeout: QueueDuration | None = None
    """How long a running job may stay with a pod not ready (a node lost, a pod being replaced) before Kueue evicts
    and requeues it. Default: `timeout`."""
    backoff_limit_count: int | None = Field(None, ge=0)
    """Requeues after a timeout before Kueue deactivates the job. Default none: requeued without end."""
    backoff_base_seconds: int = Field(60, ge=1)
    """First requeue delay, doubling each time (Kueue's default 60)."""
    backoff_max_seconds: int = Field(3600, ge=1)
    """Longest requeue delay (Kueue's default 3600)."""
    provisioning: Literal["auto", "off"] = "auto"
    """`auto` (default): a job whose flavor is a pool cluster-autoscaler scales is admitted only after
    cluster-autoscaler has scaled the pool up for all of its pods (a ProvisioningRequest); `off`: Kueue admits on
    quota alone."""


class QueuesConfig(Model):
    """Kueue's queues: ClusterQueues over the GPU pools and a LocalQueue in every workload namespace
    (docs/training.md#queues-and-quotas)."""

    cluster_queues: list[ClusterQueueConfig] = Field(default_factory=list)
    """ClusterQueues, one per team or one shared. Default: one ClusterQueue `shared` over every GPU pool and every
    workload namespace."""
    admission: GangAdmission = Field(default_factory=GangAdmission)
    """All-or-nothing admission: the pods-ready timeout, requeueing and capacity requests."""


class TrainingModel(Model):
    """The reference job's model: an MLP of `layers` hidden linear layers of `hiddenSize` features, trained on
    synthetic data. Its size sets the checkpoint's size (docs/training.md#the-reference-job)."""

    layers: int = Field(8, ge=1, le=256)
    """Linear layers, 1-256. Default 8."""
    hidden_size: int = Field(4096, ge=64, le=65536)
    """Features of each layer, 64-65536. Default 4096 (8 layers: 118 M parameters, a 1.41 GB checkpoint)."""


class TrainingWorkload(Model):
    """The reference multi-node training job (docs/training.md#the-reference-job): torchrun workers, one per node of
    a GPU pool, each taking every GPU and EFA device of its node, NCCL over EFA, checkpoints on the Lustre claim,
    restarted whole from its last checkpoint on a failure. The stack creates the script's ConfigMap only; `blueprint
    training-job` prints the JobSet for you to submit."""

    name: WorkloadName = "reference"
    """Name of the JobSet and its ConfigMap: a DNS label of at most 40 characters. Default `reference`."""
    namespace: NamespaceName | None = None
    """Workload namespace the job runs in; it must be the Lustre claim's namespace (`storage.lustre.kubernetes`).
    Default that namespace."""
    pool: str
    """The GPU pool the workers run on. Required."""
    nodes: int = Field(2, ge=1, le=1024)
    """Workers, one per node, at most the pool's `scaling.max`. Default 2."""
    image: str | None = None
    """Container image with PyTorch, NCCL, EFA's libfabric and the aws-ofi-nccl plugin. Default the AWS Deep
    Learning Container pinned in the catalog (`components/catalog/images.yaml`, `pytorch-training`)."""
    steps: int = Field(1000, ge=1, le=10_000_000)
    """Training steps in all. Default 1000."""
    checkpoint_interval: int = Field(100, ge=1, le=10_000_000)
    """Steps between checkpoints, at most `steps`. Default 100."""
    model: TrainingModel = Field(default_factory=TrainingModel)
    """Size of the model trained, which sets the checkpoint's size."""
    max_restarts: int = Field(3, ge=0, le=1000)
    """Restarts of the whole job a failure of the job itself (a bug, a crash) may use, 0-1000; restarts after a node
    failure (eviction, node loss, spot interruption, drain) do not count (docs/training.md#failures-and-restarts).
    Default 3."""


class WorkloadsConfig(Model):
    serving: list[ServingWorkload] = Field(default_factory=list)
    """Inference servers the stack deploys, each with its autoscaler. Default none."""
    namespaces: list[TeamNamespace] = Field(default_factory=list)
    """Team namespaces besides the file systems' claim namespaces, each a workload namespace like them
    (docs/security.md#tenants). Default none."""
    quotas: dict[str, NamespaceQuota] = Field(default_factory=dict)
    """GPU ResourceQuotas by workload namespace (a claim namespace of `storage` or a team namespace under
    `namespaces`). Every workload namespace gets one; a namespace not named here gets the default, everything its
    pools hold. Default none named."""
    queues: QueuesConfig | None = None
    """Kueue's queues and gang admission. Left out: the defaults when Kueue is on (`addons.kueue`), which it is by
    default on a stack with a GPU pool."""
    training: TrainingWorkload | None = None
    """The reference multi-node training job, rendered for you to submit (`blueprint training-job`). Default none."""
    gateway: InferenceGatewayConfig = Field(default_factory=InferenceGatewayConfig)
    """The inference Gateway in front of the exposed serving workloads (docs/inference-routing.md)."""


# ------------------------------------------------------------------------------------------------------------ stack
class StackConfig(Model):
    """A whole stack, validated. Built by `components.validation.validate`, never directly from raw config."""

    region: str
    """AWS region of the stack, read from the stack's `aws:region` (not a `gpu-clusters:` key)."""
    cluster: ClusterConfig
    """The EKS cluster (`gpu-clusters:cluster`). Required."""
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    """The VPC, new or existing (`gpu-clusters:network`)."""
    node_pools: list[NodePool] = Field(default_factory=list)
    """Node pools, cloud (`kind: aws`) and on-prem (`kind: hybrid`) (`gpu-clusters:nodePools`). A stack without a
    `system` pool gets two `m7i.xlarge` nodes."""
    storage: StorageConfig = Field(default_factory=StorageConfig)
    """Shared file systems (`gpu-clusters:storage`)."""
    addons: AddonsConfig = Field(default_factory=AddonsConfig)
    """In-cluster add-ons and EKS managed add-on pins (`gpu-clusters:addons`)."""
    workloads: WorkloadsConfig = Field(default_factory=WorkloadsConfig)
    """Example workloads deployed with the stack: inference servers and their autoscalers
    (`gpu-clusters:workloads`)."""

    def pool(self, name: str) -> NodePool:
        return next(p for p in self.node_pools if p.name == name)

    @property
    def aws_pools(self) -> list[NodePool]:
        return [p for p in self.node_pools if p.kind == "aws"]

    @property
    def hybrid_pools(self) -> list[NodePool]:
        return [p for p in self.node_pools if p.kind == "hybrid"]
