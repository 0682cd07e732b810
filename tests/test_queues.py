"""Kueue and the training queues: the release's values, the planned flavors, ClusterQueues, LocalQueues, Topology and
capacity check, what the add-on registers and in which order, and the rules on `workloads.queues`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.config import GangAdmission
from components.errors import ConfigError
from components.planning.addons.cluster_autoscaler import PROVISIONING_REQUESTS_FLAG
from components.planning.addons.kueue import KUEUE_INTEGRATIONS, kueue_values, manager_config
from components.planning.queues import (
    PROVISIONING_CHECK,
    PROVISIONING_CLASS,
    SHARED_CLUSTER_QUEUE,
    TOPOLOGY_NAME,
    QueuePlan,
    quota_warnings,
)
from components.planning.stack_plan import plan_pools, plan_stack
from components.planning.training_platform import (
    KUEUE_NAMESPACE,
    LOCAL_QUEUE_NAME,
    NETWORK_TOPOLOGY_LEVELS,
    PREFERRED_TOPOLOGY_LEVEL,
)
from components.yaml_loader import dump_yaml, parse_yaml
from tests.builders import (
    HYBRID_POOL,
    INFERENCE_POOL,
    SYSTEM_POOL,
    TRAINING_POOL,
    CliResult,
    addon_stack,
    pool,
    releases,
    run_addons,
    stack_config,
)

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
LUSTRE = {
    "lustre": {
        "name": "scratch",
        "storageCapacityGib": 1200,
        "kubernetes": {"namespace": "training", "claimName": "lustre-scratch"},
    }
}
#: A second GPU training pool without EFA or a placement group (g6e, which EC2 describes the topology of).
L40S_TRAINING = {
    "name": "l40s",
    "role": "training",
    "instanceType": "g6e.12xlarge",
    "scaling": {"min": 0, "max": 2, "mode": "cluster-autoscaler"},
    "placement": {"availabilityZones": ["us-east-1a"]},
    "efa": "off",
}
TEAMS = [{"name": "team-a"}, {"name": "team-b"}]


def queues_of(*pools: dict[str, Any], **sections: Any) -> QueuePlan:
    plan = plan_stack(stack_config(*pools, validated=True, **sections)).job_queues
    assert plan is not None
    return plan


def problems(*pools: dict[str, Any], **sections: Any) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        stack_config(*pools, validated=True, **sections)
    return [str(p) for p in raised.value.problems]


# ------------------------------------------------------------------------------------------- the add-on switch
def test_kueue_is_on_with_any_gpu_pool_and_off_without() -> None:
    """Gang scheduling is a conformance MUST on every cluster with GPUs (docs/conformance.md#gang_scheduling)."""
    assert plan_stack(addon_stack(SYSTEM_POOL, TRAINING_POOL)).addons.on("kueue")
    inference = plan_stack(addon_stack(SYSTEM_POOL, INFERENCE_POOL))
    assert inference.addons.on("kueue") and inference.job_queues is not None
    cpu_only = plan_stack(addon_stack(SYSTEM_POOL))
    assert not cpu_only.addons.on("kueue") and cpu_only.job_queues is None


def test_configured_queues_on_an_inference_stack() -> None:
    scaled = pool(INFERENCE_POOL, scaling={"min": 0, "max": 2, "mode": "cluster-autoscaler"})
    queues = queues_of(SYSTEM_POOL, scaled, workloads={"namespaces": [{"name": "team-a"}], "queues": {}})
    assert [(cq.name, cq.namespaces) for cq in queues.cluster_queues] == [(SHARED_CLUSTER_QUEUE, ("team-a",))]


def test_kueue_can_be_switched_off() -> None:
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"kueue": {"enabled": "off"}})
    assert plan_stack(spec).job_queues is None


