"""The reference training job (`workloads.training`): its config rules, the JobSet `blueprint training-job`
prints, the script's ConfigMap the stack creates, the JobSet add-on, and the plan summary's figures."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.catalog import images, instance_types
from components.config import TrainingModel
from components.planning import training_job as tj
from components.planning.hugepages import hugepages_quantity
from components.planning.nccl_environment import nccl_environment
from components.planning.node_health import STARTUP_TAINT_KEY
from components.planning.stack_plan import plan_stack
from components.planning.training_platform import LOCAL_QUEUE_NAME, NETWORK_TOPOLOGY_LEVELS, QUEUE_NAME_LABEL
from components.training import SCRIPT_PATH
from components.yaml_loader import dump_yaml, parse_yaml
from tests.builders import CliResult, shipped_stack

STACKS = Path(__file__).resolve().parents[1] / "stacks"
H100 = {"name": "h100", "role": "training", "instanceType": "p5.48xlarge", "scaling": {"min": 0, "max": 4}}
LUSTRE = {"lustre": {"name": "scratch", "kubernetes": {"namespace": "training", "claimName": "lustre-scratch"}}}


def _plan(**training: Any) -> tj.TrainingJobPlan:
    from tests.builders import stack_config

    spec = stack_config(
        {"name": "system", "role": "system", "instanceType": "m7i.xlarge", "scaling": {"min": 2, "max": 3}},
        H100,
        storage=LUSTRE,
        workloads={"training": {"pool": "h100", **training}},
        validated=True,
    )
    job = plan_stack(spec).training
    assert job is not None
    return job


def _pod(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


# ------------------------------------------------------------------------------------------------- the manifest
def test_every_worker_takes_every_gpu_efa_device_and_huge_page_of_its_node() -> None:
    job = _plan(nodes=3)
    manifest = tj.jobset_manifest(job)
    rjob = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (rjob["parallelism"], rjob["completions"], rjob["completionMode"]) == (3, 3, "Indexed")
    container = _pod(manifest)["spec"]["containers"][0]
    limits = container["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "10256Mi"}
    assert hugepages_quantity(job.pool) == "10256Mi"
    requests = container["resources"]["requests"]
    assert {k: requests[k] for k in limits} == limits and requests["memory"] == tj.WORKER_MEMORY
    assert (job.gpus, job.efa_devices) == (24, 96)


def test_the_workers_run_torchrun_with_the_scripts_flags_and_rendezvous_on_worker_zero() -> None:
    job = _plan(name="llm", nodes=2, steps=500, checkpointInterval=50, model={"layers": 4, "hiddenSize": 1024})
    command = _pod(tj.jobset_manifest(job))["spec"]["containers"][0]["command"]
    assert command[:6] == [
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node=8",
        "--node-rank=$(NODE_RANK)",
        "--master-addr=llm-workers-0-0.llm",
        "--master-port=29500",
    ]
    assert command[6] == "/opt/train/train_reference.py"
    assert command[7:] == [
        "--steps=500",
        "--checkpoint-interval=50",
        "--checkpoint-dir=/mnt/lustre/llm/checkpoints",
        "--layers=4",
        "--hidden-size=1024",
        f"--metrics-port={tj.METRICS_PORT}",
    ]


def test_the_scripts_own_flags_are_the_ones_the_manifest_passes() -> None:
    """The flags come from `programs/train_reference.py`'s argument parser, read from its source."""
    tree = ast.parse(SCRIPT_PATH.read_text())
    flags = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "add_argument"
        and isinstance(node.args[0], ast.Constant)
    }
    passed = {arg.split("=")[0] for arg in tj.worker_command(_plan())[7:]}
    assert passed <= flags


