"""Rules on the region and the `cluster` section: Kubernetes version, API endpoint, service CIDR, tags, admins."""

from __future__ import annotations

import re
from collections.abc import Iterator
from ipaddress import IPv4Network

from components import tags
from components.catalog import regions, versions
from components.cluster import admin_resource_name
from components.errors import Problem
from components.planning.tenants import workload_namespace_names
from components.validation.parse import Parsed, did_you_mean, shown, shown_text

#: EKS accepts a service CIDR inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, between /24 and /12, not
#: overlapping the VPC (EKS API reference, KubernetesNetworkConfigRequest.serviceIpv4Cidr).
RFC1918 = tuple(IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
SERVICE_PREFIX_RANGE = (12, 24)
#: Tag keys and values: letters, digits, spaces and `_ . : / = + - @` (AWS Tagging guide, "Tag naming limits").
TAG_CHARACTERS = re.compile(r"^[\w .:/=+\-@]*$")
#: Tag key prefixes the stack writes itself: its own, the node termination handler's, and the ones EKS and
#: cluster-autoscaler discover resources by (`kubernetes.io/cluster/<name>`, `k8s.io/cluster-autoscaler/...`).
PROJECT_TAG_PREFIXES = (f"{tags.PREFIX}/", tags.NTH_MANAGED, "kubernetes.io/", "k8s.io/")
#: The most tags the stack itself puts on one resource: a pool's instances carry the cluster and stack identity, the
#: pool, role, capacity type, GPU model, taints, EFA device count and GPU allocation (components.node_pool.pool_tags),
#: a `Name`, the node identity tag `kubernetes.io/cluster/<name>` and the termination handler's marker (every pool).
OWN_TAG_COUNT = (
    len(tags.cluster_tags("", "", {}))
    + len(tags.with_tags({}, pool="", role="", capacity_type="", gpu_model="", taints=""))
    + len((tags.EFA_DEVICES, tags.GPU_ALLOCATION, "Name", tags.KUBERNETES_CLUSTER_PREFIX, tags.NTH_MANAGED))
)


def region_is_real(p: Parsed) -> Iterator[Problem]:
    """`aws:region` names a real AWS region (components/catalog/regions.yaml, from the AWS provider's region list)."""
    known = regions.regions()
    if p.region not in known:
        yield Problem(
            "aws:region",
            f"{shown(p.region)} is not an AWS region name{did_you_mean(p.region, known)}, e.g. us-east-1 "
            "(the regions: components/catalog/regions.yaml)",
        )


def kubernetes_version_is_supported(p: Parsed) -> Iterator[Problem]:
    """`cluster.kubernetesVersion` is one EKS supports today (EKS Kubernetes version calendar, versions.yaml)."""
    if p.cluster is None:
        return
    supported = versions.supported_kubernetes_versions()
    if p.cluster.kubernetes_version not in supported:
        yield Problem(
            "cluster.kubernetesVersion",
            f"{shown_text(p.cluster.kubernetes_version)} is not a Kubernetes version EKS supports; supported: "
            f"{', '.join(supported)} (EKS Kubernetes version calendar, see components/catalog/versions.yaml)",
        )


def endpoint_is_reachable_and_fenced(p: Parsed) -> Iterator[Problem]:
    """The API endpoint is private, public with an allow-list (never 0.0.0.0/0), or both; never neither."""
    if p.cluster is None:
        return
    e = p.cluster.endpoint
    if p.damaged_at("cluster.endpoint"):
        return  # a switch or CIDR that did not parse would be judged by its default
    if not e.private and not e.public:
        yield Problem("cluster.endpoint", "private and public access are both off; nothing could reach the API")
    if e.public and not e.public_access_cidrs:
        yield Problem(
            "cluster.endpoint.publicAccessCidrs",
            "a public endpoint needs an allow-list of CIDRs (e.g. your office or VPN egress, 203.0.113.0/24); "
            "or set endpoint.public: false",
        )
    for i, cidr in enumerate(e.public_access_cidrs):
        if cidr.prefixlen == 0:
            yield Problem(f"cluster.endpoint.publicAccessCidrs[{i}]", "0.0.0.0/0 is no allow-list; name the CIDRs")
    if not e.public and e.public_access_cidrs:
        yield Problem("cluster.endpoint.publicAccessCidrs", "only used with endpoint.public: true; remove it")


def deployer_reaches_the_api(p: Parsed) -> Iterator[Problem]:
    """The machine running `pulumi up` can reach the API it creates Kubernetes objects through: a private-only
    endpoint admits someone on TCP 443 (`privateAccessCidrs`, `privateAccessSecurityGroupIds`) or the stack runs from
    inside its VPC (`deployFromVpc`, which needs `existingVpc`: a VPC the stack creates holds no runner yet). The
    cluster security group admits only itself by default (https://docs.aws.amazon.com/eks/latest/userguide/
    sec-group-reqs.html), so each way in needs such a rule (EKS user guide, "Accessing a private only API server",
    https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html)."""
    if p.cluster is None:
        return
    e = p.cluster.endpoint
    admitted = e.private_access_cidrs or e.private_access_security_group_ids or e.deploy_from_vpc
    # A damaged cluster section may have lost the very key that admits the deployer (`endpiont:`, a typo inside).
    if e.private and not e.public and not admitted and "cluster" not in p.damaged:
        yield Problem(
            "cluster.endpoint",
            "a private-only API is unreachable from the machine running `pulumi up`: add privateAccessCidrs (a VPN, "
            "Direct Connect or bastion network) or privateAccessSecurityGroupIds (a bastion's or runner's group), "
            "set deployFromVpc: true (a runner inside network.existingVpc), or use public: true with "
            "publicAccessCidrs",
        )
    if admitted and not e.private:
        yield Problem("cluster.endpoint", "private access rules only apply to the private endpoint; set private: true")
    for i, cidr in enumerate(e.private_access_cidrs):
        if cidr.prefixlen == 0:
            yield Problem(f"cluster.endpoint.privateAccessCidrs[{i}]", "0.0.0.0/0 is no allow-list; name the CIDRs")
    if e.deploy_from_vpc and p.network is not None and p.network.existing_vpc is None:
        yield Problem(
            "cluster.endpoint.deployFromVpc",
            "the stack creates its VPC, so no runner is inside it when `pulumi up` first reaches the API; use "
            "network.existingVpc with your runner's VPC, privateAccessCidrs, or public: true with publicAccessCidrs",
        )


def service_cidr_is_private_and_apart(p: Parsed) -> Iterator[Problem]:
    """`cluster.serviceCidr` lies in RFC 1918 space, /12 to /24, and does not overlap the VPC (EKS API reference,
    KubernetesNetworkConfigRequest.serviceIpv4Cidr)."""
    if p.cluster is None:
        return
    svc = p.cluster.service_cidr
    low, high = SERVICE_PREFIX_RANGE
    if not any(svc.subnet_of(block) for block in RFC1918) or not low <= svc.prefixlen <= high:
        yield Problem(
            "cluster.serviceCidr",
            f"{svc} must lie in 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 and be /{low} to /{high} "
            "(EKS serviceIpv4Cidr)",
        )
    if p.network and p.network.existing_vpc is None and svc.overlaps(p.network.vpc_cidr):
        yield Problem("cluster.serviceCidr", f"{svc} overlaps the VPC CIDR {p.network.vpc_cidr}; EKS refuses that")


def tags_fit_aws_limits(p: Parsed) -> Iterator[Problem]:
    """`cluster.tags` fit AWS's limits with the stack's own tags: at most 50 tags per resource, keys 1-128 and values
    up to 256 characters of letters, digits, spaces and `_ . : / = + - @`, no `aws:` prefix (AWS Tagging guide)."""
    if p.cluster is None:
        return
    user = p.cluster.tags
    if len(user) + OWN_TAG_COUNT > tags.MAX_TAGS:
        yield Problem(
            "cluster.tags",
            f"{len(user)} tags plus the stack's {OWN_TAG_COUNT} exceed AWS's {tags.MAX_TAGS} tags per resource",
        )
    for key, value in user.items():
        where = f"cluster.tags.{shown_text(key)}"
        if key.lower().startswith("aws:"):
            yield Problem(where, "the `aws:` prefix is reserved by AWS; choose another key")
        if not 1 <= len(key) <= tags.MAX_KEY_LENGTH or not TAG_CHARACTERS.match(key):
            yield Problem(where, f"a tag key is 1-{tags.MAX_KEY_LENGTH} letters, digits, spaces and _.:/=+-@")
        if len(value) > tags.MAX_VALUE_LENGTH or not TAG_CHARACTERS.match(value):
            yield Problem(where, f"a tag value is up to {tags.MAX_VALUE_LENGTH} letters, digits, spaces and _.:/=+-@")


def tags_leave_the_project_tags_alone(p: Parsed) -> Iterator[Problem]:
    """User tags cannot set the keys the stack writes itself (`gpu-clusters/...`, the node termination handler's,
    `kubernetes.io/...`, `k8s.io/...`): cluster-autoscaler, the termination handler and the policy pack read them."""
    if p.cluster is None:
        return
    for key in p.cluster.tags:
        if key.startswith(PROJECT_TAG_PREFIXES):
            yield Problem(
                f"cluster.tags.{shown_text(key)}",
                "the stack sets this tag itself (discovery and policies rely on it); choose another key",
            )


def admins_are_distinct(p: Parsed) -> Iterator[Problem]:
    """Each admin is one access entry, named after the principal's kind and last path segment: EKS refuses a second
    entry for a principal (ResourceInUseException), and two entries with one name would collide in the stack."""
    if p.cluster is None:
        return
    seen: dict[str, int] = {}
    for i, admin in enumerate(p.cluster.admins):
        name = admin_resource_name(p.cluster.name, admin.principal_arn)
        if name in seen:
            first = p.cluster.admins[seen[name]].principal_arn
            what = "is listed twice" if first == admin.principal_arn else f"shares its entry name with {first}"
            yield Problem(
                f"cluster.admins[{i}].principalArn",
                f"{admin.principal_arn} {what} (admins[{seen[name]}]); give each principal one entry, or use a role "
                "with another name",
            )
        else:
            seen[name] = i


def admin_namespaces_are_the_stacks(p: Parsed) -> Iterator[Problem]:
    """A namespace-scoped admin names workload namespaces the stack creates (its claim and team namespaces), and
    cluster admin stays cluster-wide: `AmazonEKSClusterAdminPolicy` in a namespace would read as narrower than it is."""
    if p.cluster is None:
        return
    known = (
        workload_namespace_names(p.storage, p.workloads)
        if p.storage is not None and p.workloads is not None and not {"storage", "workloads"} & p.damaged
        else None
    )
    for i, admin in enumerate(p.cluster.admins):
        if not admin.namespaces:
            continue
        if admin.policy == "AmazonEKSClusterAdminPolicy":
            yield Problem(
                f"cluster.admins[{i}].namespaces",
                "AmazonEKSClusterAdminPolicy is cluster-wide: leave out namespaces for a cluster admin, or give a "
                "team AmazonEKSAdminPolicy, AmazonEKSEditPolicy or AmazonEKSViewPolicy in its namespaces",
            )
        if known is None:
            continue
        for j, namespace in enumerate(admin.namespaces):
            if namespace not in known:
                yield Problem(
                    f"cluster.admins[{i}].namespaces[{j}]",
                    f"{shown_text(namespace)} is not a namespace of this stack{did_you_mean(namespace, known)}; "
                    "its workload namespaces (storage.*.kubernetes.namespace and workloads.namespaces): "
                    f"{', '.join(known) or 'none'}",
                )


RULES = (
    region_is_real,
    kubernetes_version_is_supported,
    endpoint_is_reachable_and_fenced,
    deployer_reaches_the_api,
    admins_are_distinct,
    admin_namespaces_are_the_stacks,
    service_cidr_is_private_and_apart,
    tags_fit_aws_limits,
    tags_leave_the_project_tags_alone,
)