# -------------------------------------------------------------------------------------------------- the release
def test_the_controller_runs_on_the_system_pool_with_the_release_image_and_gates() -> None:
    values = kueue_values(plan_pools(addon_stack(SYSTEM_POOL, TRAINING_POOL)), GangAdmission(), "v0.19.2")
    manager = values["controllerManager"]
    assert manager["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in manager["tolerations"]
    assert manager["manager"]["image"] == {
        "repository": "registry.k8s.io/kueue/kueue",
        "tag": "v0.19.2",
        "pullPolicy": "IfNotPresent",
    }
    assert manager["featureGates"] == [
        {"name": "TopologyAwareScheduling", "enabled": True},
        {"name": "QuotaCheckStrategy", "enabled": True},
    ]
    config = parse_yaml(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config == manager_config(GangAdmission())


def test_the_manager_config_queues_jobs_and_jobsets_and_ignores_uncovered_resources() -> None:
    config = manager_config(GangAdmission())
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["integrations"] == {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}
    assert "pod" not in KUEUE_INTEGRATIONS and "deployment" not in KUEUE_INTEGRATIONS
    assert config["resources"] == {"quotaCheckStrategy": "IgnoreUndeclared"}


def test_wait_for_pods_ready_takes_the_configured_admission() -> None:
    admission = GangAdmission(
        timeout="15m", recovery_timeout="5m", backoff_limit_count=3, backoff_base_seconds=30, backoff_max_seconds=600
    )
    assert manager_config(admission)["waitForPodsReady"] == {
        "timeout": "15m",
        "recoveryTimeout": "5m",
        "blockAdmission": False,
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffBaseSeconds": 30,
            "backoffMaxSeconds": 600,
            "backoffLimitCount": 3,
        },
    }
    defaults = manager_config(GangAdmission())["waitForPodsReady"]
    assert defaults["timeout"] == defaults["recoveryTimeout"] == "10m"
    assert "backoffLimitCount" not in defaults["requeuingStrategy"]


@pytest.mark.program
def test_cluster_autoscaler_handles_provisioning_requests_only_with_the_capacity_check() -> None:
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL))
    assert releases(run)["cluster-autoscaler"]["values"]["extraArgs"][PROVISIONING_REQUESTS_FLAG] is True
    off = addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"kueue": {"enabled": "off"}})
    assert PROVISIONING_REQUESTS_FLAG not in releases(run_addons(off))["cluster-autoscaler"]["values"]["extraArgs"]


# ------------------------------------------------------------------------------------------------- the queues
def test_one_shared_queue_covers_every_gpu_pool_and_workload_namespace() -> None:
    queues = queues_of(SYSTEM_POOL, TRAINING_POOL, L40S_TRAINING, storage=LUSTRE, workloads={"namespaces": TEAMS})
    (cq,) = queues.cluster_queues
    assert cq.name == SHARED_CLUSTER_QUEUE
    assert cq.namespaces == ("team-a", "team-b", "training")
    # p5.48xlarge: 8 GPUs and 32 EFA devices a node, 4 nodes at most; g6e.12xlarge: 4 GPUs, 2 nodes, no EFA
    spec = cq.spec()
    assert spec["resourceGroups"] == [
        {
            "coveredResources": ["nvidia.com/gpu", "vpc.amazonaws.com/efa"],
            "flavors": [
                {
                    "name": "h100",
                    "resources": [
                        {"name": "nvidia.com/gpu", "nominalQuota": 32},
                        {"name": "vpc.amazonaws.com/efa", "nominalQuota": 128},
                    ],
                },
                {
                    "name": "l40s",
                    "resources": [
                        {"name": "nvidia.com/gpu", "nominalQuota": 8},
                        {"name": "vpc.amazonaws.com/efa", "nominalQuota": 0},
                    ],
                },
            ],
        }
    ]
    assert spec["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-a", "team-b", "training"]
    assert [(lq.namespace, lq.name, lq.cluster_queue) for lq in queues.local_queues] == [
        ("team-a", LOCAL_QUEUE_NAME, SHARED_CLUSTER_QUEUE),
        ("team-b", LOCAL_QUEUE_NAME, SHARED_CLUSTER_QUEUE),
        ("training", LOCAL_QUEUE_NAME, SHARED_CLUSTER_QUEUE),
    ]


