"""A site-link outage of the hybrid stack: cluster-autoscaler keeps scaling the cloud pools, the servers' pods keep
resolving names through the on-prem CoreDNS replica, and the pods only hybrid nodes can run stay bound to them.

Registered inputs of the shipped hybrid stack and of a larger site (12 servers, a 16-node burst pool), planned
through the real program under mocks. docs/operations.md, "Site-link outages", describes the behaviour.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.plan.plan import PlannedStack
from blueprint.plan.runner import stack_file
from blueprint.preflight.evaluate import undeclared_paths
from components.config import Taint
from components.errors import ConfigError
from components.managed_addons import addon_configuration, coredns_replicas
from components.planning.tolerations import DEFAULT_UNREACHABLE_TOLERATION_SECONDS, tolerates
from tests.builders import EKS_ADDON, HELM_RELEASE, SYSTEM, ShippedStack, releases, stack_config, stack_run

PROJECT = "gpu-clusters"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE_PATCH = "kubernetes:core/v1:ServicePatch"
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
#: cluster-autoscaler's own defaults (flags.go, tag cluster-autoscaler-1.35.2).
CA_DEFAULT_COUNT, CA_DEFAULT_PERCENTAGE = 3, 45
#: The properties of the CoreDNS add-on's configuration schema (DescribeAddonConfiguration, as published by the
#: terraform-aws-eks add-on docs for v1.11.1-eksbuild.8; `topologySpreadConstraints` since v1.9.3-eksbuild.5, AWS
#: containers blog "Recent changes to the CoreDNS add-on"). No field of the `kube-dns` Service among them.
COREDNS_SCHEMA: dict[str, Any] = {
    "properties": {
        key: {}
        for key in (
            "affinity",
            "computeType",
            "corefile",
            "nodeSelector",
            "podAnnotations",
            "podDisruptionBudget",
            "podLabels",
            "replicaCount",
            "resources",
            "tolerations",
            "topologySpreadConstraints",
        )
    }
}


def ca_halts(unready: int, nodes: int, count: int, percentage: float) -> bool:
    """cluster-autoscaler's cluster-wide gate (clusterstate.go IsClusterHealthy): unhealthy, and nothing scales, when
    more than `count` nodes AND more than `percentage` % of all nodes are unready."""
    return unready > count and unready > percentage / 100 * nodes


def hybrid_variant(tmp: Path, servers: int, burst_max: int, seconds: int | None = None) -> PlannedStack:
    """The shipped hybrid stack with `servers` A40 servers and a burst pool of up to `burst_max` nodes."""
    config = yaml.safe_load(stack_file("hybrid").read_text())["config"]
    for pool in config[f"{PROJECT}:nodePools"]:
        if pool["name"] == "a40":
            pool["nodes"] = servers
            if seconds is not None:
                pool["unreachableTolerationSeconds"] = seconds
        if pool["name"] == "burst":
            pool["scaling"]["max"] = burst_max
    path = tmp / f"Pulumi.hybrid-{servers}-{burst_max}-{seconds}.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return stack_run(config_file=path)


@pytest.fixture(scope="module")
def large_site(tmp_path_factory: pytest.TempPathFactory) -> PlannedStack:
    return hybrid_variant(tmp_path_factory.mktemp("large-site"), servers=12, burst_max=16)


def ca_args(stack: PlannedStack | ShippedStack) -> dict[str, Any]:
    args: dict[str, Any] = releases(stack.run)["cluster-autoscaler"]["values"]["extraArgs"]
    return args


def node_counts(stack: PlannedStack | ShippedStack) -> tuple[int, int, int]:
    """(hybrid servers, cloud nodes at every pool's minimum, cloud nodes at every pool's maximum) of a plan."""
    pools = stack.plan["summary"]["nodePools"]
    servers = sum(p["maxNodes"] for p in pools if p["kind"] == "hybrid")
    cloud = [p for p in pools if p["kind"] == "aws"]
    return servers, sum(p["minNodes"] for p in cloud), sum(p["maxNodes"] for p in cloud)


# ----------------------------------------------------------------------------------------- cluster-autoscaler
def test_the_shipped_hybrid_stack_raises_the_unready_count_by_its_four_servers(hybrid_stack: ShippedStack) -> None:
    args = ca_args(hybrid_stack)
    assert args["ok-total-unready-count"] == CA_DEFAULT_COUNT + 4
    assert args["max-total-unready-percentage"] == CA_DEFAULT_PERCENTAGE


@pytest.mark.program
def test_a_larger_site_raises_it_by_its_own_servers(large_site: PlannedStack) -> None:
    assert ca_args(large_site)["ok-total-unready-count"] == CA_DEFAULT_COUNT + 12


def test_stacks_without_servers_keep_cluster_autoscalers_defaults(training_stack: ShippedStack) -> None:
    args = ca_args(training_stack)
    assert "ok-total-unready-count" not in args and "max-total-unready-percentage" not in args


@pytest.mark.parametrize("which", ["shipped", "large"])
def test_a_site_outage_leaves_the_cloud_pools_scaling_and_a_cloud_failure_still_stops_them(
    which: str, hybrid_stack: ShippedStack, large_site: PlannedStack
) -> None:
    stack = hybrid_stack if which == "shipped" else large_site
    args = ca_args(stack)
    count, percentage = args["ok-total-unready-count"], args["max-total-unready-percentage"]
    servers, cloud_min, cloud_max = node_counts(stack)
    # Today's defaults: the whole site unready with the cloud pools idle stops every scale-up.
    assert ca_halts(servers, servers + cloud_min, CA_DEFAULT_COUNT, CA_DEFAULT_PERCENTAGE)
    # Sized: the whole site unready, at any cloud size, with up to 3 cloud nodes unready as well, stops nothing.
    for cloud in (cloud_min, cloud_max):
        for cloud_unready in range(min(cloud, CA_DEFAULT_COUNT) + 1):
            assert not ca_halts(servers + cloud_unready, servers + cloud, count, percentage)
    # A real cloud failure still stops it: every cloud node unready with the site up, or 4 with the site down.
    assert ca_halts(cloud_max, servers + cloud_max, count, percentage)
    assert ca_halts(servers + CA_DEFAULT_COUNT + 1, servers + cloud_max, count, percentage)


# ----------------------------------------------------------------------------------------------------- CoreDNS
def coredns_config(stack: PlannedStack | ShippedStack) -> dict[str, Any]:
    addon = next(a for a in stack.run.of_type(EKS_ADDON) if a.inputs["addonName"] == "coredns")
    config: dict[str, Any] = json.loads(addon.inputs["configurationValues"])
    return config


def test_coredns_spreads_one_replica_per_zone_counting_only_its_own_rollout(hybrid_stack: ShippedStack) -> None:
    """Two system AZs and the on-prem zone: three replicas, a required zone spread of skew 1 over the pods of one
    ReplicaSet, with zones whose nodes are all tainted (unreachable) left out of the count."""
    config = coredns_config(hybrid_stack)
    assert config["replicaCount"] == 3
    assert config["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            "matchLabelKeys": ["pod-template-hash"],
            "nodeTaintsPolicy": "Honor",
        }
    ]
    assert not undeclared_paths(config, COREDNS_SCHEMA)


@pytest.mark.parametrize("cloud_zones", [1, 2, 3, 4])
def test_coredns_has_a_replica_for_every_zone_so_the_on_prem_zone_is_never_left_out(cloud_zones: int) -> None:
    """With skew 1, each of Z zones holds floor(R/Z) replicas or more: at least one when R >= Z, and the zones are
    the system pool's AZs plus the on-prem zone."""
    hybrid = hybrid_pools()
    config = addon_configuration("coredns", hybrid, cloud_zones)
    assert config is not None
    assert config["replicaCount"] == coredns_replicas(cloud_zones) >= cloud_zones + 1
    assert config["replicaCount"] >= 3  # two survive a drain in the cloud, one on-prem