def _script_constant(name: str) -> Any:
    """A module-level constant of `programs/train_reference.py`, read from its source (importing it needs torch)."""
    tree = ast.parse(SCRIPT_PATH.read_text())
    (value,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and node.value is not None
        and any(
            getattr(t, "id", None) == name for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    assert value is not None
    return ast.literal_eval(value)


def test_the_script_serves_the_planned_metrics() -> None:
    prefix, metrics = _script_constant("METRIC_PREFIX"), _script_constant("METRICS")
    assert tuple(prefix + key for key, _, _ in metrics) == tj.TRAINING_METRICS
    # Prometheus's naming: counters end in `_total`, nothing else does
    assert all((kind == "counter") == key.endswith("_total") for key, kind, _ in metrics)


def test_the_workers_serve_metrics_on_a_named_port_and_report_the_restart_attempt() -> None:
    container = _pod(tj.jobset_manifest(_plan()))["spec"]["containers"][0]
    assert {"name": tj.METRICS_PORT_NAME, "containerPort": tj.METRICS_PORT} in container["ports"]
    assert len({p["containerPort"] for p in container["ports"]}) == len(container["ports"])
    env = {e["name"]: e for e in container["env"]}
    assert _script_constant("RESTART_ATTEMPT_ENV") == tj.RESTART_ATTEMPT_ENV
    assert env[tj.RESTART_ATTEMPT_ENV]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"}
    }


def test_the_pod_monitor_scrapes_every_worker_of_the_jobset_labelled_with_its_name() -> None:
    job = _plan(name="llm")
    monitor = tj.pod_monitor(job, {"release": "kube-prometheus-stack"})
    assert (monitor["kind"], monitor["metadata"]["name"], monitor["metadata"]["namespace"]) == (
        "PodMonitor",
        "llm",
        "training",
    )
    assert monitor["metadata"]["labels"] == {"release": "kube-prometheus-stack"}
    assert monitor["spec"]["selector"] == {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "llm"}}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == (tj.METRICS_PORT_NAME, "/metrics")
    # Prometheus's discovery label of the pod label: every character but letters, digits and `_` becomes `_`
    assert endpoint["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_label_jobset_sigs_k8s_io_jobset_name"], "targetLabel": "jobset"}
    ]


@pytest.mark.program
def test_the_stack_scrapes_the_job_on_the_prometheus_path_only(tmp_path: Path) -> None:
    run = shipped_stack("training").run
    (monitor,) = [
        r for r in run.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor") if r.name.endswith("-metrics")
    ]
    assert monitor.inputs["metadata"] == {
        "name": "reference",
        "namespace": "training",
        "labels": {"release": "kube-prometheus-stack"},
    }
    # its CRD comes with kube-prometheus-stack
    (prometheus,) = [
        r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kube-prometheus-stack"
    ]
    assert prometheus.urn in monitor.depends_on
    raw = parse_yaml((STACKS / "Pulumi.training.yaml").read_text())
    raw["config"]["gpu-clusters:addons"] = {"monitoring": {"containerInsights": True, "dcgmPrometheus": False}}
    (tmp_path / "Pulumi.ci.yaml").write_text(dump_yaml(raw))
    from blueprint.plan.plan import run_stack_under_mocks

    planned = run_stack_under_mocks(config_file=tmp_path / "Pulumi.ci.yaml")
    assert planned.run.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor") == []


def test_the_parameter_count_follows_the_scripts_model() -> None:
    """The script's input and output widths, read from its source, are the ones the checkpoint size is computed
    from; a model of 8 x 4096 has 117.8 M parameters, a 1.41 GB checkpoint (12 bytes each)."""
    constants = {
        node.targets[0].id: node.value.value
        for node in ast.parse(SCRIPT_PATH.read_text()).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }
    assert (constants["INPUT_SIZE"], constants["OUTPUT_SIZE"]) == (tj.SCRIPT_INPUTS, tj.SCRIPT_OUTPUTS)
    model = TrainingModel(layers=8, hidden_size=4096)
    assert tj.model_parameters(model) == 65 * 4096 + 7 * (4096 * 4096 + 4096) + 4097 * 8 == 117_768_200
    assert tj.checkpoint_bytes(model) == 1_413_218_400


