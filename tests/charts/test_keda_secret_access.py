"""KEDA's operator and metrics API server read Secrets only in KEDA's namespace: the pinned chart rendered with the
stack's values grants no cluster-wide `secrets` rule (components/planning/addons/keda.py cites the chart)."""

from __future__ import annotations

from typing import Any

import pytest

from components.planning.addons.keda import KEDA_NAMESPACE, KEDA_RELEASE
from tests.charts.conftest import planned_case, require_charts
from tests.charts.rendering import Release, objects, render_text

pytestmark = pytest.mark.charts


def keda_release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    require_charts()
    case = planned_case("inference", tmp_path_factory.mktemp("keda"))
    (release,) = [r for r in case.releases if r.name == KEDA_RELEASE]
    return release


def secret_rules(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for rule in obj.get("rules") or [] if "secrets" in rule.get("resources", [])]


def test_no_cluster_role_of_keda_reads_secrets(tmp_path_factory: pytest.TempPathFactory) -> None:
    rendered = objects(render_text(keda_release(tmp_path_factory)))
    cluster_roles = [o for o in rendered if o["kind"] == "ClusterRole"]
    assert cluster_roles, "the KEDA chart renders no ClusterRole"
    assert {o["metadata"]["name"]: secret_rules(o) for o in cluster_roles if secret_rules(o)} == {}


def test_the_operator_reads_secrets_in_its_own_namespace_only(tmp_path_factory: pytest.TempPathFactory) -> None:
    rendered = objects(render_text(keda_release(tmp_path_factory)))
    roles = [o for o in rendered if o["kind"] == "Role" and secret_rules(o)]
    assert roles
    assert {o["metadata"].get("namespace", KEDA_NAMESPACE) for o in roles} == {KEDA_NAMESPACE}


def test_the_chart_default_would_grant_cluster_wide_secret_reads(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The control: without our `permissions` values the same chart grants list/watch on every Secret."""
    release = keda_release(tmp_path_factory)
    values = {k: v for k, v in release.values.items() if k != "permissions"}
    rendered = objects(render_text(release, values))
    assert any(secret_rules(o) for o in rendered if o["kind"] == "ClusterRole")