def test_the_on_prem_coredns_replica_rides_out_an_outage_as_long_as_the_servers_workloads(
    hybrid_stack: ShippedStack,
) -> None:
    tolerations = coredns_config(hybrid_stack)["tolerations"]
    for key in (UNREACHABLE, NOT_READY):
        assert {
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": DEFAULT_UNREACHABLE_TOLERATION_SECONDS,
        } in tolerations
        # Scheduling still avoids a server that is unreachable: only NoExecute is tolerated.
        assert not tolerates(tolerations, Taint(key=key, value="", effect="NoSchedule"))


def test_the_runbook_states_that_the_cloud_coredns_replicas_carry_the_outage_tolerations_too(
    hybrid_stack: ShippedStack,
) -> None:
    """The add-on has one Deployment and one `tolerations` list, with no per-replica placement: every replica
    carries the outage tolerations, and the operations guide must say so (and what it costs), not only of the
    on-prem replica."""
    config = coredns_config(hybrid_stack)
    assert set(config) & {"tolerations", "affinity", "nodeSelector"} == {"tolerations", "affinity"}
    assert any(t.get("key") == UNREACHABLE and t.get("tolerationSeconds") for t in config["tolerations"])
    guide = (Path(__file__).parents[1] / "docs" / "operations.md").read_text()
    assert "| the on-prem CoreDNS replica |" not in guide
    assert "| CoreDNS: every replica, the cloud ones too (one Deployment) |" in guide
    assert "keeps its CoreDNS replica bound for 1800 s instead of 300 s" in guide


