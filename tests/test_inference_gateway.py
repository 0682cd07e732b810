"""The inference Gateway: Envoy Gateway on the stacks that expose serving workloads, a Gateway, per-model HTTPRoutes
with weighted versions and a header match, the NetworkPolicies that admit the Gateway's clients to its Envoy pods and
the Envoy pods to the serving pods, and the validation of its config."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from components.errors import ConfigError
from components.planning.addons.envoy_gateway import ENVOY_POD_LABELS, NAMESPACE
from components.planning.inference_routes import LISTENER_PORT, MODEL_HEADER
from components.planning.stack_plan import plan_stack
from tests.builders import INFERENCE_POOL, SYSTEM_POOL, shipped_plan, stack_config, stack_run

REPO = Path(__file__).resolve().parent.parent
RELEASE = "kubernetes:helm.sh/v3:Release"
GATEWAY_CLASS = "kubernetes:gateway.networking.k8s.io/v1:GatewayClass"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
HTTP_ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
ENVOY_PROXY = "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyProxy"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _of(plan: dict[str, Any], type_token: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == type_token]


def _one(plan: dict[str, Any], type_token: str) -> dict[str, Any]:
    found = _of(plan, type_token)
    assert len(found) == 1, [r["name"] for r in found]
    return found[0]


def _policy(plan: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    return next(
        r["inputs"]["spec"]
        for r in _of(plan, NETWORK_POLICY)
        if r["inputs"]["metadata"] == {**r["inputs"]["metadata"], "namespace": namespace, "name": name}
    )


def _by_urn(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["urn"]: r for r in plan["resources"]}


def _versions_plan(tmp_path: Path, gateway: dict[str, Any] | None = None) -> dict[str, Any]:
    """The shipped inference stack serving one model as two versions, 90/10, and a second model."""
    raw = yaml.safe_load((REPO / "stacks/Pulumi.inference.yaml").read_text())
    chat = raw["config"]["gpu-clusters:workloads"]["serving"][0]
    raw["config"]["gpu-clusters:workloads"]["serving"] = [
        {**chat, "name": "chat-v1", "servedModelName": "chat", "gateway": {"weight": 90}},
        {**chat, "name": "chat-v2", "servedModelName": "chat", "gateway": {"weight": 10}},
        {**chat, "name": "code", "servedModelName": "coder", "terminationGraceSeconds": 300},
        {**chat, "name": "lab", "servedModelName": "lab", "gateway": {"expose": False}},
    ]
    if gateway is not None:
        raw["config"]["gpu-clusters:workloads"]["gateway"] = gateway
    path = tmp_path / "Pulumi.inference.yaml"
    path.write_text(yaml.safe_dump(raw))
    run = stack_run(config_file=path)
    return {**run.plan, "outputs": run.exports}


# ------------------------------------------------------------------------------------------- the shipped stacks
@pytest.mark.program
@pytest.mark.parametrize(
    ("stack", "serves"), [("inference", True), ("hybrid", True), ("training", False), ("smoke", False)]
)
def test_stacks_that_serve_get_a_gateway_api_implementation_and_routes(stack: str, serves: bool) -> None:
    plan = shipped_plan(stack)
    assert bool(_of(plan, "gpu-clusters:index:EnvoyGateway")) is serves
    charts = {r["inputs"]["chart"] for r in _of(plan, RELEASE)}
    assert ("oci://docker.io/envoyproxy/gateway-helm" in charts) is serves
    assert bool(_of(plan, GATEWAY)) is serves
    assert bool(_of(plan, HTTP_ROUTE)) is serves


@pytest.mark.program
def test_envoy_gateway_is_pinned_and_runs_on_the_system_pool() -> None:
    plan = shipped_plan("inference")
    release = next(r["inputs"] for r in _of(plan, RELEASE) if r["inputs"]["chart"].endswith("/gateway-helm"))
    assert (release["version"], release["name"], release["namespace"]) == ("v1.9.0", "eg", NAMESPACE)
    assert release["values"]["deployment"]["pod"]["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert release["values"]["certgen"]["job"]["nodeSelector"] == {"gpu-clusters/role": "system"}


@pytest.mark.program
def test_the_gateway_is_internal_and_its_proxies_run_on_the_system_pool() -> None:
    plan = shipped_plan("inference")
    proxy = _one(plan, ENVOY_PROXY)["inputs"]
    kubernetes = proxy["spec"]["provider"]["kubernetes"]
    assert kubernetes["envoyService"] == {"type": "ClusterIP", "name": "inference-gateway"}
    assert kubernetes["envoyDeployment"]["pod"]["nodeSelector"] == {"gpu-clusters/role": "system"}
    gateway_class = _one(plan, GATEWAY_CLASS)["inputs"]
    assert gateway_class["spec"]["controllerName"] == "gateway.envoyproxy.io/gatewayclass-controller"
    assert gateway_class["spec"]["parametersRef"]["name"] == proxy["metadata"]["name"]
    gateway = _one(plan, GATEWAY)["inputs"]
    assert gateway["metadata"]["namespace"] == "inference"
    assert gateway["spec"]["gatewayClassName"] == gateway_class["metadata"]["name"]
    assert gateway["spec"]["listeners"] == [
        {"name": "http", "protocol": "HTTP", "port": LISTENER_PORT, "allowedRoutes": {"namespaces": {"from": "Same"}}}
    ]
    assert not [
        r for r in plan["resources"] if r["type"] == "kubernetes:core/v1:Service" and "LoadBalancer" in str(r["inputs"])
    ]


@pytest.mark.program
def test_destroy_deletes_routes_before_the_gateway_and_the_class_before_the_controller() -> None:
    """Pulumi deletes a resource before what it depends on: routes, then the Gateway, the class, the release."""
    plan = shipped_plan("inference")
    urns = _by_urn(plan)
    release = next(r for r in _of(plan, RELEASE) if r["inputs"]["chart"].endswith("/gateway-helm"))
    gateway_class = _one(plan, GATEWAY_CLASS)
    gateway = _one(plan, GATEWAY)
    assert release["urn"] in gateway_class["options"]["dependsOn"]
    assert gateway_class["urn"] in gateway["options"]["dependsOn"]
    for route in _of(plan, HTTP_ROUTE):
        assert {gateway["urn"], gateway_class["urn"]} <= set(route["options"]["dependsOn"])
    assert all(u in urns for u in gateway["options"]["dependsOn"])


VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def _admits(expression: str, namespace: str, name: str, gateway_class: str) -> bool:
    """Evaluates the policy's CEL expression, which uses only `==`, `!=`, `&&`, `||`, parentheses and string literals,
    on one Gateway by rewriting it to Python."""
    python = expression.replace("&&", " and ").replace("||", " or ")
    env = {
        "request": SimpleNamespace(namespace=namespace),
        "object": SimpleNamespace(
            metadata=SimpleNamespace(name=name), spec=SimpleNamespace(gatewayClassName=gateway_class)
        ),
    }
    return bool(eval(python, {"__builtins__": {}}, env))


@pytest.mark.program
def test_only_the_inference_gateway_may_use_the_stack_s_gateway_class() -> None:
    """The class's proxies' Service has one fixed name: a second Gateway of the class (another team's, in its own
    namespace) would point it at its own proxies, so admission refuses it; other classes are untouched."""
    plan = shipped_plan("inference")
    gateway = _one(plan, GATEWAY)["inputs"]
    (policy,) = [r for r in _of(plan, VAP) if r["name"].endswith("-inference-gateway-class")]
    (binding,) = [r for r in _of(plan, VAP_BINDING) if r["name"].endswith("-inference-gateway-class")]
    assert binding["inputs"]["spec"] == {
        "policyName": policy["inputs"]["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert policy["urn"] in binding["options"]["dependsOn"]
    spec = policy["inputs"]["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"], rule["operations"]) == (
        ["gateway.networking.k8s.io"],
        ["gateways"],
        ["CREATE", "UPDATE"],
    )
    (validation,) = spec["validations"]
    ours = gateway["spec"]["gatewayClassName"]
    name, namespace = gateway["metadata"]["name"], gateway["metadata"]["namespace"]
    assert _admits(validation["expression"], namespace, name, ours)
    assert not _admits(validation["expression"], "team-a", name, ours)
    assert not _admits(validation["expression"], namespace, "second", ours)
    assert _admits(validation["expression"], "team-a", "own", "team-a-class")


# --------------------------------------------------------------------------------------------------- the routes
@pytest.mark.program
def test_a_model_s_versions_share_one_route_split_by_weight_and_matched_on_its_header(tmp_path: Path) -> None:
    plan = _versions_plan(tmp_path)
    routes = {r["inputs"]["metadata"]["name"]: r["inputs"]["spec"] for r in _of(plan, HTTP_ROUTE)}
    assert set(routes) == {"chat-v1", "code"}
    (chat,) = routes["chat-v1"]["rules"]
    assert chat["backendRefs"] == [
        {"name": "chat-v1", "port": 8000, "weight": 90},
        {"name": "chat-v2", "port": 8000, "weight": 10},
    ]
    assert chat["matches"] == [
        {
            "path": {"type": "PathPrefix", "value": "/v1"},
            "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": "chat"}],
        }
    ]
    (code,) = routes["code"]["rules"]
    assert code["backendRefs"] == [{"name": "code", "port": 8000, "weight": 1}]
    assert code["matches"][0]["headers"][0]["value"] == "coder"
    # a request may take as long as the version's in-flight requests get when it stops
    assert (chat["timeouts"], code["timeouts"]) == ({"request": "180s"}, {"request": "300s"})
    assert all(r["parentRefs"] == [{"name": "inference", "sectionName": "http"}] for r in routes.values())


@pytest.mark.program
def test_the_serving_pods_admit_the_gateway_s_envoy_pods_only_when_exposed(tmp_path: Path) -> None:
    plan = _versions_plan(tmp_path)
    envoy = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
        "podSelector": {
            "matchLabels": {
                **ENVOY_POD_LABELS,
                "gateway.envoyproxy.io/owning-gateway-name": "inference",
                "gateway.envoyproxy.io/owning-gateway-namespace": "inference",
            }
        },
    }
    for name, exposed in [("chat-v1", True), ("chat-v2", True), ("code", True), ("lab", False)]:
        (rule,) = _policy(plan, "inference", name)["ingress"]
        assert (envoy in rule["from"]) is exposed, name
        assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]


@pytest.mark.program
def test_the_envoy_pods_admit_the_serving_namespace_and_the_configured_clients_only(tmp_path: Path) -> None:
    plan = _versions_plan(tmp_path, {"allowFrom": {"namespaces": ["apps"], "cidrs": ["10.50.0.0/24"]}})
    spec = _policy(plan, NAMESPACE, "inference-gateway-clients")
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "envoy"
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": LISTENER_PORT}]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "inference"}}},
        {"ipBlock": {"cidr": "10.50.0.0/24"}},
    ]
    assert plan["outputs"]["inferenceGatewayEndpoint"] == "http://inference-gateway.envoy-gateway-system.svc:8080/v1"


def test_no_exposed_workload_means_no_envoy_gateway() -> None:
    spec = stack_config(
        SYSTEM_POOL,
        INFERENCE_POOL,
        validated=True,
        storage={"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
        addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": True}},
        workloads={"serving": [{"name": "chat", "pool": "l40s", "model": "m", "gateway": {"expose": False}}]},
    )
    plan = plan_stack(spec)
    assert not plan.addons.on("envoy-gateway")
    assert plan.inference_routing is None
    assert NAMESPACE not in {n.name for n in plan.namespaces}


# --------------------------------------------------------------------------------------------------- validation
def _problems(workloads: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        stack_config(
            SYSTEM_POOL,
            INFERENCE_POOL,
            validated=True,
            storage={"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
            addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": True}},
            workloads=workloads,
        )
    return [str(p) for p in caught.value.problems if str(p).startswith("workloads.")]


def test_a_model_whose_versions_all_weigh_zero_is_refused_once_at_its_first_version() -> None:
    problems = _problems(
        {
            "serving": [
                {"name": "a", "pool": "l40s", "model": "m", "gateway": {"weight": 0}},
                {"name": "b", "pool": "l40s", "model": "m", "gateway": {"weight": 0}},
            ]
        }
    )
    assert len(problems) == 1
    assert problems[0].startswith("workloads.serving[0].gateway.weight:")
    assert "expose: false" in problems[0]


def test_gateway_clients_are_bounded_networks_and_need_an_exposed_workload() -> None:
    problems = _problems(
        {
            "serving": [{"name": "a", "pool": "l40s", "model": "m", "gateway": {"expose": False}}],
            "gateway": {"allowFrom": {"cidrs": ["0.0.0.0/0", "10.1.2.3/24"]}},
        }
    )
    assert [p.split(":", 1)[0] for p in problems] == [
        "workloads.gateway.allowFrom",
        "workloads.gateway.allowFrom.cidrs[0]",
        "workloads.gateway.allowFrom.cidrs[1]",
    ]


def test_a_weight_beyond_the_gateway_api_range_is_refused_with_its_path() -> None:
    problems = _problems({"serving": [{"name": "a", "pool": "l40s", "model": "m", "gateway": {"weight": 1_000_001}}]})
    assert len(problems) == 1
    assert "workloads.serving[0].gateway.weight" in problems[0]


@pytest.mark.program
def test_the_plan_summary_shows_each_version_s_route_and_share(tmp_path: Path) -> None:
    serving = {w["name"]: w["gateway"] for w in _versions_plan(tmp_path)["summary"]["serving"]}
    endpoint = "http://inference-gateway.envoy-gateway-system.svc:8080/v1"
    assert serving == {
        "chat-v1": {"route": "chat-v1", "model": "chat", "weight": 90, "sharePercent": 90.0, "endpoint": endpoint},
        "chat-v2": {"route": "chat-v1", "model": "chat", "weight": 10, "sharePercent": 10.0, "endpoint": endpoint},
        "code": {"route": "code", "model": "coder", "weight": 1, "sharePercent": 100.0, "endpoint": endpoint},
        "lab": None,
    }
