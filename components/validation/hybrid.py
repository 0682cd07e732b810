"""Rules on `kind: hybrid` node pools: on-prem servers joined as EKS Hybrid Nodes."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Network

from components import catalog
from components.config import SSM_REGISTRATION_LIMIT_MAX, NodePool
from components.errors import Problem
from components.planning.hybrid import cilium_node_blocks
from components.validation.cluster import RFC1918
from components.validation.parse import Parsed, shown_text

#: EKS remote node and pod networks are RFC 1918 IPv4 CIDRs of /8 to /32 (EKS API, RemoteNodeNetwork).
REMOTE_PREFIX_RANGE = (8, 32)
#: Keys only aws pools read (EC2 instances in Auto Scaling groups).
AWS_ONLY_KEYS = {
    "scaling": "scaling",
    "capacity": "capacity",
    "placement": "placement",
    "efa": "efa",
    "efa_layout": "efaLayout",
    "instance_refresh": "instanceRefresh",
    "local_storage": "localStorage",
    "root_volume_gib": "rootVolumeGib",
    "ami_family": "amiFamily",
    "imds_hop_limit": "imdsHopLimit",
    "imds_hop_limit_reason": "imdsHopLimitReason",
    "management": "management",
}


def hybrid_pools_describe_their_servers(p: Parsed) -> Iterator[Problem]:
    """A hybrid pool gives the servers' GPU model (from the catalog), GPUs per server and server count, not an
    instance type."""
    for path, pool in p.hybrid_pools():
        if pool.instance_type:
            yield Problem(
                f"{path}.instanceType",
                "hybrid pools are your own servers: give gpuModel (e.g. A40) and gpusPerNode, not an instance type",
            )
        if not pool.gpu_model:
            if not p.damaged_at(f"{path}.gpuModel"):
                models = ", ".join(sorted(catalog.gpu_models()))
                yield Problem(f"{path}.gpuModel", f"give the servers' GPU model: {models}")
        elif pool.gpu_model not in catalog.gpu_models():
            try:
                catalog.gpu_model(pool.gpu_model)
            except KeyError as error:
                yield Problem(f"{path}.gpuModel", shown_text(str(error.args[0]), 300))
        if pool.gpu_model and pool.gpus_per_node is None and not p.damaged_at(f"{path}.gpusPerNode"):
            yield Problem(f"{path}.gpusPerNode", "how many GPUs each server has (e.g. 4)")
        if pool.nodes is None and not p.damaged_at(f"{path}.nodes"):
            yield Problem(f"{path}.nodes", "how many servers join (e.g. 2)")


def aws_keys_not_on_hybrid_pools(p: Parsed) -> Iterator[Problem]:
    """Scaling, capacity, placement, EFA, instance refresh, disks, AMI and IMDS settings shape EC2 instances; on
    hybrid pools (on-prem servers) nothing reads them."""
    for path, pool in p.hybrid_pools():
        for field, key in AWS_ONLY_KEYS.items():
            if field in pool.model_fields_set:
                yield Problem(f"{path}.{key}", "does not apply to hybrid pools (on-prem servers); remove it")


def _activation_limit_problems(pool: NodePool, where: str) -> Iterator[Problem]:
    """`activationLimit` replaces `nodes` + `spareRegistrations`, so both given is a conflict, never a silent
    choice; the derived limit must fit SSM's range too."""
    creds = pool.credentials
    if creds.activation_limit is not None and "spare_registrations" in creds.model_fields_set:
        yield Problem(
            f"{where}.spareRegistrations",
            f"has no effect with activationLimit ({creds.activation_limit} registrations); remove one of the two",
        )
    elif creds.activation_limit is None and (pool.nodes or 0) + creds.spare_registrations > SSM_REGISTRATION_LIMIT_MAX:
        yield Problem(
            f"{where}.spareRegistrations",
            f"nodes ({pool.nodes}) + spareRegistrations ({creds.spare_registrations}) exceeds SSM's registration "
            f"limit of {SSM_REGISTRATION_LIMIT_MAX}; lower it",
        )


