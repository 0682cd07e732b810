"""The Envoy Gateway release rendered through its pinned chart with the stack's values: the controller and its
certificate Job on the system pool and restricted, the controller name the GatewayClass names, and the Gateway API
CRDs (standard kinds at v1, the HTTPRoute's weights and header matches) that the chart installs
(components/planning/addons/envoy_gateway.py cites the chart)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.planning.addons.envoy_gateway import CONTROLLER_NAME, NAMESPACE, RELEASE
from tests.charts.conftest import planned_case, require_charts
from tests.charts.rendering import (
    Release,
    chart_folder,
    charts_root,
    objects,
    pod_spec,
    render_text,
    restricted_violations,
    tolerates,
)

pytestmark = pytest.mark.charts


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    require_charts()
    case = planned_case("inference", tmp_path_factory.mktemp("envoy-gateway"))
    (found,) = [r for r in case.releases if r.name == RELEASE]
    return found


@pytest.fixture(scope="module")
def rendered(release: Release) -> list[dict[str, Any]]:
    return objects(render_text(release))


def _crds() -> dict[str, dict[str, Any]]:
    folder = charts_root() / chart_folder("gateway-helm", "v1.9.0") / "charts" / "crds" / "crds"
    found = [doc for doc in yaml.safe_load_all((folder / "gatewayapi-crds.yaml").read_text()) if doc]
    return {doc["spec"]["names"]["kind"]: doc for doc in found if doc.get("kind") == "CustomResourceDefinition"}


def test_the_controller_and_the_certificate_job_run_on_the_system_pool_restricted(
    release: Release, rendered: list[dict[str, Any]]
) -> None:
    assert release.namespace == NAMESPACE
    pods = {o["kind"]: pod_spec(o) for o in rendered if o["kind"] in ("Deployment", "Job")}
    assert set(pods) == {"Deployment", "Job"}
    for kind, pod in pods.items():
        assert pod is not None
        assert pod["nodeSelector"] == {"gpu-clusters/role": "system"}, kind
        assert tolerates(pod["tolerations"], ("CriticalAddonsOnly", "true", "NoSchedule")), kind
        assert restricted_violations(pod) == [], kind


def test_the_controller_reconciles_the_gateway_class_s_controller_name(rendered: list[dict[str, Any]]) -> None:
    (config,) = [o for o in rendered if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "envoy-gateway-config"]
    settings = yaml.safe_load(config["data"]["envoy-gateway.yaml"])
    assert settings["gateway"]["controllerName"] == CONTROLLER_NAME
    assert settings["provider"]["type"] == "Kubernetes"


def test_the_chart_ships_the_gateway_api_crds_with_weights_and_header_matches() -> None:
    require_charts()
    crds = _crds()
    assert {"GatewayClass", "Gateway", "HTTPRoute", "ReferenceGrant"} <= set(crds)
    for kind in ("GatewayClass", "Gateway", "HTTPRoute"):
        served = {v["name"] for v in crds[kind]["spec"]["versions"] if v["served"]}
        assert "v1" in served, kind
    route = next(v for v in crds["HTTPRoute"]["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    rule = route["properties"]["spec"]["properties"]["rules"]["items"]["properties"]
    weight = rule["backendRefs"]["items"]["properties"]["weight"]
    assert (weight["minimum"], weight["maximum"]) == (0, 1_000_000)
    header = rule["matches"]["items"]["properties"]["headers"]["items"]["properties"]
    assert {"Exact", "RegularExpression"} <= set(header["type"]["enum"])
    assert "request" in rule["timeouts"]["properties"]


def test_the_gateway_api_crds_are_helm_crds_installed_once_and_never_deleted() -> None:
    """They sit in the `crds` subchart's `crds/` folder, which Helm installs before the templates and never upgrades
    or deletes (docs/inference-routing.md: what that means for upgrades and `pulumi destroy`)."""
    require_charts()
    subchart = charts_root() / chart_folder("gateway-helm", "v1.9.0") / "charts" / "crds"
    assert (subchart / "crds" / "gatewayapi-crds.yaml").is_file()
    assert not list((subchart / "templates").glob("*crds*.yaml"))
