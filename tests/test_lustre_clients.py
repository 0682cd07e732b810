"""EFA-enabled FSx for Lustre clients: Nitro v4+ AL2023 pools that wire EFA run the FSx guide's EFA client setup
before the kubelet starts; other pools (p4d, Bottlerocket, pools without EFA) mount over TCP; the EFA connections
of all clients fit the file system's 1024."""

from __future__ import annotations

from email import message_from_string
from typing import Any

import pytest

from components.errors import ConfigError
from components.planning import nodeadm
from components.planning.lustre_clients import SETUP_PACKAGE_URL, efa_connections, lustre_client
from components.planning.pools import PoolPlan, plan_pool
from components.planning.stack_plan import plan_pools
from tests.builders import SYSTEM, stack_config

EFA_LUSTRE = {"storageCapacityGib": 9600, "perUnitStorageThroughput": 500, "efaEnabled": True, "metadata": {}}


def training(name: str, instance_type: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "role": "training",
        "instanceType": instance_type,
        "scaling": {"min": 0, "max": extra.pop("max", 4)},
        "placement": {"availabilityZones": ["us-east-1a"]},
        **extra,
    }


def plans(*pools: dict[str, Any], lustre: dict[str, Any] = EFA_LUSTRE) -> dict[str, PoolPlan]:
    spec = stack_config(SYSTEM, *pools, storage={"lustre": lustre})
    return {p.name: p for p in plan_pools(spec)}


def scripts(plan: PoolPlan) -> list[str]:
    text = nodeadm.pool_user_data({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {}}, plan)
    message = message_from_string(text)
    return [str(part.get_payload()) for part in message.walk() if part.get_content_type() == "text/x-shellscript"]


def test_nitro_v4_efa_pools_on_al2023_run_the_fsx_efa_client_setup_before_the_kubelet() -> None:
    by_name = plans(training("h100", "p5.48xlarge"))
    h100 = by_name["h100"]
    assert h100.lustre_client == "efa"
    setup = [s for s in scripts(h100) if SETUP_PACKAGE_URL in s]
    assert len(setup) == 1 and "./setup.sh" in setup[0]
    assert by_name["system"].lustre_client is None
    assert not any(SETUP_PACKAGE_URL in s for s in scripts(by_name["system"]))


@pytest.mark.parametrize(
    ("pool", "why"),
    [
        (training("a100", "p4d.24xlarge"), "Nitro v3"),
        (training("h100", "p5.48xlarge", amiFamily="bottlerocket"), "no documented EFA client on Bottlerocket"),
        (training("h100", "p5.48xlarge", efa="off"), "no EFA interfaces wired"),
    ],
)
def test_pools_that_cannot_be_efa_clients_mount_over_tcp(pool: dict[str, Any], why: str) -> None:
    spec = stack_config(SYSTEM, pool, storage={"lustre": EFA_LUSTRE})
    plan = plan_pool(spec.node_pools[1], spec.network)
    assert spec.storage.lustre is not None
    assert lustre_client(plan, spec.storage.lustre) == "tcp", why
    if plan.pool.ami_family == "al2023":
        assert not any(SETUP_PACKAGE_URL in s for s in scripts(plan))


def test_without_efa_on_the_file_system_every_client_uses_tcp() -> None:
    assert plans(training("h100", "p5.48xlarge"), lustre={})["h100"].lustre_client == "tcp"


def test_efa_connections_per_node_follow_the_fsx_setup_defaults() -> None:
    by_name = plans(training("h100", "p5.48xlarge"), training("l40s", "g6e.24xlarge"), training("g6", "g6.48xlarge"))
    assert {name: efa_connections(by_name[name]) for name in ("h100", "l40s", "g6")} == {"h100": 8, "l40s": 2, "g6": 1}


def test_more_efa_connections_than_a_file_system_accepts_are_refused() -> None:
    too_many = training("h100", "p5.48xlarge", max=129)  # 129 x 8 = 1032 > 1024
    with pytest.raises(ConfigError, match=r"storage\.lustre\.efaEnabled.*1032 EFA connections"):
        stack_config(SYSTEM, too_many, storage={"lustre": EFA_LUSTRE}, validated=True)
    stack_config(SYSTEM, training("h100", "p5.48xlarge", max=128), storage={"lustre": EFA_LUSTRE}, validated=True)