def credentials_fit_the_provider(p: Parsed) -> Iterator[Problem]:
    """SSM activations take a limit (at least the node count) and an expiry; IAM Roles Anywhere takes the PEM of
    the CA that signs the nodes' certificates, and nothing else (EKS hybrid nodes credentials)."""
    for path, pool in p.hybrid_pools():
        creds, where = pool.credentials, f"{path}.credentials"
        if pool.nodes and creds.activation_limit is not None and creds.activation_limit < pool.nodes:
            yield Problem(
                f"{where}.activationLimit",
                f"{creds.activation_limit} registrations cannot join {pool.nodes} nodes; set it >= {pool.nodes}",
            )
        if creds.provider == "ssm":
            yield from _activation_limit_problems(pool, where)
        if creds.provider == "iam-roles-anywhere":
            for field, key in (
                ("activation_limit", "activationLimit"),
                ("activation_expiry_hours", "activationExpiryHours"),
                ("spare_registrations", "spareRegistrations"),
                ("activation_revision", "activationRevision"),
            ):
                if field in creds.model_fields_set:
                    yield Problem(f"{where}.{key}", "applies to SSM activations, not IAM Roles Anywhere")
            if not creds.trust_anchor_certificate:
                yield Problem(
                    f"{where}.trustAnchorCertificate",
                    "IAM Roles Anywhere needs the PEM of the CA that signs the nodes' certificates",
                )
        elif creds.trust_anchor_certificate:
            yield Problem(f"{where}.trustAnchorCertificate", "only used with provider: iam-roles-anywhere")
        pem = creds.trust_anchor_certificate
        if pem and "-----BEGIN CERTIFICATE-----" not in pem:
            yield Problem(f"{where}.trustAnchorCertificate", "expected a PEM certificate (BEGIN CERTIFICATE)")


def remote_networks_are_given(p: Parsed) -> Iterator[Problem]:
    """A hybrid pool names its node networks and its pod networks, with room for a /25 per node.

    The pod networks are Cilium's cluster-pool (AWS's hybrid nodes CNI page: the same CIDRs as the remote pod
    networks), so they are needed whether or not webhooks run there: without them Cilium would hand out its chart
    default, 10.0.0.0/8, which EKS neither knows nor routes and which may overlap the VPC.
    """
    for path, pool in p.hybrid_pools():
        net = pool.network
        if p.damaged_at(f"{path}.network"):
            continue  # a CIDR that did not parse is left out: the rest would be judged without it
        if net is None or not net.remote_node_cidrs:
            yield Problem(f"{path}.network.remoteNodeCidrs", "the on-prem node network(s), e.g. [10.80.0.0/16]")
            continue
        if not net.remote_pod_cidrs:
            yield Problem(
                f"{path}.network.remotePodCidrs",
                "Cilium hands hybrid pods their addresses from these CIDRs (a /25 per server) and EKS routes "
                "webhooks and DNS by them: give the on-prem pod CIDRs, e.g. [10.85.0.0/16] (EKS hybrid nodes CNI)",
            )
        blocks = cilium_node_blocks(net.remote_pod_cidrs)
        if net.remote_pod_cidrs and pool.nodes and blocks < pool.nodes:
            yield Problem(
                f"{path}.network.remotePodCidrs",
                f"room for {blocks} node pod blocks (/25 each, Cilium cluster-pool as in AWS's hybrid CNI example) "
                f"but {pool.nodes} nodes join; give a larger pod CIDR",
            )


def remote_networks_are_private_and_apart(p: Parsed) -> Iterator[Problem]:
    """Remote node and pod CIDRs are RFC 1918, /8 to /32, and overlap neither the VPC, the service CIDR nor each
    other (EKS API, RemoteNetworkConfigRequest)."""
    seen: list[tuple[str, IPv4Network]] = []
    for path, pool in p.hybrid_pools():
        if pool.network is None:
            continue
        for key, cidrs in (
            ("remoteNodeCidrs", pool.network.remote_node_cidrs),
            ("remotePodCidrs", pool.network.remote_pod_cidrs),
        ):
            for j, cidr in enumerate(cidrs):
                where = f"{path}.network.{key}[{j}]"
                if not any(cidr.subnet_of(block) for block in RFC1918):
                    yield Problem(where, f"{cidr} is not RFC 1918; EKS remote networks must be private IPv4")
                if not REMOTE_PREFIX_RANGE[0] <= cidr.prefixlen <= REMOTE_PREFIX_RANGE[1]:
                    yield Problem(where, f"{cidr}: EKS accepts /8 to /32")
                if p.network is not None and p.network.existing_vpc is None and cidr.overlaps(p.network.vpc_cidr):
                    yield Problem(where, f"{cidr} overlaps the VPC CIDR {p.network.vpc_cidr}")
                if p.cluster is not None and cidr.overlaps(p.cluster.service_cidr):
                    yield Problem(where, f"{cidr} overlaps the service CIDR {p.cluster.service_cidr}")
                for other_path, other in seen:
                    if cidr.overlaps(other):
                        yield Problem(where, f"{cidr} overlaps {other} ({other_path})")
                seen.append((where, cidr))


RULES = (
    hybrid_pools_describe_their_servers,
    aws_keys_not_on_hybrid_pools,
    credentials_fit_the_provider,
    remote_networks_are_given,
    remote_networks_are_private_and_apart,
)
