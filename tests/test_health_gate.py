"""The health gate on the stack side: GPU pools register with the startup taint (and only they), the node agents
tolerate it and the work does not, cluster-autoscaler's scale-from-zero templates leave it out, the check pod asks for
every device of the node and runs the catalog's checks, and the health loop add-on is planned with least privilege."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.managed_addons import addon_configuration
from components.planning import node_health
from components.planning.addons import node_health as loop_addon
from components.planning.addons.device_plugins import efa_device_plugin_values, nvidia_device_plugin_values
from components.planning.addons.monitoring import node_exporter_values
from components.planning.addons.placement import tolerations_for
from components.planning.autoscaler_tags import TAINT_TAG_PREFIX, autoscaler_tags, node_template_tags
from components.planning.health_checks import check_pod_template, check_resources, check_script
from components.planning.hybrid.cilium import cilium_values
from components.planning.namespaces import plan_namespaces
from components.planning.network_policies import network_policies
from components.planning.pools import STARTUP_TAINT
from components.planning.stack_plan import plan_stack
from components.planning.tolerations import key_tolerations, tolerates
from programs.node_health.checks import Settings
from tests.builders import HYBRID_POOL, INFERENCE_POOL, SYSTEM_POOL, TRAINING_POOL, addon_stack, pool, shipped_stack


def plans_of(*pools: dict[str, Any], **addons: Any) -> dict[str, Any]:
    spec = addon_stack(*pools, addons=addons)
    return {p.name: p for p in plan_stack(spec).pools}


# ------------------------------------------------------------------------------------------------ the startup taint
def test_gpu_pools_cloud_and_on_prem_register_with_the_startup_taint_and_cpu_pools_do_not() -> None:
    plans = plans_of(SYSTEM_POOL, TRAINING_POOL, INFERENCE_POOL, HYBRID_POOL)
    assert node_health.STARTUP_TAINT_KEY.startswith("startup-taint.cluster-autoscaler.kubernetes.io/")
    for name in ("h100", "l40s", "a40"):
        assert plans[name].startup_taints == (STARTUP_TAINT,)
        assert plans[name].registration_taints == (*plans[name].taints, STARTUP_TAINT)
        assert STARTUP_TAINT not in plans[name].taints  # what work tolerates
    assert plans["system"].startup_taints == ()


@pytest.mark.parametrize(
    ("changed", "addons"),
    [
        (pool(TRAINING_POOL, healthGate={"enabled": False}), {}),
        (pool(TRAINING_POOL), {"nodeHealth": {"enabled": False}}),
        (
            pool(TRAINING_POOL, devicePlugin={"migDevices": {"1g.10gb": 7}}),
            {"nvidiaDevicePlugin": {"migStrategy": "single"}},
        ),
    ],
    ids=["gate-off", "loop-off", "mig-pool"],
)
def test_a_pool_without_the_gate_registers_without_the_taint_and_no_loop_runs_for_it(
    changed: dict[str, Any], addons: dict[str, Any]
) -> None:
    spec = addon_stack(SYSTEM_POOL, changed, addons=addons)
    stack = plan_stack(spec)
    assert all(p.startup_taints == () for p in stack.pools)
    assert not stack.addons.on("node-health")


def test_scale_from_zero_templates_leave_the_startup_taint_out() -> None:
    """cluster-autoscaler strips startup taints from templates itself (1.35 `SanitizeTaints`); the tags leave it out
    anyway, so a pending pod that tolerates the pool's taints but not the gate's still scales the pool up."""
    plan = plans_of(SYSTEM_POOL, TRAINING_POOL)["h100"]
    tags = autoscaler_tags("gpu", plan)
    assert f"{TAINT_TAG_PREFIX}{STARTUP_TAINT.key}" not in tags
    work = tolerations_for([plan], critical_addons=False, startup=False)
    template_taints = [
        k.removeprefix(TAINT_TAG_PREFIX) for k in node_template_tags(plan) if k.startswith(TAINT_TAG_PREFIX)
    ]
    assert template_taints == [t.key for t in plan.taints]
    assert all(tolerates(work, t) for t in plan.taints)
    assert not tolerates(work, STARTUP_TAINT)


def test_node_agents_tolerate_the_startup_taint_and_serving_replicas_do_not() -> None:
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, INFERENCE_POOL, HYBRID_POOL)
    stack = plan_stack(spec)
    gpu = [p for p in stack.pools if p.is_gpu]
    agents = {
        "nvidia-device-plugin": nvidia_device_plugin_values(spec.addons.nvidia_device_plugin, gpu)["tolerations"],
        "efa-device-plugin": efa_device_plugin_values(stack.pools)["tolerations"],
        "node-exporter": node_exporter_values(stack.pools)["tolerations"],
        "csi node plugins": key_tolerations(stack.pools),
    }
    agents["cilium (hybrid nodes)"] = cilium_values(stack.pools)["tolerations"]
    for name, tolerations in agents.items():
        assert tolerates(tolerations, STARTUP_TAINT), name
    # the EBS CSI node plugin keeps the EKS add-on's default of tolerating every taint: the stack sets none for it
    assert "node" not in (addon_configuration("aws-ebs-csi-driver") or {})
    inference = next(p for p in stack.pools if p.name == "l40s")
    assert not tolerates(tolerations_for([inference], critical_addons=False, startup=False), STARTUP_TAINT)


# ------------------------------------------------------------------------------------------------- the check pod
def test_the_p5_check_asks_for_every_gpu_and_efa_device_and_checks_nvlink_efa_and_dcgm() -> None:
    plan = plans_of(SYSTEM_POOL, pool(TRAINING_POOL, healthGate={"dcgmLevel": 2}))["h100"]
    assert check_resources(plan) == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    pod = check_pod_template(plan, 1200)
    spec = pod["spec"]
    container = spec["containers"][0]
    assert container["resources"]["limits"] == container["resources"]["requests"] == check_resources(plan)
    assert container["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    assert all(tolerates(spec["tolerations"], t) for t in plan.registration_taints)
    assert spec["activeDeadlineSeconds"] == 1200 and spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    script = container["command"][2]
    assert '[ "$count" -eq 8 ]' in script
    assert '[ "$up" -ge 144 ]' in script  # 18 links per GPU (catalog) x 8
    assert '[ "$efa" -ge 32 ]' in script
    assert "dcgmi diag -r 2 -j" in script


def test_a_pcie_pool_without_nvlink_or_efa_skips_those_steps_and_a_time_sliced_one_takes_every_replica() -> None:
    plan = plans_of(SYSTEM_POOL, pool(INFERENCE_POOL, devicePlugin={"timeSlicingReplicas": 2}))["l40s"]
    script = check_script(plan)
    assert "nvlink" not in script and "infiniband" not in script
    assert "dcgmi diag -r 1 -j" in script
    assert check_resources(plan) == {"nvidia.com/gpu": str(plan.gpus_per_node * 2)}


def test_the_check_script_is_valid_shell(tmp_path: Any) -> None:
    import subprocess

    plan = plans_of(SYSTEM_POOL, TRAINING_POOL)["h100"]
    path = tmp_path / "check.sh"
    path.write_text(check_script(plan))
    assert subprocess.run(["sh", "-n", str(path)], capture_output=True, check=False).returncode == 0


# -------------------------------------------------------------------------------------------- the loop add-on
def test_the_loop_settings_are_what_the_program_reads() -> None:
    spec = addon_stack(
        SYSTEM_POOL, TRAINING_POOL, addons={"nodeHealth": {"idleCheckMinutes": 120, "maxConcurrentChecks": 3}}
    )
    stack = plan_stack(spec)
    read = Settings.from_json(loop_addon.settings_file(spec.addons.node_health, stack.pools))
    assert list(read.templates) == ["h100"]
    assert read.idle_check_seconds == 7200 and read.max_concurrent_checks == 3
    assert read.check_timeout_seconds == 1200 and read.metrics_port == node_health.METRICS_PORT


def test_the_program_config_map_holds_the_whole_package_and_each_file_compiles() -> None:
    files = loop_addon.program_files()
    items = {i["key"]: i["path"] for i in loop_addon.program_items()}
    assert set(files) == set(items)
    for needed in ("programs/__init__.py", "programs/node_health/__init__.py", "programs/node_health/loop.py"):
        assert needed in items.values()
    for key, text in files.items():
        compile(text, items[key], "exec")


def test_the_loop_runs_restricted_on_the_system_pool_with_least_privilege() -> None:
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL)
    stack = plan_stack(spec)
    deployment = loop_addon.deployment_spec(stack.pools, "us-east-1")
    pod = deployment["template"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    assert pod["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert pod["serviceAccountName"] == node_health.SERVICE_ACCOUNT
    assert {"name": "AWS_REGION", "value": "us-east-1"} in pod["containers"][0]["env"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert deployment["template"]["metadata"]["labels"] == node_health.LOOP_POD_LABELS
    granted = {(r, v) for rule in loop_addon.CLUSTER_RULES for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {
        ("nodes", "get"),
        ("nodes", "list"),
        ("nodes", "patch"),
        ("pods", "list"),
        ("pods/eviction", "create"),
    }
    local = {(r, v) for rule in loop_addon.NAMESPACE_RULES for r in rule["resources"] for v in rule["verbs"]}
    assert ("pods", "create") in local and ("pods", "delete") in local
    assert not any(v in ("*", "update", "deletecollection") for _, v in granted | local)


def test_the_namespace_is_privileged_for_the_dcgm_check_with_its_reason_and_admits_only_the_scrape() -> None:
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"monitoring": {"dcgmPrometheus": True}})
    stack = plan_stack(spec)
    assert stack.addons.on("node-health")
    namespaces = plan_namespaces(spec, stack.pools, stack.addons)
    (planned,) = [n for n in namespaces if n.name == node_health.NODE_HEALTH_NAMESPACE]
    assert planned.level == "privileged" and planned.reason and "SYS_ADMIN" in planned.reason
    policies = [p for p in network_policies(namespaces, stack.addons) if p.namespace == planned.name]
    assert {p.name for p in policies} == {"default-deny-ingress", "allow-prometheus-scrapes"}
    scrape = next(p for p in policies if p.name == "allow-prometheus-scrapes").spec
    assert scrape["podSelector"] == {"matchLabels": node_health.LOOP_POD_LABELS}
    assert scrape["ingress"][0]["ports"] == [{"protocol": "TCP", "port": node_health.METRICS_PORT}]
    assert json.dumps(scrape)  # plain data


@pytest.mark.program
def test_the_add_on_registers_the_loop_its_program_settings_and_rbac() -> None:
    from components.planning.node_health_repair import REPAIR_CONFIG_KEY, ROLE_NAME
    from tests.builders import run_addons

    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL))
    deployment = run.one("kubernetes:apps/v1:Deployment", "gpu-addons-node-health-deployment")
    assert deployment.inputs["metadata"]["namespace"] == node_health.NODE_HEALTH_NAMESPACE
    container = deployment.inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "public.ecr.aws/lambda/python:3.13"
    assert container["command"] == ["python3", "-m", "programs.node_health.loop"]
    program = run.one("kubernetes:core/v1:ConfigMap", "gpu-addons-node-health-program")
    assert program.inputs["data"] == loop_addon.program_files()
    settings = run.one("kubernetes:core/v1:ConfigMap", "gpu-addons-node-health-settings")
    assert list(json.loads(settings.inputs["data"]["config.json"])["pools"]) == ["h100"]
    # the repair path's settings beside the loop's, and the Pod Identity role of its AWS calls, which the
    # Deployment waits for (Pod Identity injects credentials only into pods admitted after the association)
    repair = json.loads(settings.inputs["data"][REPAIR_CONFIG_KEY])
    assert repair["pools"]["h100"]["kind"] == "aws" and repair["drainTimeoutSeconds"] == 600
    iam_role = run.one("aws:iam/role:Role", ROLE_NAME)
    assert iam_role.urn in deployment.depends_on
    role = run.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "gpu-addons-node-health-cluster-role")
    assert [r["resources"] for r in role.inputs["rules"]] == [["nodes"], ["pods"], ["pods/eviction"]]


@pytest.mark.program
def test_a_stack_without_gated_pools_gets_no_loop() -> None:
    from tests.builders import run_addons

    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"nodeHealth": {"enabled": False}}))
    assert run.of_type("gpu-clusters:index:NodeHealthLoop") == []


@pytest.mark.program
def test_the_plan_summary_shows_each_pools_gate_and_repair_cap() -> None:
    summary = {p["name"]: p for p in shipped_stack("hybrid").plan["summary"]["nodePools"]}
    assert summary["h100"]["healthGate"] == {"gated": True, "dcgmLevel": 1}
    assert summary["h100"]["repair"] == {"maxPerHour": 3}
    assert summary["system"]["healthGate"] == {"gated": False, "dcgmLevel": None}
    assert summary["a40"]["healthGate"]["gated"] is True
    assert summary["a40"]["repair"] == {"maxPerHour": None}  # on-prem servers are never replaced


def test_the_loop_overrides_the_lambda_entry_point_and_finds_boto3_without_writing_bytecode() -> None:
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL)
    container = loop_addon.deployment_spec(plan_stack(spec).pools, "us-east-1")["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    # `command` replaces the image's ENTRYPOINT (the Lambda bootstrap); the runtime directory is on the path
    assert container["command"][:2] == ["python3", "-m"]
    assert env["PYTHONPATH"].split(":") == [loop_addon.PROGRAM_DIR, "/var/runtime"]
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert all(m["readOnly"] for m in container["volumeMounts"])


def _validation(policy: dict[str, Any], message_part: str) -> str:
    (found,) = [v["expression"] for v in policy["spec"]["validations"] if message_part in v["message"]]
    return found


def test_the_loop_admission_policies_judge_only_its_pod_creates_and_node_updates_and_fail_closed() -> None:
    policies = loop_addon.admission_policies()
    assert [(p["metadata"]["name"], b["spec"]) for p, b in policies] == [
        (name, {"policyName": name, "validationActions": ["Deny", "Audit"]})
        for name in (loop_addon.POD_POLICY_NAME, loop_addon.NODE_POLICY_NAME)
    ]
    rules = [p["spec"]["matchConstraints"]["resourceRules"] for p, _ in policies]
    assert [(r["resources"], r["operations"]) for (r,) in rules] == [(["pods"], ["CREATE"]), (["nodes"], ["UPDATE"])]
    for policy, _ in policies:
        assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert policy["spec"]["failurePolicy"] == "Fail"
        (condition,) = policy["spec"]["matchConditions"]
        assert condition["expression"] == 'request.userInfo.username == "system:serviceaccount:node-health:node-health"'


def test_the_pod_policy_admits_only_the_check_pod_shape() -> None:
    pods = loop_addon.pod_policy()
    container = _validation(pods, "add no capability")
    assert f'c.image == "{loop_addon.DCGM_IMAGE}"' in container
    assert 'c.securityContext.capabilities.add.all(a, a in ["SYS_ADMIN"])' in container
    assert "!c.securityContext.privileged" in container and "!has(p.hostPort)" in container
    hosts = _validation(pods, "host namespace")
    assert all(f"!object.spec.{f}" in hosts for f in ("hostNetwork", "hostPID", "hostIPC"))
    assert _validation(pods, "host path") == "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))"
    assert "!object.spec.automountServiceAccountToken" in _validation(pods, "service account token")
    labels = _validation(pods, "labels")
    assert '"app.kubernetes.io/component"] == "check"' in labels
    # what the loop creates meets every one of those conditions
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL)
    templates = loop_addon.settings(spec.addons.node_health, plan_stack(spec).pools)["pools"]
    assert templates
    for pod in templates.values():
        spec = pod["spec"]
        assert [c["image"] for c in spec["containers"]] == [loop_addon.DCGM_IMAGE]
        assert all(set(c["securityContext"]["capabilities"]["add"]) <= {"SYS_ADMIN"} for c in spec["containers"])
        assert not {"hostNetwork", "hostPID", "hostIPC", "volumes", "initContainers"} & set(spec)
        assert spec["automountServiceAccountToken"] is False
        assert pod["metadata"]["labels"].items() >= loop_addon.CHECK_POD_LABELS.items()


def test_the_node_policy_lets_the_loop_change_only_its_label_annotations_cordon_and_taints() -> None:
    from programs.node_health import names, repair

    nodes = loop_addon.node_policy()
    labels = _validation(nodes, "no node label")
    assert labels == (
        'variables.labels.all(k, k == "gpu-clusters/node-health" || (k in variables.oldLabels && '
        "variables.oldLabels[k] == variables.labels[k])) && "
        'variables.oldLabels.all(k, k == "gpu-clusters/node-health" || k in variables.labels)'
    )
    assert 'k.startsWith("gpu-clusters/node-health-")' in _validation(nodes, "no node annotation")
    assert _validation(nodes, "no node taint") == "variables.otherTaints == variables.oldOtherTaints"
    taints = {v["name"]: v["expression"] for v in nodes["spec"]["variables"]}["otherTaints"]
    assert f'"{node_health.STARTUP_TAINT_KEY}"' in taints and "object.spec.taints.filter" in taints
    frozen = _validation(nodes, "no node field")
    assert "has(object.spec.providerID) == has(oldObject.spec.providerID)" in frozen
    assert "unschedulable" not in frozen and "taints" not in frozen
    # every annotation the program writes on a node is one the policy lets it write
    written = [names.CHECKED_AT_ANNOTATION, names.BUSY_AT_ANNOTATION, names.REASON_ANNOTATION]
    written += [repair.REASON_ANNOTATION, repair.REPAIR_ANNOTATION]
    assert all(a.startswith(loop_addon.STATE_ANNOTATION_PREFIX) for a in written)


@pytest.mark.program
def test_the_add_on_registers_the_admission_policies_before_the_loop() -> None:
    from tests.builders import run_addons

    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL))
    deployment = run.one("kubernetes:apps/v1:Deployment", "gpu-addons-node-health-deployment")
    for name in (loop_addon.POD_POLICY_NAME, loop_addon.NODE_POLICY_NAME):
        policy = run.one(
            "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", f"gpu-addons-node-health-{name}"
        )
        binding = run.one(
            "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
            f"gpu-addons-node-health-{name}",
        )
        assert policy.inputs["spec"]["failurePolicy"] == "Fail"
        assert binding.inputs["spec"]["policyName"] == name
        assert policy.urn in binding.depends_on
        assert {policy.urn, binding.urn} <= set(deployment.depends_on)


def test_the_node_policy_lets_the_loop_swap_the_startup_taint_for_the_failed_one() -> None:
    """A failed gate replaces the startup taint with the status taint: the admission policy must allow both keys, or
    the loop's own patch is denied and the node stays gated."""
    from components.planning.node_health import FAILED_TAINT_KEY, STARTUP_TAINT_KEY

    assert {STARTUP_TAINT_KEY, FAILED_TAINT_KEY} <= set(loop_addon.LOOP_TAINTS)
