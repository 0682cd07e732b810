"""Control-plane rules: a private API endpoint, encrypted secrets and control-plane logs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from policies.resources import (
    Resource,
    get,
    items,
    strings,
    truthy,
)
from policies.rules.network import is_world, world_covered
from policies.rules.signatures import Config


def eks_endpoint_private(cluster: Resource, config: Config) -> Iterator[str]:
    """The Kubernetes API has a private endpoint; a public one only behind an allow-list that is not 0.0.0.0/0 (related:
    FSBP EKS.1, which fails any public endpoint; an allow-list is this pack's line).

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
        if not any(is_world(c) for c in cidrs):
            for world in world_covered(cidrs):
                yield (
                    f"EKS cluster '{cluster.name}' opens its public API endpoint to {', '.join(cidrs)}, which "
                    f"together cover {world}"
                )


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