def test_the_nccl_environment_is_the_catalogs_for_the_instance_type() -> None:
    env = {e["name"]: e.get("value") for e in _pod(tj.jobset_manifest(_plan()))["spec"]["containers"][0]["env"]}
    p5 = nccl_environment(instance_types()["p5.48xlarge"])
    assert p5 == {
        "FI_PROVIDER": "efa",
        "FI_EFA_FORK_SAFE": "1",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
    }
    assert {k: env[k] for k in p5} == p5
    assert nccl_environment(instance_types()["g6e.xlarge"]) == {}  # no EFA: NCCL's sockets, nothing to set


def test_the_pods_are_restricted_non_root_without_added_capabilities() -> None:
    pod = _pod(tj.jobset_manifest(_plan()))["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = pod["containers"][0]["securityContext"]
    assert container["allowPrivilegeEscalation"] is False and container["capabilities"] == {"drop": ["ALL"]}
    assert "add" not in container["capabilities"] and "privileged" not in container
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False


def test_the_pods_mount_the_script_the_namespaces_lustre_directory_and_a_memory_shm() -> None:
    pod = _pod(tj.jobset_manifest(_plan()))["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["script"]["configMap"] == {"name": "reference-script"}
    assert volumes["lustre"]["persistentVolumeClaim"] == {"claimName": "lustre-scratch"}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory"}
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["lustre"] == {"name": "lustre", "mountPath": "/mnt/lustre", "subPath": "training"}
    assert mounts["dshm"]["mountPath"] == "/dev/shm" and mounts["script"]["readOnly"] is True


def test_the_job_goes_to_the_local_queue_placed_by_network_topology_on_its_pool() -> None:
    manifest = tj.jobset_manifest(_plan())
    assert manifest["metadata"]["labels"] == {QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME}
    assert manifest["metadata"]["namespace"] == "training"
    template = _pod(manifest)
    assert template["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"
    }
    assert tj.PREFERRED_TOPOLOGY_LEVEL in NETWORK_TOPOLOGY_LEVELS
    assert template["spec"]["nodeSelector"] == {"gpu-clusters/pool": "h100"}
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in template["spec"][
        "tolerations"
    ]


def test_a_job_on_a_pool_without_network_topology_asks_for_no_topology_placement() -> None:
    """g5 nodes get no network-layer labels, so their flavor names no Topology; a pod set asking for topology
    placement would fit no flavor and wait forever."""
    from tests.builders import stack_config

    g5 = {"name": "g5", "role": "training", "instanceType": "g5.48xlarge", "scaling": {"min": 0, "max": 2}}
    spec = stack_config(
        {"name": "system", "role": "system", "instanceType": "m7i.xlarge", "scaling": {"min": 2, "max": 3}},
        g5,
        storage=LUSTRE,
        workloads={"training": {"pool": "g5"}},
        validated=True,
    )
    plan = plan_stack(spec)
    assert plan.job_queues is not None and [f.topology for f in plan.job_queues.flavors if f.name == "g5"] == [False]
    assert plan.training is not None
    assert _pod(tj.jobset_manifest(plan.training))["metadata"]["annotations"] == {}


def test_node_failures_restart_the_job_without_using_up_its_restarts() -> None:
    manifest = tj.jobset_manifest(_plan(maxRestarts=5))
    assert manifest["spec"]["failurePolicy"] == {
        "maxRestarts": 5,
        "rules": [
            {
                "name": "nodeFailure",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
            },
            {"name": "jobFailure", "action": "RestartJobSet"},
        ],
    }
    job = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    # one failed pod fails the Job: a disruption with reason PodFailurePolicy, anything else BackoffLimitExceeded
    assert job["backoffLimit"] == 0
    assert job["podFailurePolicy"] == {
        "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    }
    assert manifest["spec"]["network"] == {"enableDNSHostnames": True}


def test_the_default_image_is_the_catalogs_and_a_configured_one_wins() -> None:
    default = _pod(tj.jobset_manifest(_plan()))["spec"]["containers"][0]["image"]
    assert default == images.image("pytorch-training").reference
    mine = _pod(tj.jobset_manifest(_plan(image="example.com/me/torch:1")))["spec"]["containers"][0]["image"]
    assert mine == "example.com/me/torch:1"


def test_the_checkpoint_write_time_is_its_size_over_the_lustre_throughput() -> None:
    job = _plan(model={"layers": 16, "hiddenSize": 8192})
    # 4,800 GiB at 250 MB/s/TiB: 1,171.875 MB/s (components.planning.lustre.throughput_mbps)
    assert job.lustre_mbps == 1171.875
    assert job.checkpoint_write_seconds == round(job.checkpoint_bytes / 1171.875e6, 1)
    assert tj.checkpoint_write_seconds(4_000_000_000, 2000.0) == 2.0


# ----------------------------------------------------------------------------------------------- the CLI
def test_training_job_prints_the_jobset_of_the_stack(blueprint_cli: Callable[..., CliResult]) -> None:
    result = blueprint_cli("training-job", "--stack", "training")
    assert result.returncode == 0, result.stderr
    manifest = parse_yaml(result.stdout)
    assert (manifest["apiVersion"], manifest["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert manifest["metadata"] == {
        "name": "reference",
        "namespace": "training",
        "labels": {QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME},
    }
    container = _pod(manifest)["spec"]["containers"][0]
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
    as_json = blueprint_cli("training-job", "--stack", "training", "--format", "json")
    assert json.loads(as_json.stdout) == manifest


def test_the_job_waits_for_the_health_gate_on_its_nodes() -> None:
    """The pool's nodes register with the health gate's startup taint; the job does not tolerate it, so no worker
    lands on a node before the gate passes it (or on one it failed)."""
    job = _plan()
    assert STARTUP_TAINT_KEY in {t.key for t in job.pool.registration_taints}
    keys = {t["key"] for t in _pod(tj.jobset_manifest(job))["spec"]["tolerations"]}
    assert STARTUP_TAINT_KEY not in keys and keys == {t.key for t in job.pool.taints}


def test_training_job_of_a_stack_without_one_is_a_usage_error(blueprint_cli: Callable[..., CliResult]) -> None:
    result = blueprint_cli("training-job", "--stack", "inference")
    assert result.returncode == 64
    assert "has no workloads.training" in result.stderr and result.stdout == ""


@pytest.mark.program
def test_an_invalid_training_job_is_refused_with_every_problem_at_once(
    tmp_path: Path, blueprint_cli: Callable[..., CliResult]
) -> None:
    raw = parse_yaml((STACKS / "Pulumi.training.yaml").read_text())
    raw["config"]["gpu-clusters:workloads"] = {
        "training": {"pool": "h100", "nodes": 9, "namespace": "other", "steps": 10, "checkpointInterval": 20}
    }
    raw["config"]["gpu-clusters:storage"]["lustre"]["workloadDirectories"] = {"enabled": False}
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(dump_yaml(raw))
    result = blueprint_cli("training-job", "--config", str(stack))
    assert result.returncode == 2 and result.stdout == ""
    for line in (
        "workloads.training.nodes: 9 workers, one per node, but pool h100 has at most 4 nodes",
        "workloads.training.namespace: other does not mount the Lustre claim, which is in training",
        "workloads.training.namespace: the job runs as a non-root user and needs the namespace's directory",
        "workloads.training.checkpointInterval: 20 steps between checkpoints, more than the 10 steps",
    ):
        assert line in result.stderr
    assert "Traceback" not in result.stderr
    plan = blueprint_cli("plan", "--config", str(stack))
    assert plan.returncode == 2


@pytest.mark.parametrize(
    ("training", "storage", "message"),
    [
        ({"pool": "nope"}, LUSTRE, "workloads.training.pool: no node pool nope"),
        ({"pool": "system"}, LUSTRE, "workloads.training.pool: system has no GPUs"),
        ({"pool": "h100"}, {}, "workloads.training: the job writes its checkpoints to FSx for Lustre"),
        (
            {"pool": "h100"},
            {"lustre": {**LUSTRE["lustre"], "pools": ["l40s"]}},
            "workloads.training.pool: h100 does not mount the Lustre file system",
        ),
    ],
)
def test_the_job_needs_a_gpu_pool_that_mounts_lustre(training: Any, storage: Any, message: str) -> None:
    from components.errors import ConfigError
    from tests.builders import stack_config

    l40s = {"name": "l40s", "role": "inference", "instanceType": "g6e.12xlarge", "scaling": {"min": 0, "max": 2}}
    with pytest.raises(ConfigError) as raised:
        stack_config(
            {"name": "system", "role": "system", "instanceType": "m7i.xlarge", "scaling": {"min": 2, "max": 3}},
            H100,
            l40s,
            storage=storage,
            workloads={"training": training},
            validated=True,
        )
    assert message in str(raised.value)


# ----------------------------------------------------------------------------------- what the stack registers
@pytest.mark.program
def test_the_stack_ships_the_script_as_a_config_map_in_the_jobs_namespace() -> None:
    run = shipped_stack("training").run
    maps = [
        r for r in run.of_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"] == "reference-script"
    ]
    assert len(maps) == 1
    assert maps[0].inputs["metadata"]["namespace"] == "training"
    assert maps[0].inputs["data"] == {"train_reference.py": SCRIPT_PATH.read_text()}
    namespace = next(
        r for r in run.of_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == "training"
    )
    assert namespace.urn in maps[0].depends_on


@pytest.mark.program
def test_the_stack_starts_no_gpu_work_by_itself() -> None:
    """The JobSet controller is installed (its component is `gpu-clusters:index:JobSet`); no JobSet, Job or Pod is
    created."""
    types = {r.type for r in shipped_stack("training").run.registrations if r.custom}
    assert not any(t.endswith((":JobSet", ":Job", ":Pod")) for t in types)
    assert not any("jobset.x-k8s.io" in t for t in types)


@pytest.mark.program
def test_the_jobset_release_is_pinned_on_the_system_pool_in_its_namespace() -> None:
    run = shipped_stack("training").run
    release = next(r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "jobset")
    inputs = release.inputs
    assert (inputs["chart"], inputs["version"], inputs["namespace"]) == (
        "oci://registry.k8s.io/jobset/charts/jobset",
        "0.12.0",
        "jobset-system",
    )
    values = inputs["values"]
    assert values["image"] == {
        "repository": "registry.k8s.io/jobset/jobset",
        "tag": "v0.12.0",
        "pullPolicy": "IfNotPresent",
    }
    assert values["controller"]["nodeSelector"] == {"gpu-clusters/role": "system"}
    policies = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r.inputs["metadata"]["namespace"] == "jobset-system"
    }
    assert policies["jobset-webhook"]["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 9443}]}]
    assert policies["jobset-webhook"]["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "jobset"


@pytest.mark.program
def test_jobset_runs_where_a_training_pool_or_job_is_and_nowhere_else() -> None:
    enabled = {stack: shipped_stack(stack).exports["addons"] for stack in ("training", "hybrid", "inference")}
    assert "jobset" in enabled["training"] and "jobset" in enabled["hybrid"]
    assert "jobset" not in enabled["inference"]


@pytest.mark.program
def test_the_plan_summary_shows_the_jobs_gpus_and_checkpoint_write_time() -> None:
    summary = shipped_stack("training").plan["summary"]["trainingJob"]
    assert summary == {
        "name": "reference",
        "namespace": "training",
        "pool": "h100",
        "nodes": 2,
        "gpus": 16,
        "efaDevices": 64,
        "maxRestarts": 3,
        "modelParameters": 117_768_200,
        "checkpointBytes": 1_413_218_400,
        # 9,600 GiB at 500 MB/s/TiB
        "lustreThroughputMBps": 4687.5,
        "checkpointWriteSeconds": 0.3,
    }
    assert shipped_stack("inference").plan["summary"]["trainingJob"] is None
