"""Kueue's release rendered through its pinned chart with the training stack's values: the controller runs the
release's image on the system pool with the feature gates named, reads the manager configuration the planning module
writes (integrations, waitForPodsReady, uncovered resources ignored), and the chart brings the CRDs of every kind
the stack creates, served at the version the stack uses (components/planning/addons/kueue.py cites the chart)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.planning.addons.kueue import KUEUE_RELEASE, KUEUE_WEBHOOK_PORT
from components.planning.queues import KUEUE_API_VERSION
from components.planning.training_platform import KUEUE_NAMESPACE
from tests.charts.conftest import planned_case, require_charts
from tests.charts.rendering import Release, containers, objects, pod_spec, render_text

pytestmark = pytest.mark.charts

#: The kinds `components.addons.kueue` creates.
CREATED_KINDS = {
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Topology",
    "AdmissionCheck",
    "ProvisioningRequestConfig",
}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    require_charts()
    case = planned_case("training", tmp_path_factory.mktemp("kueue"))
    (found,) = [r for r in case.releases if r.name == KUEUE_RELEASE]
    assert found.namespace == KUEUE_NAMESPACE
    return found


@pytest.fixture(scope="module")
def rendered(release: Release) -> list[dict[str, Any]]:
    return objects(render_text(release))


def manager(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    return deployment


def test_the_controller_runs_the_release_image_on_the_system_pool_with_the_gates(
    rendered: list[dict[str, Any]],
) -> None:
    spec = pod_spec(manager(rendered))
    assert spec is not None
    assert spec["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in spec["tolerations"]
    (container,) = [c for c in containers(spec) if c["name"] == "manager"]
    assert container["image"] == "registry.k8s.io/kueue/kueue:v0.19.2"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert "--feature-gates=TopologyAwareScheduling=true,QuotaCheckStrategy=true" in container["args"]
    assert KUEUE_WEBHOOK_PORT in [p["containerPort"] for p in container["ports"]]


def test_the_chart_default_image_is_a_floating_staging_build(release: Release) -> None:
    """The control: without our image values the chart runs a branch tag, pulled on every start."""
    values = {k: v for k, v in release.values.items() if k != "controllerManager"}
    spec = pod_spec(manager(objects(render_text(release, values))))
    assert spec is not None
    (container,) = [c for c in containers(spec) if c["name"] == "manager"]
    assert container["image"].endswith(":release-0.19") and container["imagePullPolicy"] == "Always"


def test_the_manager_reads_the_planned_configuration(rendered: list[dict[str, Any]]) -> None:
    (config_map,) = [
        o for o in rendered if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("manager-config")
    ]
    config = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    assert config["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset"]
    assert config["resources"] == {"quotaCheckStrategy": "IgnoreUndeclared"}
    assert config["waitForPodsReady"]["timeout"] == "10m"
    assert config["waitForPodsReady"]["blockAdmission"] is False
    assert config["webhook"]["port"] == KUEUE_WEBHOOK_PORT


def test_the_chart_brings_the_crds_of_every_kind_the_stack_creates(rendered: list[dict[str, Any]]) -> None:
    group, version = KUEUE_API_VERSION.split("/")
    served = {
        o["spec"]["names"]["kind"]: {v["name"] for v in o["spec"]["versions"] if v.get("served")}
        for o in rendered
        if o["kind"] == "CustomResourceDefinition" and o["spec"]["group"] == group
    }
    assert set(served) >= CREATED_KINDS
    assert all(version in served[kind] for kind in CREATED_KINDS)


def test_the_api_server_reaches_the_webhook_through_its_service(rendered: list[dict[str, Any]]) -> None:
    webhooks = [o for o in rendered if o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
    assert webhooks
    services = {o["metadata"]["name"] for o in rendered if o["kind"] == "Service"}
    for config in webhooks:
        for hook in config["webhooks"]:
            assert hook["clientConfig"]["service"]["name"] in services
            assert hook["clientConfig"]["service"]["namespace"] == KUEUE_NAMESPACE
