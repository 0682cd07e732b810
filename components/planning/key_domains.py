"""Which KMS key encrypts which data (pure, no Pulumi): one cluster key, or one key per data domain.

A data domain is data that one set of services reads and writes and one set of people is responsible for: the
cluster's own secrets and node disks, the audit and network logs, the training data, the inference data. With
`cluster.encryption.keyPerDomain` each domain gets its own key, whose policy names only that domain's services
(`components.planning.key_policy`, [KEYDOMAINS]), so disabling or revoking one key cuts off one domain and a key
policy change for one service cannot reach another's data. docs/security.md, "Keys and encryption", justifies the split.
"""

from __future__ import annotations

from typing import Literal

from components.config import StackConfig

KeyDomain = Literal["cluster", "logs", "training-data", "inference-data"]
#: Every domain, in the order keys are created and listed: `cluster` first, since it is the stack's key either way.
KEY_DOMAINS: tuple[KeyDomain, ...] = ("cluster", "logs", "training-data", "inference-data")
#: What each domain holds (plan summary, docs).
DOMAIN_DATA: dict[KeyDomain, str] = {
    "cluster": "Kubernetes secrets, node root volumes, EBS CSI volumes",
    "logs": "control-plane and VPC flow log groups",
    "training-data": "FSx for Lustre file system and its S3 data bucket",
    "inference-data": "EFS file system",
}


def key_domains(key_per_domain: bool, has_lustre: bool, has_efs: bool) -> tuple[KeyDomain, ...]:
    """The domains that get a key of their own: only `cluster` with one key; otherwise `cluster`, `logs` and the
    storage domains the stack has (a key for data that does not exist would cost $1/month for nothing)."""
    if not key_per_domain:
        return ("cluster",)
    present = {"cluster": True, "logs": True, "training-data": has_lustre, "inference-data": has_efs}
    return tuple(domain for domain in KEY_DOMAINS if present[domain])


def key_of(domain: KeyDomain, domains: tuple[KeyDomain, ...]) -> KeyDomain:
    """The key that encrypts `domain`'s data: its own when it has one, else the cluster key."""
    return domain if domain in domains else "cluster"


def served_domains(key: KeyDomain, domains: tuple[KeyDomain, ...]) -> frozenset[KeyDomain]:
    """The domains whose data `key` encrypts: the cluster key takes every domain without a key of its own."""
    return frozenset(domain for domain in KEY_DOMAINS if key_of(domain, domains) == key)


def key_resource_name(cluster_name: str, domain: KeyDomain) -> str:
    """The key's (and its alias's) Pulumi name: the cluster key keeps `<cluster>-eks` whether or not domains are split,
    so turning the option on does not replace it."""
    return f"{cluster_name}-eks" if domain == "cluster" else f"{cluster_name}-{domain}-key"


def key_alias(cluster_name: str, domain: KeyDomain) -> str:
    """`alias/<cluster>-eks` for the cluster key, `alias/<cluster>-<domain>` for the others (the deployer policy allows
    `alias/<cluster>-*`)."""
    return f"alias/{cluster_name}-eks" if domain == "cluster" else f"alias/{cluster_name}-{domain}"


def stack_key_domains(spec: StackConfig) -> tuple[KeyDomain, ...]:
    """`key_domains` of a stack: Lustre is training data, an EFS file system inference data."""
    nfs = spec.storage.nfs
    return key_domains(
        spec.cluster.encryption.key_per_domain,
        has_lustre=spec.storage.lustre is not None,
        has_efs=nfs is not None and nfs.kind == "efs",
    )
