"""The serving endpoint, safe by default: the vLLM image past the refused advisories and pinned by digest from the
catalog, Pod Security `restricted`, the API key from a Secret, unsafe server arguments refused unless accepted, and
the NetworkPolicy admitting only configured clients and Prometheus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.catalog.citations import CatalogError
from components.catalog.images import (
    IMAGES_PATH,
    advisories_affecting,
    chart_images,
    image,
    load_images,
    vllm_advisories,
)
from components.config import Alerts
from components.errors import ConfigError
from components.planning.addons.monitoring import POD_MONITOR_LABELS, kube_prometheus_stack_values
from components.planning.serving import deployment_spec, network_policy_spec
from components.planning.stack_plan import plan_pools
from components.validation.workloads import UNSAFE_ARGS
from tests.builders import shipped_stack
from tests.test_serving import DEPLOYMENT, serving_stack

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
REPO = Path(__file__).resolve().parent.parent


def _workload(**changes: Any) -> dict[str, Any]:
    return {"name": "chat", "pool": "l40s", "model": "m", **changes}


def _problems(**changes: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        serving_stack(workload=_workload(**changes))
    return [str(p) for p in caught.value.problems]


def _pod(**changes: Any) -> dict[str, Any]:
    spec = serving_stack(workload=_workload(**changes))
    plan = next(p for p in plan_pools(spec) if p.name == "l40s")
    pod: dict[str, Any] = deployment_spec(spec.workloads.serving[0], plan, "weights")["template"]["spec"]
    return pod


# ---------------------------------------------------------------------------------------------------- the catalog
def test_the_catalog_records_both_advisories_with_their_ranges_and_fixes() -> None:
    by_id = {a.id: a for a in vllm_advisories()}
    prompt_embeds, image_leak = by_id["CVE-2025-62164"], by_id["CVE-2026-22778"]
    assert (prompt_embeds.introduced_version, prompt_embeds.fixed_version, prompt_embeds.refused) == (
        "0.10.2",
        "0.11.1",
        True,
    )
    assert (image_leak.introduced_version, image_leak.fixed_version, image_leak.refused) == ("0.8.3", "0.14.1", True)
    assert [a.id for a in advisories_affecting("v0.11.0")] == ["CVE-2025-62164", "CVE-2026-56340", "CVE-2026-22778"]
    assert advisories_affecting("v0.14.1") == []
    assert advisories_affecting("v0.11.1") and advisories_affecting("v0.14.0-cu129")


def test_the_default_image_is_pinned_by_digest_past_every_refused_advisory() -> None:
    vllm = image("vllm-openai")
    assert vllm.reference == (
        "vllm/vllm-openai:v0.31.0@sha256:c1c9f6fd5c109ba7f0546a59f5b2f15fb87f64c77782e90a27b648b42a8e67c3"
    )
    assert advisories_affecting(vllm.tag) == []
    assert _pod()["containers"][0]["image"] == vllm.reference


def test_accepted_advisories_of_the_default_say_why() -> None:
    accepted = advisories_affecting(image("vllm-openai").tag, refused_only=False)
    assert accepted and all(not a.refused and a.accepted_because for a in accepted)


def test_an_image_without_a_digest_says_why(tmp_path: Path) -> None:
    assert image("k8s-mig-manager").digest is None and "offline" in image("k8s-mig-manager").digest_note
    text = IMAGES_PATH.read_text(encoding="utf-8")
    broken = tmp_path / "images.yaml"
    broken.write_text(text.replace("    digest_note: >-\n", "    unexplained: >-\n", 1), encoding="utf-8")
    with pytest.raises(CatalogError, match="k8s-mig-manager: no digest, and no digest_note"):
        load_images(broken)


def test_a_catalog_whose_default_is_inside_a_refused_advisory_does_not_load(tmp_path: Path) -> None:
    text = IMAGES_PATH.read_text(encoding="utf-8")
    broken = tmp_path / "images.yaml"
    broken.write_text(text.replace("    tag: v0.31.0\n", "    tag: v0.14.0\n", 1), encoding="utf-8")
    with pytest.raises(CatalogError, match=r"default vLLM image v0\.14\.0 is inside CVE-2026-22778"):
        load_images(broken)


def test_a_made_up_digest_shape_does_not_load(tmp_path: Path) -> None:
    text = IMAGES_PATH.read_text(encoding="utf-8")
    broken = tmp_path / "images.yaml"
    broken.write_text(text.replace('digest: "sha256:c1c9', 'digest: "sha256:zz', 1), encoding="utf-8")
    with pytest.raises(CatalogError, match="is not sha256:<64 hex digits>"):
        load_images(broken)


def test_the_monitoring_chart_runs_its_images_by_digest() -> None:
    values = kube_prometheus_stack_values(Alerts(), "us-east-1", plan_pools(serving_stack()), None)
    assert values["prometheus"]["prometheusSpec"]["image"] == {
        "tag": "v3.14.0-distroless",
        "sha": "50c707e96da5ade383cb1707790576480485e93de06aa60ad8802cb5f744bd0a",
    }
    assert values["prometheus"]["prometheusSpec"]["serviceMonitorSelector"] == {"matchLabels": POD_MONITOR_LABELS}
    assert values["kube-state-metrics"]["image"]["sha"].startswith("sha256:")
    pinned = {p.values_key for p in chart_images("kube-prometheus-stack")}
    assert {"alertmanager.alertmanagerSpec.image", "prometheusOperator.image", "grafana.image"} <= pinned
    assert values["grafana"]["image"]["tag"] == "13.2.0" and len(values["grafana"]) > 1  # the merge keeps the rest


# ------------------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("tag", "fixed"),
    [
        ("vllm/vllm-openai:v0.11.0", "0.14.1"),
        ("vllm/vllm-openai:v0.13.0", "0.14.1"),
        ("docker.io/vllm/vllm-openai:v0.11.2", "0.14.1"),
        ("mirror.example:5000/vllm/vllm-openai:v0.10.2-cu128", "0.14.1"),
    ],
)
def test_a_vllm_image_inside_a_refused_advisory_is_refused_with_the_fix(tag: str, fixed: str) -> None:
    (problem,) = _problems(image=tag)
    assert problem.startswith("workloads.serving[0].image: ")
    assert "CVE-2026-22778 (critical, 0.8.3 to before 0.14.1)" in problem
    assert f"use {fixed} or later" in problem


def test_a_patched_or_foreign_image_passes() -> None:
    for accepted in ("vllm/vllm-openai:v0.14.1", "docker.io/vllm/vllm-openai:v0.30.0", "registry.example/vllm:0.11.0"):
        assert serving_stack(workload=_workload(image=accepted)).workloads.serving[0].image == accepted


@pytest.mark.parametrize("flag", sorted(UNSAFE_ARGS))
def test_an_unsafe_argument_is_refused_unless_accepted(flag: str) -> None:
    (problem,) = _problems(extraArgs=["--max-model-len", "8192", f"{flag}=x"])
    assert problem.startswith("workloads.serving[0].extraArgs[2]: ")
    assert f"acceptUnsafeArgs: [{flag}]" in problem
    accepted = serving_stack(workload=_workload(extraArgs=[flag], acceptUnsafeArgs=[flag]))
    assert accepted.workloads.serving[0].extra_args == [flag]


def test_the_flags_vllm_documents_as_unsafe_are_all_listed() -> None:
    assert {"--trust-remote-code", "--enable-prompt-embeds", "--allowed-local-media-path"} <= set(UNSAFE_ARGS)
    assert _problems(extraArgs=["--trust_remote_code"])[0].startswith("workloads.serving[0].extraArgs[0]: ")


def test_an_api_key_in_the_arguments_and_odd_acceptances_are_refused_together() -> None:
    problems = _problems(extraArgs=["--api-key", "k"], acceptUnsafeArgs=["--max-model-len", "--trust-remote-code"])
    assert len(problems) == 3
    assert problems[0].startswith("workloads.serving[0].acceptUnsafeArgs[0]: --max-model-len is not a flag")
    assert problems[1].startswith("workloads.serving[0].acceptUnsafeArgs[1]: extraArgs does not pass")
    assert problems[2].startswith("workloads.serving[0].extraArgs[0]: --api-key puts the key")


@pytest.mark.parametrize(
    ("cidr", "fragment"),
    [
        ("0.0.0.0/0", "more than a /8"),
        ("0.0.0.0/1", "more than a /8"),
        ("10.20.0.1/24", "host bits zero"),
        ("fd00::/64", "not IPv4"),
        ("site", "not a CIDR network"),
    ],
)
def test_client_networks_are_bounded(cidr: str, fragment: str) -> None:
    (problem,) = _problems(allowFrom={"cidrs": [cidr]})
    assert problem.startswith("workloads.serving[0].allowFrom.cidrs[0]: ") and fragment in problem


def test_a_bad_secret_name_is_refused_at_its_key() -> None:
    problems = _problems(apiKey={"secretName": "Not_A_Name"})
    assert any(p.startswith("workloads.serving[0].apiKey.secretName") for p in problems)


# --------------------------------------------------------------------------------------------------- the pod spec
def test_the_pod_meets_pod_security_restricted() -> None:
    pod = _pod()
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (server,) = pod["containers"]
    context = server["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
    assert context["runAsNonRoot"] is True and context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any(key in pod for key in ("hostNetwork", "hostPID", "hostIPC"))
    assert all("hostPath" not in volume for volume in pod["volumes"])


def test_a_non_root_server_has_a_writable_home_caches_and_tmp() -> None:
    pod = _pod()
    (server,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in server["env"]}
    assert env["HOME"] == "/home/vllm"
    for cache in ("HF_HOME", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR"):
        assert env[cache].startswith("/home/vllm/")
    # No passwd entry for the UID: getpass.getuser() must find a name in the environment.
    assert env["USER"]
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for path in ("/home/vllm", "/tmp"):
        assert "emptyDir" in volumes[mounts[path]]


def test_the_api_key_comes_from_its_secret_and_never_from_the_arguments() -> None:
    (server,) = _pod(apiKey={"secretName": "chat-api-key"})["containers"]
    (key,) = [e for e in server["env"] if e["name"] == "VLLM_API_KEY"]
    assert key == {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "chat-api-key", "key": "api-key"}}}
    assert not any(arg.startswith("--api-key") for arg in server["args"])
    (default,) = _pod()["containers"]
    assert "VLLM_API_KEY" not in {e["name"] for e in default["env"]}


# ---------------------------------------------------------------------------------------------- the NetworkPolicy
def test_the_policy_admits_only_the_namespace_the_configured_sources_and_prometheus() -> None:
    spec = serving_stack(workload=_workload(allowFrom={"namespaces": ["apps"], "cidrs": ["10.50.0.0/16"]}))
    policy = network_policy_spec(spec.workloads.serving[0], "monitoring")
    assert policy["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "chat", "app.kubernetes.io/managed-by": "gpu-clusters"}
    }
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert rule["from"] == [
        {"podSelector": {}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
        {"ipBlock": {"cidr": "10.50.0.0/16"}},
    ]


@pytest.mark.program
@pytest.mark.parametrize(
    ("stack", "prefix", "cidrs"),
    [
        ("inference", "serve", []),
        # On the A40 servers Cilium enforces the policy and cannot match EC2 pods (Prometheus, clients) by selector:
        # they are admitted by the addresses EC2 pods take, the hybrid stack's private subnets. No site network.
        ("hybrid", "hybrid", ["10.0.0.0/19", "10.0.32.0/19"]),
    ],
)
def test_shipped_stacks_register_the_policy_and_a_restricted_deployment(
    stack: str, prefix: str, cidrs: list[str]
) -> None:
    run = shipped_stack(stack).run
    policy = run.one(NETWORK_POLICY, f"{prefix}-chat").inputs
    deployment = run.one(DEPLOYMENT, f"{prefix}-chat").inputs
    assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"] == "inference"
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    sources = rule["from"]
    assert [source["ipBlock"]["cidr"] for source in sources if "ipBlock" in source] == cidrs
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in sources
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["image"] == image("vllm-openai").reference


def test_the_security_doc_names_every_refused_flag_and_advisory() -> None:
    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    section = text.split("### The serving endpoint", 1)[1].split("\n## ", 1)[0]
    for flag in UNSAFE_ARGS:
        assert f"`{flag}`" in section, flag
    for advisory in vllm_advisories():
        assert advisory.id in section, advisory.id
