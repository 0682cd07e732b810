"""The JobSet release rendered through its pinned chart with the stack's values: the released controller image on
the system pool, restricted, its webhook on the port the NetworkPolicy admits, the CRD the reference job needs
(components/planning/addons/jobset.py cites the chart)."""

from __future__ import annotations

from typing import Any

import pytest

from components.planning.addons.jobset import CONTROLLER_PODS, JOBSET_RELEASE, NAMESPACE, WEBHOOK_PORT
from components.planning.training_job import JOBSET_API_VERSION
from tests.charts.conftest import planned_case, require_charts
from tests.charts.rendering import Release, chart_folder, charts_root, objects, render_text, tolerates

pytestmark = pytest.mark.charts


def jobset_release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    require_charts()
    case = planned_case("training", tmp_path_factory.mktemp("jobset"))
    (release,) = [r for r in case.releases if r.name == JOBSET_RELEASE]
    return release


def _controller(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    return deployment


def test_the_controller_runs_the_released_image_on_the_system_pool(tmp_path_factory: pytest.TempPathFactory) -> None:
    release = jobset_release(tmp_path_factory)
    assert release.namespace == NAMESPACE
    pod = _controller(objects(render_text(release)))["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/jobset/jobset:v0.12.0"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert pod["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert tolerates(pod["tolerations"], ("CriticalAddonsOnly", "true", "NoSchedule"))


def test_the_chart_source_alone_would_run_a_staging_image(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The control: without our image values the chart source names the staging registry at `main`."""
    release = jobset_release(tmp_path_factory)
    values = {k: v for k, v in release.values.items() if k != "image"}
    (container,) = _controller(objects(render_text(release, values)))["spec"]["template"]["spec"]["containers"]
    assert container["image"].endswith(":main") and "staging" in container["image"]


def test_the_controller_meets_pod_security_restricted(tmp_path_factory: pytest.TempPathFactory) -> None:
    pod = _controller(objects(render_text(jobset_release(tmp_path_factory))))["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"] == {"drop": ["ALL"]}
    assert not pod.get("hostNetwork") and not any("hostPath" in v for v in pod.get("volumes", []))


def test_the_webhook_network_policy_selects_the_controller_on_its_webhook_port(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    rendered = objects(render_text(jobset_release(tmp_path_factory)))
    deployment = _controller(rendered)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert CONTROLLER_PODS.items() <= labels.items()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "webhook", "containerPort": WEBHOOK_PORT, "protocol": "TCP"} in container["ports"]
    services = [o for o in rendered if o["kind"] == "Service" and o["spec"]["ports"][0]["port"] == 443]
    assert [s["spec"]["ports"][0]["targetPort"] for s in services] in ([WEBHOOK_PORT], ["webhook"])
    # the webhook Service routes to pods the policy selects
    assert services[0]["spec"]["selector"].items() <= CONTROLLER_PODS.items()


def test_the_chart_installs_the_jobset_crd_the_reference_job_uses() -> None:
    require_charts()
    crd_dir = charts_root() / chart_folder("jobset", "0.12.0") / "crds"
    crd = objects({p.name: p.read_text() for p in crd_dir.glob("*.yaml")})
    (definition,) = [o for o in crd if o["kind"] == "CustomResourceDefinition"]
    group, version = JOBSET_API_VERSION.split("/")
    assert definition["spec"]["group"] == group and definition["spec"]["names"]["kind"] == "JobSet"
    served = {v["name"] for v in definition["spec"]["versions"] if v["served"]}
    assert version in served
    schema = next(v for v in definition["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    rule = schema["properties"]["spec"]["properties"]["failurePolicy"]["properties"]["rules"]["items"]
    assert "RestartJobSetAndIgnoreMaxRestarts" in rule["properties"]["action"]["enum"]