def test_a_stack_without_efa_covers_gpus_only() -> None:
    (cq,) = queues_of(SYSTEM_POOL, L40S_TRAINING, storage=LUSTRE).cluster_queues
    assert cq.spec()["resourceGroups"][0]["coveredResources"] == ["nvidia.com/gpu"]


def test_a_flavor_selects_its_pool_and_tolerates_its_taints() -> None:
    tainted = pool(TRAINING_POOL, taints=[{"key": "team", "value": "ml", "effect": "NoSchedule"}])
    queues = queues_of(SYSTEM_POOL, tainted, storage=LUSTRE)
    (flavor,) = queues.flavors
    spec = flavor.spec()
    assert spec["nodeLabels"]["gpu-clusters/pool"] == "h100"
    assert spec["nodeLabels"]["gpu-clusters/efa"] == "true"
    assert spec["tolerations"] == [{"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]


def test_topology_is_named_only_by_flavors_whose_nodes_get_the_labels() -> None:
    hybrid_training = pool(HYBRID_POOL, role="training")
    queues = queues_of(SYSTEM_POOL, TRAINING_POOL, hybrid_training, storage=LUSTRE)
    flavors = {f.name: f.spec() for f in queues.flavors}
    assert flavors["h100"]["topologyName"] == TOPOLOGY_NAME
    assert "topologyName" not in flavors["a40"]  # on-prem servers are no EC2 instances
    assert queues.topology
    assert queues.summary()["topology"] == list(NETWORK_TOPOLOGY_LEVELS)


def test_a_type_ec2_does_not_describe_gets_no_topology() -> None:
    g5 = pool(L40S_TRAINING, instanceType="g5.12xlarge", name="a10g")
    queues = queues_of(SYSTEM_POOL, g5, storage=LUSTRE)
    assert not queues.topology
    assert "topologyName" not in queues.flavors[0].spec()


def test_the_preferred_level_is_a_level_of_the_topology() -> None:
    assert PREFERRED_TOPOLOGY_LEVEL in NETWORK_TOPOLOGY_LEVELS
    assert PREFERRED_TOPOLOGY_LEVEL == "topology.k8s.aws/network-node-layer-3"


def test_the_capacity_check_applies_on_the_autoscaled_flavors_only() -> None:
    fixed = pool(L40S_TRAINING, scaling={"min": 1, "max": 1, "mode": "fixed"})
    queues = queues_of(SYSTEM_POOL, TRAINING_POOL, fixed, storage=LUSTRE)
    (cq,) = queues.cluster_queues
    assert cq.spec()["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": ["h100"]}]
    }
    assert queues.provisioning
    assert queues.summary()["admission"]["provisioningClass"] == PROVISIONING_CLASS


def test_the_capacity_check_can_be_turned_off() -> None:
    queues = queues_of(
        SYSTEM_POOL, TRAINING_POOL, storage=LUSTRE, workloads={"queues": {"admission": {"provisioning": "off"}}}
    )
    assert not queues.provisioning
    assert "admissionChecksStrategy" not in queues.cluster_queues[0].spec()


def test_team_queues_take_their_namespaces_pools_quotas_cohort_and_preemption() -> None:
    config = {
        "namespaces": TEAMS,
        "queues": {
            "clusterQueues": [
                {
                    "name": "a",
                    "namespaces": ["team-a"],
                    "pools": ["h100"],
                    "quotas": {"h100": {"gpus": 16, "efaDevices": 64, "lendingLimitGpus": 8}},
                    "cohort": "research",
                    "preemption": {"borrowWithinCohort": "LowerPriority"},
                },
                {
                    "name": "b",
                    "pools": ["h100"],
                    "quotas": {"h100": {"gpus": 16, "borrowingLimitGpus": 8}},
                    "cohort": "research",
                },
            ]
        },
    }
    queues = queues_of(SYSTEM_POOL, TRAINING_POOL, storage=LUSTRE, workloads=config)
    a, b = queues.cluster_queues
    assert a.namespaces == ("team-a",)
    assert b.namespaces == ("team-b", "training")  # what no other queue names
    assert a.spec()["cohortName"] == b.spec()["cohortName"] == "research"
    assert a.spec()["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 16, "lendingLimit": 8},
        {"name": "vpc.amazonaws.com/efa", "nominalQuota": 64},
    ]
    assert b.spec()["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 16,
        "borrowingLimit": 8,
    }
    assert a.spec()["preemption"] == {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }
    assert {lq.namespace: lq.cluster_queue for lq in queues.local_queues} == {
        "team-a": "a",
        "team-b": "b",
        "training": "b",
    }


