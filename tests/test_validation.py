"""Broken stack configs: each must produce its problem at its key path, all problems at once, nothing registered."""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any

import pytest

from components.errors import ConfigError, Problem
from components.planning.stack_plan import plan_pools
from components.validation import validate, validate_config
from tests.builders import A40, SITE_CONNECTION, SYSTEM

BASE: dict[str, Any] = {
    "cluster": {
        "name": "t",
        "kubernetesVersion": "1.35",
        "endpoint": {"privateAccessCidrs": ["192.168.10.0/24"]},
        "tags": {"team": "ml"},
    },
    "network": {
        "vpcCidr": "10.0.0.0/16",
        "availabilityZones": ["us-east-1a", "us-east-1b"],
        "siteConnection": SITE_CONNECTION,
    },
    "nodePools": [
        SYSTEM,
        {"name": "h100", "role": "training", "instanceType": "p5.48xlarge", "scaling": {"min": 0, "max": 4}},
    ],
    "storage": {"lustre": {"storageCapacityGib": 4800, "dataRepositories": [{"fileSystemPath": "/datasets"}]}},
}


def with_changes(*changes: tuple[str, Any]) -> dict[str, Any]:
    """BASE with values set at dotted paths (`nodePools.1.efa`); a value of DELETE removes the key."""
    config = copy.deepcopy(BASE)
    for path, value in changes:
        *parents, last = path.split(".")
        node: Any = config
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node.insert(int(last), value) if int(last) >= len(node) else node.__setitem__(int(last), value)
        elif value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return config


DELETE = object()
L40S_POOL = {
    "name": "l40s",
    "role": "inference",
    "instanceType": "g6e.12xlarge",
    "scaling": {"min": 1, "max": 4, "mode": "gpu-utilization"},
}
PROMETHEUS = {"monitoring": {"containerInsights": False, "dcgmPrometheus": True}}
#: A valid serving setup on BASE: the l40s pool third, EFS for the weights, the Prometheus path, one workload.
SERVING: tuple[tuple[str, Any], ...] = (
    ("nodePools.2", L40S_POOL),
    ("storage", {"nfs": {"kind": "efs"}}),
    ("addons", PROMETHEUS),
    ("workloads", {"serving": [{"name": "chat", "pool": "l40s", "model": "m"}]}),
)
HYBRID = A40  # four on-prem A40 servers (tests/builders.py)

