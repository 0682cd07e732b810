"""Rules on the region's services: `aws:region` must offer every AWS service the stack creates resources in."""

from __future__ import annotations

from collections.abc import Iterator

from components.catalog import region_services, regions
from components.errors import Problem
from components.validation.parse import Parsed


def services_used(p: Parsed) -> Iterator[tuple[str, str]]:
    """(service key of region_services.yaml, what in the stack needs it) for every service the stack uses."""
    yield "eks", "runs the cluster"
    if p.pools_complete and any(pool.kind == "aws" for _, pool in p.pools):
        yield "ssm", "serves the node images' public parameters"
    handler = p.addons.node_termination_handler.enabled if p.addons else "off"
    if handler == "on" or (handler == "auto" and any(pool.kind == "aws" for _, pool in p.pools)):
        yield "sqs", "holds the node termination handler's queue"
        yield "events", "routes instance events to the node termination handler"
    if p.storage and p.storage.lustre:
        yield "fsx", "serves storage.lustre"
    if p.storage and p.storage.nfs and p.storage.nfs.kind == "efs":
        yield "elasticfilesystem", "serves storage.nfs (kind: efs)"
    providers = {pool.credentials.provider for _, pool in p.hybrid_pools()}
    if providers:
        yield "eks-hybrid-nodes", "the hybrid pools join the cluster through"
    if "ssm" in providers:
        yield "ssm", "activates the hybrid pools' servers (credentials.provider: ssm)"
    if "iam-roles-anywhere" in providers:
        yield "rolesanywhere", "authenticates the hybrid pools' servers (credentials.provider: iam-roles-anywhere)"


def region_offers_the_services_used(p: Parsed) -> Iterator[Problem]:
    """`aws:region` offers every AWS service the stack uses: EKS; SSM (node image parameters, hybrid activations);
    SQS and EventBridge for the node termination handler; FSx with `storage.lustre`; EFS with an `efs` NFS volume;
    EKS Hybrid Nodes and SSM or IAM Roles Anywhere with hybrid pools (components/catalog/region_services.yaml, from
    botocore's endpoint table; Hybrid Nodes from the EKS user guide: not in the GovCloud (US) and China Regions)."""
    if p.region not in regions.regions():
        return  # region_is_real reports it
    table = region_services.services()
    missing: dict[str, str] = {}
    for key, why in services_used(p):
        if p.region not in table[key].regions:
            missing.setdefault(key, why)
    for key, why in missing.items():
        service = table[key]
        yield Problem(
            "aws:region",
            f"{p.region} does not offer {service.name}, which {why}; choose a region that does ({service.source}, "
            "components/catalog/region_services.yaml)",
        )


RULES = (region_offers_the_services_used,)