def test_a_mixed_mig_pool_offers_no_whole_gpus() -> None:
    mig = pool(
        TRAINING_POOL, devicePlugin={"migDevices": {"3g.40gb": 2}}, scaling={"min": 1, "max": 1, "mode": "fixed"}
    )
    queues = queues_of(SYSTEM_POOL, mig, storage=LUSTRE, addons={"nvidiaDevicePlugin": {"migStrategy": "mixed"}})
    assert queues.cluster_queues[0].quotas[0].gpus == 0


# ---------------------------------------------------------------------------------------- quota agreement
def test_a_queue_above_the_namespace_quota_is_a_warning() -> None:
    workloads = {"quotas": {"training": {"gpus": 8}}}
    spec = stack_config(SYSTEM_POOL, TRAINING_POOL, validated=True, storage=LUSTRE, workloads=workloads)
    stack_plan = plan_stack(spec)
    (warning,) = quota_warnings(spec, stack_plan.pools, stack_plan.job_queues)
    assert "ClusterQueue shared may admit 32 GPUs for namespace training on h100" in warning
    assert "GPU ResourceQuota of 8" in warning
    default = stack_config(SYSTEM_POOL, TRAINING_POOL, validated=True, storage=LUSTRE)
    default_plan = plan_stack(default)
    assert quota_warnings(default, default_plan.pools, default_plan.job_queues) == []


# ------------------------------------------------------------------------------------------- what is registered
def kueue_objects(run: Any) -> dict[str, Any]:
    return {
        f"{r.inputs['kind']}/{r.inputs['metadata'].get('namespace', '')}/{r.inputs['metadata']['name']}": r
        for r in run.registrations
        if r.type.startswith(KUEUE)
    }


@pytest.mark.program
def test_every_kueue_object_is_registered_after_the_release() -> None:
    spec = stack_config(SYSTEM_POOL, TRAINING_POOL, storage=LUSTRE, cluster={"kubernetesVersion": "1.35"})
    run = run_addons(spec)
    release = next(r for r in run.of_type(HELM_RELEASE) if r.inputs["name"] == "kueue")
    assert release.inputs["namespace"] == KUEUE_NAMESPACE
    assert release.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert release.inputs["version"] == "0.19.2"
    assert not release.inputs.get("skipAwait")
    objects = kueue_objects(run)
    assert sorted(objects) == [
        f"AdmissionCheck//{PROVISIONING_CHECK}",
        f"ClusterQueue//{SHARED_CLUSTER_QUEUE}",
        f"LocalQueue/training/{LOCAL_QUEUE_NAME}",
        f"ProvisioningRequestConfig//{PROVISIONING_CHECK}",
        "ResourceFlavor//h100",
        f"Topology//{TOPOLOGY_NAME}",
    ]
    assert all(release.urn in r.depends_on for r in objects.values())
    config = objects[f"ProvisioningRequestConfig//{PROVISIONING_CHECK}"].inputs["spec"]
    assert config["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert config["managedResources"] == ["nvidia.com/gpu"]
    check = objects[f"AdmissionCheck//{PROVISIONING_CHECK}"].inputs["spec"]
    assert check["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["parameters"] == {
        "apiGroup": "kueue.x-k8s.io",
        "kind": "ProvisioningRequestConfig",
        "name": PROVISIONING_CHECK,
    }
    topology = objects[f"Topology//{TOPOLOGY_NAME}"].inputs["spec"]
    assert [level["nodeLabel"] for level in topology["levels"]] == list(NETWORK_TOPOLOGY_LEVELS)


@pytest.mark.program
def test_the_provisioning_request_crd_comes_before_both_controllers() -> None:
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL))
    (crd,) = run.of_type("kubernetes:yaml/v2:ConfigFile")
    assert crd.inputs["file"].endswith(
        "cluster-autoscaler-1.35.2/cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"
    )
    by_name = {r.inputs["name"]: r for r in run.of_type(HELM_RELEASE)}
    assert crd.urn in by_name["kueue"].depends_on
    assert crd.urn in by_name["cluster-autoscaler"].depends_on