# (id, config changes, key path, message fragment)
BROKEN: list[tuple[str, tuple[tuple[str, Any], ...], str, str]] = [
    (
        "min above max",
        (("nodePools.1.scaling", {"min": 5, "max": 4}),),
        "nodePools[1] (h100).scaling.min",
        "above max 4",
    ),
    (
        "desired outside range",
        (("nodePools.1.scaling", {"min": 1, "desired": 9, "max": 4}),),
        "nodePools[1] (h100).scaling.desired",
        "outside min 1 .. max 4",
    ),
    (
        "duplicate pool names",
        (("nodePools.2", {"name": "h100", "role": "inference", "instanceType": "g6e.12xlarge"}),),
        "nodePools[2] (h100).name",
        "names must be unique",
    ),
    (
        "EFA on a type without it",
        (("nodePools.1", {"name": "l40s", "role": "inference", "instanceType": "g6e.xlarge", "efa": "on"}),),
        "nodePools[1] (l40s).efa",
        "types with EFA: g4dn.12xlarge",
    ),
    (
        "A40 on an aws pool",
        (("nodePools.1", {"name": "a40", "role": "inference", "gpuModel": "A40", "gpusPerNode": 4}),),
        "nodePools[1] (a40).gpuModel",
        "AWS does not rent A40",
    ),
    (
        "EFA pool across AZs",
        (("nodePools.1.placement", {"availabilityZones": ["us-east-1a", "us-east-1b"]}),),
        "nodePools[1] (h100).placement.availabilityZones",
        "EFA traffic does not cross AZs",
    ),
    (
        "placement group across AZs",
        (
            (
                "nodePools.1",
                {
                    "name": "g5",
                    "role": "inference",
                    "instanceType": "g5.12xlarge",
                    "placement": {"placementGroup": "on"},
                },
            ),
        ),
        "nodePools[1] (g5).placement.placementGroup",
        "one AZ",
    ),
    (
        "unknown instance type",
        (("nodePools.1.instanceType", "p5.48xlarg"),),
        "nodePools[1] (h100).instanceType",
        "p5.48xlarge",
    ),
    (
        "capacity block without id",
        (("nodePools.1.capacity", {"type": "capacity-block"}),),
        "nodePools[1] (h100).capacity.reservationId",
        "needs the Capacity Block id",
    ),
    (
        "spot types on a capacity block",
        (
            (
                "nodePools.1.capacity",
                {
                    "type": "capacity-block",
                    "reservationId": "cr-0123456789abcdef0",
                    "spotInstanceTypes": ["p5en.48xlarge"],
                },
            ),
        ),
        "nodePools[1] (h100).capacity.spotInstanceTypes",
        "spot and capacity blocks cannot be combined",
    ),
    (
        "spot types of another GPU shape",
        (
            (
                "nodePools.1",
                {
                    "name": "l40s",
                    "role": "inference",
                    "instanceType": "g6e.12xlarge",
                    "capacity": {"type": "spot", "spotInstanceTypes": ["g5.12xlarge"]},
                },
            ),
        ),
        "nodePools[1] (l40s).capacity.spotInstanceTypes[0]",
        "g6e.24xlarge",
    ),
    (
        "autoscaled spot types of other vCPUs and memory",
        (
            (
                "nodePools.1",
                {
                    "name": "l40s",
                    "role": "inference",
                    "instanceType": "g6e.12xlarge",
                    "capacity": {"type": "spot", "spotInstanceTypes": ["g6e.24xlarge"]},
                    "scaling": {"min": 0, "max": 4, "mode": "cluster-autoscaler"},
                },
            ),
        ),
        "nodePools[1] (l40s).capacity.spotInstanceTypes[0]",
        "cluster-autoscaler sizes every node of the group as g6e.12xlarge",
    ),
    (
        "unsupported Kubernetes version",
        (("cluster.kubernetesVersion", "1.27"),),
        "cluster.kubernetesVersion",
        "not a Kubernetes version EKS supports",
    ),
    (
        "public endpoint without allow-list",
        (("cluster.endpoint", {"public": True}),),
        "cluster.endpoint.publicAccessCidrs",
        "allow-list",
    ),
    (
        "allow-list of the whole internet",
        (("cluster.endpoint", {"public": True, "publicAccessCidrs": ["0.0.0.0/0"]}),),
        "cluster.endpoint.publicAccessCidrs[0]",
        "no allow-list",
    ),
    (
        "private-only endpoint nobody can reach",
        (("cluster.endpoint", {"private": True, "public": False}),),
        "cluster.endpoint",
        "unreachable from the machine running `pulumi up`",
    ),
    (
        "private access rules without the private endpoint",
        (
            (
                "cluster.endpoint",
                {
                    "private": False,
                    "public": True,
                    "publicAccessCidrs": ["203.0.113.0/24"],
                    "privateAccessCidrs": ["192.168.10.0/24"],
                },
            ),
        ),
        "cluster.endpoint",
        "only apply to the private endpoint",
    ),
    (
        "private access from the whole internet",
        (("cluster.endpoint", {"privateAccessCidrs": ["0.0.0.0/0"]}),),
        "cluster.endpoint.privateAccessCidrs[0]",
        "no allow-list",
    ),
    (
        "deploying from inside a VPC the stack has not created yet",
        (("cluster.endpoint", {"deployFromVpc": True}),),
        "cluster.endpoint.deployFromVpc",
        "no runner is inside it",
    ),
    (
        "AZ of another region",
        (("network.availabilityZones", ["us-east-1a", "us-west-2b"]),),
        "network.availabilityZones[1]",
        "not an Availability Zone of us-east-1 (it is in us-west-2",
    ),
    (
        "subnet outside the VPC",
        (("network.privateSubnetCidrs", ["10.0.0.0/19", "10.9.0.0/19"]),),
        "network.privateSubnetCidrs[1]",
        "outside the VPC CIDR",
    ),
    (
        "existing VPC without private subnets",
        (("network", {"existingVpc": {"vpcId": "vpc-0123456789abcdef0"}}),),
        "network.existingVpc.privateSubnetIds",
        "needs its private subnets",
    ),
    ("one AZ only", (("network.availabilityZones", ["us-east-1a"]),), "network.availabilityZones", "at least 2 AZs"),
    ("typo in a key", (("cluster.kubernetesVersoin", "1.35"),), "cluster.kubernetesVersoin", "unknown key"),
    (
        "RAID0 without NVMe",
        (("nodePools.0.localStorage", "RAID0"),),
        "nodePools[0] (system).localStorage",
        "no instance-store NVMe",
    ),
    (
        "GPU type as system pool",
        (("nodePools.0.instanceType", "g6e.xlarge"),),
        "nodePools[0] (system).instanceType",
        "use a CPU type",
    ),
    (
        "Lustre capacity off-step",
        (("storage.lustre.storageCapacityGib", 3000),),
        "storage.lustre.storageCapacityGib",
        "nearest valid: 2400 or 4800",
    ),
    (
        "Lustre throughput tier",
        (("storage.lustre.perUnitStorageThroughput", 300),),
        "storage.lustre.perUnitStorageThroughput",
        "valid: 125, 250, 500, 1000",
    ),
    (
        "EFA Lustre on scratch",
        (
            ("storage.lustre.deploymentType", "SCRATCH_2"),
            ("storage.lustre.efaEnabled", True),
            ("storage.lustre.perUnitStorageThroughput", DELETE),
        ),
        "storage.lustre.efaEnabled",
        "needs deploymentType PERSISTENT_2",
    ),
    (
        "EFA Lustre without metadata",
        (("storage.lustre.efaEnabled", True), ("storage.lustre.storageCapacityGib", 19200)),
        "storage.lustre.metadata",
        "needs a metadata configuration",
    ),
    (
        "EFA Lustre off its larger step",
        (
            ("storage.lustre.efaEnabled", True),
            ("storage.lustre.metadata", {}),
        ),
        "storage.lustre.storageCapacityGib",
        "multiples of 19200 GiB for EFA",
    ),
    (
        "nine data repositories",
        (("storage.lustre.dataRepositories", [{"fileSystemPath": f"/d{i}"} for i in range(9)]),),
        "storage.lustre.dataRepositories",
        "at most 8",
    ),
    (
        "nested data repository paths",
        (("storage.lustre.dataRepositories", [{"fileSystemPath": "/data"}, {"fileSystemPath": "/data/raw"}]),),
        "storage.lustre.dataRepositories[1].fileSystemPath",
        "overlaps /data",
    ),
    (
        "Lustre away from training",
        (("storage.lustre.availabilityZone", "us-east-1b"),),
        "storage.lustre.availabilityZone",
        "has no training pool",
    ),
    (
        "Lustre away from the inference pool it lists",
        (
            ("nodePools.2", {**L40S_POOL, "placement": {"availabilityZones": ["us-east-1a"]}}),
            ("storage.lustre.pools", ["l40s"]),
            ("storage.lustre.availabilityZone", "us-east-1b"),
        ),
        "storage.lustre.availabilityZone",
        "has no mounting pool",
    ),
    (
        "NFS server without share",
        (("storage.nfs", {"kind": "existing", "server": "nfs.lab"}),),
        "storage.nfs.share",
        "exported path",
    ),
    (
        "hybrid pool with an instance type",
        (("nodePools.2", {**HYBRID, "instanceType": "g6e.12xlarge"}),),
        "nodePools[2] (a40).instanceType",
        "hybrid pools are your own servers",
    ),
    (
        "remote CIDR overlapping the VPC",
        (
            (
                "nodePools.2",
                {**HYBRID, "network": {"remoteNodeCidrs": ["10.0.4.0/24"], "remotePodCidrs": ["192.168.0.0/18"]}},
            ),
        ),
        "nodePools[2] (a40).network.remoteNodeCidrs[0]",
        "overlaps the VPC CIDR",
    ),
    (
        "public remote CIDR",
        (
            (
                "nodePools.2",
                {**HYBRID, "network": {"remoteNodeCidrs": ["8.8.8.0/24"], "remotePodCidrs": ["192.168.0.0/18"]}},
            ),
        ),
        "nodePools[2] (a40).network.remoteNodeCidrs[0]",
        "not RFC 1918",
    ),
    (
        "remote CIDRs overlapping each other",
        (
            (
                "nodePools.2",
                {**HYBRID, "network": {"remoteNodeCidrs": ["192.168.0.0/16"], "remotePodCidrs": ["192.168.128.0/18"]}},
            ),
        ),
        "nodePools[2] (a40).network.remotePodCidrs[0]",
        "overlaps 192.168.0.0/16",
    ),
    (
        "activation limit below node count",
        (("nodePools.2", {**HYBRID, "credentials": {"activationLimit": 2}}),),
        "nodePools[2] (a40).credentials.activationLimit",
        "cannot join 4 nodes",
    ),
    (
        "spare registrations beside an activation limit",
        (("nodePools.2", {**HYBRID, "credentials": {"activationLimit": 6, "spareRegistrations": 3}}),),
        "nodePools[2] (a40).credentials.spareRegistrations",
        "has no effect with activationLimit (6 registrations); remove one of the two",
    ),
    (
        "activation limit above SSM's range",
        (("nodePools.2", {**HYBRID, "credentials": {"activationLimit": 1001}}),),
        "nodePools[2] (a40).credentials.activationLimit",
        "1000",
    ),
    (
        "nodes and spare registrations above SSM's range",
        (("nodePools.2", {**HYBRID, "nodes": 999, "credentials": {"spareRegistrations": 2}}),),
        "nodePools[2] (a40).credentials.spareRegistrations",
        "nodes (999) + spareRegistrations (2) exceeds SSM's registration limit of 1000",
    ),
    (
        "hybrid pool without pod network",
        (("nodePools.2", {**HYBRID, "network": {"remoteNodeCidrs": ["192.168.100.0/24"]}}),),
        "nodePools[2] (a40).network.remotePodCidrs",
        "Cilium hands hybrid pods their addresses",
    ),
    (
        "hybrid pool without pod network and without webhooks",
        (
            (
                "nodePools.2",
                {**HYBRID, "network": {"remoteNodeCidrs": ["192.168.100.0/24"], "webhooksOnHybridNodes": False}},
            ),
        ),
        "nodePools[2] (a40).network.remotePodCidrs",
        "Cilium hands hybrid pods their addresses",
    ),
    (
        "gpu-utilization scaling on CPU",
        (("nodePools.0.scaling", {"min": 2, "max": 3, "mode": "gpu-utilization"}),),
        "nodePools[0] (system).scaling.mode",
        "needs GPUs",
    ),
    (
        "managed add-on pin below minimum",
        (("addons", {"managed": {"pins": {"vpc-cni": "v1.18.0-eksbuild.1"}}}),),
        "addons.managed.pins.vpc-cni",
        "below the minimum",
    ),
    (
        "spot override without the EFA cards",
        (
            (
                "nodePools.1",
                {
                    "name": "l40s",
                    "role": "training",
                    "instanceType": "g6e.24xlarge",
                    "capacity": {"type": "spot", "spotInstanceTypes": ["g6e.12xlarge"]},
                },
            ),
        ),
        "nodePools[1] (l40s).capacity.spotInstanceTypes[0]",
        "lacks EFA cards",
    ),
    (
        "label in a kubelet-reserved domain",
        (("nodePools.1.labels", {"node-role.kubernetes.io/gpu": "true"}),),
        "nodePools[1] (h100).labels.node-role.kubernetes.io/gpu",
        "kubelet refuses",
    ),
    (
        "taint key twice with the autoscaler",
        (("nodePools.1.taints", [{"key": "gpu", "effect": "NoSchedule"}, {"key": "gpu", "effect": "NoExecute"}]),),
        "nodePools[1] (h100).taints",
        "one value:Effect per key",
    ),
    (
        "pod CIDR too small for the servers",
        (
            (
                "nodePools.2",
                {
                    **HYBRID,
                    "network": {"remoteNodeCidrs": ["192.168.100.0/24"], "remotePodCidrs": ["192.168.128.0/25"]},
                },
            ),
        ),
        "nodePools[2] (a40).network.remotePodCidrs",
        "room for 1 node pod blocks",
    ),
    (
        "activation settings with Roles Anywhere",
        (
            (
                "nodePools.2",
                {
                    **HYBRID,
                    "credentials": {
                        "provider": "iam-roles-anywhere",
                        "activationLimit": 4,
                        "trustAnchorCertificate": "-----BEGIN CERTIFICATE-----x",
                    },
                },
            ),
        ),
        "nodePools[2] (a40).credentials.activationLimit",
        "applies to SSM activations",
    ),
    (
        "gpu-utilization without a serving workload",
        (("nodePools.1", L40S_POOL), ("storage", {})),
        "nodePools[1] (l40s).scaling.mode",
        "add a workloads.serving entry with pool: l40s",
    ),
    (
        "serving without the Prometheus path",
        (*SERVING, ("addons", {})),
        "workloads.serving[0].pool",
        "dcgmPrometheus: true",
    ),
    (
        "serving without NFS",
        (*SERVING, ("storage", {})),
        "workloads.serving[0].model",
        "storage.nfs",
    ),
    (
        "serving on a training pool",
        (*SERVING, ("workloads", {"serving": [{"name": "chat", "pool": "h100", "model": "m"}]})),
        "workloads.serving[0].pool",
        "name an inference pool",
    ),
    (
        "serving on no pool",
        (*SERVING, ("workloads", {"serving": [{"name": "chat", "pool": "l4", "model": "m"}]})),
        "workloads.serving[0].pool",
        "no node pool l4",
    ),
    (
        "replica GPUs that do not divide the node's",
        (*SERVING, ("workloads", {"serving": [{"name": "chat", "pool": "l40s", "model": "m", "gpusPerReplica": 3}]})),
        "workloads.serving[0].gpusPerReplica",
        "does not divide the 4 GPUs",
    ),
    (
        "more replicas than the pool holds",
        (
            *SERVING,
            ("workloads", {"serving": [{"name": "chat", "pool": "l40s", "model": "m", "replicas": {"max": 17}}]}),
        ),
        "workloads.serving[0].replicas.max",
        "set at most 16",
    ),
    (
        "a serving rule beside the pool's",
        (
            *SERVING,
            (
                "workloads",
                {"serving": [{"name": "chat", "pool": "l40s", "model": "m", "autoscaling": {"scaleOutBy": 1}}]},
            ),
        ),
        "workloads.serving[0].autoscaling",
        "nodePools[2] (l40s).scaling.gpuUtilization",
    ),
    (
        "a grace period longer than the drain",
        (
            *SERVING,
            (
                "workloads",
                {"serving": [{"name": "chat", "pool": "l40s", "model": "m", "terminationGraceSeconds": 300}]},
            ),
            ("addons", {**PROMETHEUS, "nodeTerminationHandler": {"drainTimeoutSeconds": 120}}),
        ),
        "workloads.serving[0].terminationGraceSeconds",
        "drainTimeoutSeconds",
    ),
    (
        "two serving workloads with one name",
        (
            *SERVING,
            (
                "workloads",
                {
                    "serving": [
                        {"name": "chat", "pool": "l40s", "model": "m"},
                        {"name": "chat", "pool": "l40s", "model": "n"},
                    ]
                },
            ),
        ),
        "workloads.serving[1].name",
        "more than one serving workload",
    ),
    (
        "price expander",
        (("addons", {"clusterAutoscaler": {"expander": "price"}}),),
        "addons.clusterAutoscaler.expander",
        "only on GCE",
    ),
    (
        "Lustre mounted by a hybrid pool",
        (("nodePools.2", HYBRID), ("storage.lustre.pools", ["h100", "a40"])),
        "storage.lustre.pools[1]",
        "does not run on EKS Hybrid Nodes",
    ),
    (
        "the Auto Scaling role setting that is gone",
        (("cluster.autoscalingServiceLinkedRole", "existing"),),
        "cluster.autoscalingServiceLinkedRole",
        "AWSServiceRoleForAutoScaling_<cluster.name>.<aws:region>",
    ),
    (
        "claim name not a Kubernetes name",
        (("storage.lustre.kubernetes", {"claimName": "Lustre_Claim"}),),
        "storage.lustre.kubernetes.claimName",
        "not a Kubernetes name",
    ),
]