def test_kube_dns_prefers_the_closest_replica_through_a_patch_after_the_addon(hybrid_stack: ShippedStack) -> None:
    patch = hybrid_stack.run.one(SERVICE_PATCH, "hybrid-kube-dns")
    assert patch.inputs["metadata"] == {"name": "kube-dns", "namespace": "kube-system"}
    assert patch.inputs["spec"] == {"trafficDistribution": "PreferClose"}
    addon = next(a for a in hybrid_stack.run.of_type(EKS_ADDON) if a.inputs["addonName"] == "coredns")
    assert addon.urn in patch.depends_on
    assert "trafficDistribution" not in json.dumps(coredns_config(hybrid_stack))  # not in the add-on's schema


def test_without_servers_kube_dns_is_left_as_eks_makes_it(training_stack: ShippedStack) -> None:
    assert training_stack.run.of_type(SERVICE_PATCH) == []
    assert "topologySpreadConstraints" not in coredns_config(training_stack)


# ------------------------------------------------------------------------------------------------- tolerations
def serving_tolerations(stack: PlannedStack | ShippedStack, name: str) -> list[dict[str, Any]]:
    deployment = stack.run.one(DEPLOYMENT, name).inputs
    tolerations: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["tolerations"]
    return tolerations


def outage(seconds: int) -> list[dict[str, Any]]:
    return [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
        for key in (UNREACHABLE, NOT_READY)
    ]


def test_serving_on_the_servers_stays_bound_for_the_default_half_hour(hybrid_stack: ShippedStack) -> None:
    tolerations = serving_tolerations(hybrid_stack, "hybrid-chat")
    assert DEFAULT_UNREACHABLE_TOLERATION_SECONDS == 1800
    assert all(t in tolerations for t in outage(1800))
    assert tolerates(tolerations, Taint(key="nvidia.com/gpu", value="true", effect="NoSchedule"))


def test_serving_on_ec2_keeps_kubernetes_300_seconds(inference_stack: ShippedStack) -> None:
    tolerations = serving_tolerations(inference_stack, "serve-chat")
    assert not any(t.get("key") in (UNREACHABLE, NOT_READY) for t in tolerations)


@pytest.mark.program
def test_the_pools_setting_reaches_every_workload_pinned_to_the_servers(tmp_path: Path) -> None:
    stack = hybrid_variant(tmp_path, servers=4, burst_max=4, seconds=3600)
    assert all(t in serving_tolerations(stack, "hybrid-chat") for t in outage(3600))
    assert all(t in coredns_config(stack)["tolerations"] for t in outage(3600))
    cilium = stack.run.one(HELM_RELEASE, "hybrid-cilium").inputs["values"]["operator"]["tolerations"]
    assert outage(3600)[0] in cilium  # the operator tolerates not-ready for good already (startup taint)


@pytest.mark.parametrize(("seconds", "fragment"), [(299, "greater than or equal to 300"), (86401, "less than")])
def test_the_setting_is_bounded(seconds: int, fragment: str) -> None:
    with pytest.raises(ConfigError) as refused:
        stack_config(SYSTEM, hybrid_pool(unreachableTolerationSeconds=seconds), validated=True)
    assert "nodePools[1] (a40).unreachableTolerationSeconds" in str(refused.value)
    assert fragment in str(refused.value)


def test_the_setting_is_refused_on_ec2_pools() -> None:
    with pytest.raises(ConfigError) as refused:
        stack_config(dict(SYSTEM, unreachableTolerationSeconds=1800), validated=True)
    assert "nodePools[0] (system).unreachableTolerationSeconds" in str(refused.value)


def hybrid_pool(**changes: Any) -> dict[str, Any]:
    return {
        "name": "a40",
        "kind": "hybrid",
        "role": "inference",
        "gpuModel": "A40",
        "gpusPerNode": 4,
        "nodes": 2,
        "network": {"remoteNodeCidrs": ["10.80.0.0/16"], "remotePodCidrs": ["10.85.0.0/16"]},
        **changes,
    }


def hybrid_pools() -> list[Any]:
    from components.planning.stack_plan import plan_pools

    return [p for p in plan_pools(stack_config(SYSTEM, hybrid_pool())) if p.kind == "hybrid"]


def test_the_link_back_procedure_restarts_the_ssm_agent_and_reboots_state_the_pinned_pods_timing() -> None:
    """A long outage expires the SSM credentials and the agent's backoff reaches 30 minutes: the restart is a step
    of the procedure, not a remark; pods pinned to the servers wait the hybrid toleration, not the default 300 s."""
    guide = (Path(__file__).parents[1] / "docs" / "operations.md").read_text()
    link_back = guide.split("When the link is back:", 1)[1].split("\n\n", 2)[1]
    assert link_back.startswith("1. On every SSM server, restart the agent: `systemctl restart amazon-ssm-agent`.")
    reboot = guide.split("#### Rebooting a server", 1)[1].split("####", 1)[0]
    assert "(~50 s + 300 s by default)" not in reboot
    assert f"({DEFAULT_UNREACHABLE_TOLERATION_SECONDS} s by default) for the pods the stack pins" in reboot
    assert "replaces each hybrid pool's activation" in guide