@pytest.mark.program
def test_no_crd_without_the_capacity_check() -> None:
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"clusterAutoscaler": {"enabled": "off"}})
    run = run_addons(spec)
    assert run.of_type("kubernetes:yaml/v2:ConfigFile") == []
    assert "AdmissionCheck" not in {r.inputs["kind"] for r in run.registrations if r.type.startswith(KUEUE)}


@pytest.mark.program
def test_the_training_stack_plans_with_its_queue() -> None:
    from tests.builders import shipped_plan

    plan = shipped_plan("training")
    summary = plan["summary"]["queues"]
    assert summary["clusterQueues"][0]["name"] == SHARED_CLUSTER_QUEUE
    assert summary["clusterQueues"][0]["gpus"] == 32
    assert summary["localQueues"] == [{"namespace": "training", "name": "default", "clusterQueue": "shared"}]


# ------------------------------------------------------------------------------------------------ validation
def test_bad_queues_are_all_reported_at_once_with_their_paths() -> None:
    queues = {
        "clusterQueues": [
            {"name": "a", "namespaces": ["team-a", "nope"], "pools": ["h100", "system", "h10"]},
            {"name": "a", "namespaces": ["team-a"], "quotas": {"h100": {"gpus": 40, "efaDevices": 200}}},
        ],
        "admission": {"backoffBaseSeconds": 600, "backoffMaxSeconds": 60},
    }
    found = problems(SYSTEM_POOL, TRAINING_POOL, storage=LUSTRE, workloads={"namespaces": TEAMS, "queues": queues})
    path = "workloads.queues.clusterQueues"
    assert found == sorted(found)  # by key path, as the CLI prints them
    assert sorted(found) == sorted(
        [
            f"{path}[1].name: a names {path}[0] already; give each ClusterQueue its own name",
            f"{path}[0].namespaces[1]: nope is not a workload namespace of this stack; a ClusterQueue takes the claim "
            "namespaces of `storage` and the team namespaces of `workloads.namespaces` (team-a, team-b, training)",
            f"{path}[1].namespaces[0]: team-a is in ClusterQueue a already; a namespace's LocalQueue points to one "
            "ClusterQueue: list it once",
            f"{path}: team-b, training are in no ClusterQueue, so jobs there could not be queued; add them to one, or "
            "leave one ClusterQueue's `namespaces` out to give it every namespace no other names",
            f"{path}[0].pools[1]: system has no GPUs, so a ClusterQueue has nothing to admit onto it; name GPU pools "
            "(h100)",
            f"{path}[0].pools[2]: h10 is not a node pool of this stack (did you mean h100?); its GPU pools: h100",
            f"{path}[1].quotas.h100.gpus: 40 GPUs, but h100 holds 32 at its maximum size; ask for at most 32 or raise "
            "the pool's maximum",
            f"{path}[1].quotas.h100.efaDevices: 200 EFA devices, but h100 wires 128 EFA devices at its maximum size; "
            "ask for at most 128",
            f"{path}: pool h100 holds 32 GPUs at its maximum size, but its ClusterQueues' quotas add up to 72 (a 32, "
            "a 40; a queue without a quota on it takes all of it); give each queue on h100 a `quotas.h100.gpus` so "
            "they add up to at most 32 (a cohort lets them borrow the rest)",
            "workloads.queues.admission.backoffBaseSeconds: 600, above backoffMaxSeconds 60; the first requeue delay "
            "must not exceed the longest",
        ]
    )