@pytest.mark.parametrize(("changes", "path", "fragment"), [case[1:] for case in BROKEN], ids=[c[0] for c in BROKEN])
def test_broken_config_reports_its_problem(changes: tuple[tuple[str, Any], ...], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(with_changes(*changes), region="us-east-1")
    matching = [p for p in caught.value.problems if p.path == path]
    assert matching, f"no problem at {path}; got: {caught.value.problems}"
    assert any(fragment in p.message for p in matching), matching


def test_the_longest_cluster_name_that_fits_the_auto_scaling_role_is_valid() -> None:
    """25 characters and `.us-east-1` make the 35-character suffix IAM allows after the role's prefix."""
    validate(with_changes(("cluster.name", "c" * 25)), region="us-east-1")


def test_base_config_is_valid() -> None:
    spec = validate(BASE, region="us-east-1")
    assert [p.name for p in spec.node_pools] == ["system", "h100"]


def test_serving_setup_is_valid() -> None:
    spec = validate(with_changes(*SERVING), region="us-east-1")
    assert [(w.name, w.pool, w.gpus_per_replica) for w in spec.workloads.serving] == [("chat", "l40s", 1)]


def test_every_problem_is_reported_at_once() -> None:
    config = with_changes(
        ("cluster.kubernetesVersion", "1.27"),
        ("cluster.bogus", 1),
        ("nodePools.1.scaling", {"min": 5, "max": 4}),
        ("storage.lustre.storageCapacityGib", 3000),
    )
    with pytest.raises(ConfigError) as caught:
        validate(config, region="us-east-1")
    paths = {p.path for p in caught.value.problems}
    assert {
        "cluster.kubernetesVersion",
        "cluster.bogus",
        "nodePools[1] (h100).scaling.min",
        "storage.lustre.storageCapacityGib",
    } <= paths
    assert str(caught.value).count("\n") == len(caught.value.problems)


def test_a_system_pool_is_added_when_none_is_named() -> None:
    config = with_changes(("nodePools", [BASE["nodePools"][1]]))
    spec = validate(config, region="us-east-1")
    assert [p.name for p in spec.node_pools] == ["h100"]  # the file's pools; the plan adds the system pool
    system = next(p for p in plan_pools(spec) if p.name == "system")
    assert (system.role, system.pool.instance_type, system.min_nodes) == ("system", "m7i.xlarge", 2)


def test_bad_region_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        validate(BASE, region="moon-base-1")
    [problem] = caught.value.problems
    assert problem.path == "aws:region"
    assert problem.message.startswith("'moon-base-1' is not an AWS region name")


def test_problem_reads_path_then_message() -> None:
    assert str(Problem("nodePools[1].efa", "x")) == "nodePools[1].efa: x"


def test_every_rule_is_small_documented_and_registered_once() -> None:
    """Validation is a list of small named rules, each stating its rule (and its limit's source) in its docstring."""
    from components.validation.registry import BY_CONCERN, RULES

    names = [rule.__name__ for rule in RULES]
    assert len(names) == len(set(names))
    for rules in BY_CONCERN.values():
        for rule in rules:
            assert rule.__module__.startswith("components.validation."), rule
            assert len(inspect.getdoc(rule) or "") > 40, f"{rule.__name__} needs a docstring stating its rule"
            assert len(inspect.getsourcelines(rule)[0]) <= 40, f"{rule.__name__} is longer than 40 lines"


def test_unknown_keys_are_refused_from_the_whole_pulumi_config() -> None:
    """What `pulumi up` hands the program: every key, objects as JSON text; misspelt keys are refused there too."""
    config = {
        "aws:region": "us-east-1",
        "aws:regoin": "us-west-2",
        "aws:profile": "ml",
        "gpu-clusters:cluster": json.dumps(BASE["cluster"]),
        "gpu-clusters:network": json.dumps(BASE["network"]),
        "gpu-clusters:nodepools": json.dumps(BASE["nodePools"]),
        "pulumi:tags": "{}",
    }
    with pytest.raises(ConfigError) as caught:
        validate_config(config, project="gpu-clusters")
    assert [(p.path, "did you mean" in p.message) for p in caught.value.problems] == [
        ("aws:regoin", True),
        ("gpu-clusters:nodepools", True),
    ]


def test_the_program_sees_every_config_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `pulumi up` the keys arrive through the SDK's config (or PULUMI_CONFIG); `all_config` reads them all."""
    from components.program import all_config

    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-clusters:nodepools": "[]", "aws:region": "us-east-1"}))
    assert {"gpu-clusters:nodepools", "aws:region"} <= set(all_config())


def test_section_given_as_text_is_a_problem_not_a_crash() -> None:
    config = {"gpu-clusters:cluster": "not json", "gpu-clusters:nodePools": '"a string"', "aws:region": "us-east-1"}
    with pytest.raises(ConfigError) as caught:
        validate_config(config, project="gpu-clusters")
    assert {"cluster", "nodePools"} <= {p.path for p in caught.value.problems}


def test_every_hybrid_only_key_refused_on_an_aws_pool_says_what_aws_pools_have_instead() -> None:
    from components.validation.pools import AWS_POOLS_INSTEAD, HYBRID_ONLY_KEYS

    assert set(AWS_POOLS_INSTEAD) == set(HYBRID_ONLY_KEYS.values())
