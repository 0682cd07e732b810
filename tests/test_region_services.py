"""A region must offer every AWS service the stack uses (components/catalog/region_services.yaml, from botocore's
endpoint table and the EKS user guide)."""

from __future__ import annotations

from typing import Any

import pytest

from blueprint.region_services_table import ENDPOINT_SERVICES, hybrid_nodes_regions, offered_regions, table
from components.catalog import region_services, regions
from components.errors import ConfigError
from components.validation import validate
from components.validation.parse import Parsed
from components.validation.regions import services_used
from tests.builders import HYBRID_POOL as HYBRID
from tests.builders import SITE_CONNECTION, SYSTEM

STACK: dict[str, Any] = {
    "cluster": {"name": "t", "endpoint": {"privateAccessCidrs": ["192.168.10.0/24"]}},
    "network": {"availabilityZones": ["a", "b"]},
    "nodePools": [SYSTEM],
}
ROLES_ANYWHERE = {
    "credentials": {
        "provider": "iam-roles-anywhere",
        "trustAnchorCertificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    }
}
ENDPOINTS = {
    "partitions": [
        {"partition": "aws", "regions": {"r-1": {}, "r-2": {}}, "services": {"eks": {"endpoints": {"r-1": {}}}}},
        {"partition": "aws-cn", "regions": {"cn-1": {}}, "services": {"eks": {"endpoints": {"cn-1": {}}}}},
    ]
}


def stack_in(region: str, *pools: dict[str, Any], **sections: Any) -> dict[str, Any]:
    zones = [f"{region}a", f"{region}b"]
    network = {"availabilityZones": zones, "siteConnection": SITE_CONNECTION}
    # Container Insights cannot monitor on-prem GPUs, so a stack with hybrid pools turns it off.
    monitoring = {"addons": {"monitoring": {"containerInsights": False}}} if pools else {}
    return {**STACK, "network": network, "nodePools": [*STACK["nodePools"], *pools], **monitoring, **sections}


def test_every_region_offers_eks_and_every_service_names_its_source() -> None:
    table_ = region_services.services()
    assert set(regions.regions()) <= table_["eks"].regions
    assert all(service.source and service.regions for service in table_.values())


def test_every_service_a_stack_can_use_is_in_the_table() -> None:
    everything = {
        "storage": {"lustre": {}, "nfs": {"kind": "efs"}},
        "addons": {"nodeTerminationHandler": {"enabled": "on"}},
    }
    ssm = Parsed.from_raw(stack_in("us-east-1", HYBRID, **everything), "us-east-1")
    roles_anywhere = Parsed.from_raw(stack_in("us-east-1", {**HYBRID, **ROLES_ANYWHERE}), "us-east-1")
    used = {key for parsed in (ssm, roles_anywhere) for key, _ in services_used(parsed)}
    assert used == set(region_services.services())


@pytest.mark.parametrize(
    ("region", "extra", "refused"),
    [
        ("cn-north-1", {}, "Amazon EKS Hybrid Nodes"),
        ("us-gov-east-1", {}, "Amazon EKS Hybrid Nodes"),
        ("us-iso-east-1", ROLES_ANYWHERE, "IAM Roles Anywhere"),
    ],
)
def test_a_region_without_a_service_the_stack_uses_is_refused(region: str, extra: dict[str, Any], refused: str) -> None:
    with pytest.raises(ConfigError) as error:
        validate(stack_in(region, {**HYBRID, **extra}), region=region)
    assert [p.path for p in error.value.problems] == ["aws:region"]
    assert f"{region} does not offer {refused}" in error.value.problems[0].message


def test_the_same_stack_in_a_region_with_the_services_passes() -> None:
    validate(stack_in("us-east-1", HYBRID), region="us-east-1")


def test_the_generator_reads_endpoints_and_leaves_hybrid_nodes_out_of_china_and_govcloud() -> None:
    assert offered_regions(ENDPOINTS, "eks") == ["r-1", "cn-1"]
    assert hybrid_nodes_regions(ENDPOINTS) == ["r-1"]
    text = table(ENDPOINTS, "0.0.0")
    assert 'source: "botocore 0.0.0, botocore/data/endpoints.json"' in text
    assert all(f"  {key}:" in text for key in ENDPOINT_SERVICES)