def test_limits_need_a_cohort_and_lending_stays_within_the_quota() -> None:
    queues = {"clusterQueues": [{"name": "a", "quotas": {"h100": {"gpus": 8, "lendingLimitGpus": 16}}}]}
    found = problems(SYSTEM_POOL, TRAINING_POOL, storage=LUSTRE, workloads={"queues": queues})
    where = "workloads.queues.clusterQueues[0].quotas.h100"
    assert sorted(found) == sorted(
        [
            f"{where}.lendingLimitGpus: set, but the ClusterQueue has no `cohort` to borrow from or lend to; add a "
            "cohort or drop it",
            f"{where}.lendingLimitGpus: 16, above the queue's own 8 GPUs on h100; lend at most 8",
        ]
    )


def test_efa_quota_on_a_pool_without_efa_and_two_open_queues() -> None:
    queues = {
        "clusterQueues": [
            {"name": "a", "pools": ["l40s"], "quotas": {"l40s": {"efaDevices": 4}}},
            {"name": "b", "pools": ["h100"]},
        ]
    }
    found = problems(SYSTEM_POOL, TRAINING_POOL, L40S_TRAINING, storage=LUSTRE, workloads={"queues": queues})
    assert sorted(found) == sorted(
        [
            "workloads.queues.clusterQueues[1].namespaces: missing, and workloads.queues.clusterQueues[0] leaves its "
            "namespaces out too; only one ClusterQueue can take the namespaces no other names: list this one's",
            "workloads.queues.clusterQueues[0].quotas.l40s.efaDevices: 4 EFA devices, but l40s wires no EFA devices; "
            "ask for at most 0",
        ]
    )


def test_queues_with_kueue_off_are_refused() -> None:
    found = problems(
        SYSTEM_POOL, TRAINING_POOL, storage=LUSTRE, workloads={"queues": {}}, addons={"kueue": {"enabled": "off"}}
    )
    assert found == [
        "addons.kueue.enabled: off, but workloads.queues configures Kueue's queues; set it to `auto` or `on`, or "
        "leave workloads.queues out"
    ]


@pytest.mark.program
def test_a_bad_queue_exits_2_through_the_cli(tmp_path: Path, blueprint_cli: Callable[..., CliResult]) -> None:
    stack = parse_yaml(Path("stacks/Pulumi.training.yaml").read_text())
    stack["config"]["gpu-clusters:workloads"] = {
        "queues": {"clusterQueues": [{"name": "a", "quotas": {"h100": {"gpus": 64}}}], "admission": {"timeout": "soon"}}
    }
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(dump_yaml(stack))
    result = blueprint_cli("plan", "--config", str(path))
    assert result.returncode == 2
    assert "workloads.queues.clusterQueues[0].quotas.h100.gpus: 64 GPUs, but h100 holds 32" in result.stderr
    assert "workloads.queues.admission.timeout" in result.stderr
    assert "Traceback" not in result.stderr


def test_kueues_namespace_is_restricted_and_no_workload_namespace() -> None:
    """No default-deny there: the API server reaches the webhook without an allow (docs/training.md)."""
    stack_plan = plan_stack(stack_config(SYSTEM_POOL, TRAINING_POOL, validated=True, storage=LUSTRE))
    (kueue,) = [n for n in stack_plan.namespaces if n.name == KUEUE_NAMESPACE]
    assert (kueue.level, kueue.ownership, kueue.workload) == ("restricted", "created", False)


@pytest.mark.program
def test_the_plan_prints_the_queues(blueprint_cli: Callable[..., CliResult]) -> None:
    table = blueprint_cli("plan", "--stack", "training")
    assert table.returncode == 0
    assert "Kueue queues (docs/training.md, 'Queues and quotas')" in table.stdout
    markdown = blueprint_cli("plan", "--stack", "training", "--format", "markdown")
    assert "| shared | training | h100 (topology aws-network) | 32 | 128 | - | capacity |" in markdown.stdout
