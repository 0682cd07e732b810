"""The DCGM exporter's releases rendered through the pinned chart: on a MIG pool it waits for the mig-manager's
partitions and leaves while the manager reconfigures the node (the labels the manager sets, [MIGPARTED]
pkg/mig/reconfigure), with the MIG monitor capability; with `gpuRuntime: runtime-class` its two releases keep apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.planning.addons.monitoring import (
    DCGM_EXPORTER_RELEASE,
    DCGM_EXPORTER_RUNTIME_CLASS_RELEASE,
)
from components.planning.mig import (
    DCGM_EXPORTER_DEPLOY_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_STATE_SUCCESS,
    mig_plans,
)
from components.planning.pools import PoolPlan
from tests.charts.conftest import Case, planned_case, require_charts
from tests.charts.rendering import Node, Release, containers, fits, objects, pod_spec, render_text

pytestmark = pytest.mark.charts

#: The values the mig-manager gives the deploy label: paused while it reconfigures, `true` once done.
PAUSED, DONE = "paused-for-mig-change", "true"


@pytest.fixture(scope="module")
def mig_case(_variant_dir: Path) -> Case:
    require_charts()
    return planned_case("training-mig-prometheus", _variant_dir)


@pytest.fixture(scope="module")
def runtime_class_case(_variant_dir: Path) -> Case:
    require_charts()
    return planned_case("hybrid-runtime-class", _variant_dir)


def release(case: Case, name: str) -> Release:
    return next(r for r in case.releases if r.name == name)


def rendered_objects(release: Release) -> list[dict[str, Any]]:
    return objects(render_text(release))


def daemon_set(release: Release) -> dict[str, Any]:
    (found,) = [o for o in rendered_objects(release) if o["kind"] == "DaemonSet"]
    return found


def node(plan: PoolPlan, **extra: str) -> Node:
    labels = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", **plan.labels, **extra}
    return Node(plan.name, labels, tuple((t.key, t.value, t.effect) for t in plan.taints))


# ----------------------------------------------------------------------------------------------------- MIG pools
def test_the_exporter_runs_on_a_mig_node_only_between_reconfigurations(mig_case: Case) -> None:
    spec = pod_spec(daemon_set(release(mig_case, DCGM_EXPORTER_RELEASE)))
    assert spec is not None
    (pool,) = mig_plans(mig_case.pools)
    # A fresh node: the manager has not partitioned it yet; the exporter would list whole GPUs and keep them.
    assert fits(spec, node(pool)) == ["required node affinity"]
    # The manager at work: state pending (or rebooting), the exporter's label paused, so its pod is removed.
    for state in ("pending", "rebooting"):
        assert fits(spec, node(pool, **{MIG_CONFIG_STATE_LABEL: state, DCGM_EXPORTER_DEPLOY_LABEL: PAUSED})), state
    # Done: the label back to true, then the state success; a new pod lists the MIG devices.
    assert fits(spec, node(pool, **{MIG_CONFIG_STATE_LABEL: MIG_STATE_SUCCESS, DCGM_EXPORTER_DEPLOY_LABEL: DONE})) == []
    # A node whose owner switched the exporter off (`false`, which the manager keeps) stays without it.
    off = node(pool, **{MIG_CONFIG_STATE_LABEL: MIG_STATE_SUCCESS, DCGM_EXPORTER_DEPLOY_LABEL: "false"})
    assert fits(spec, off)


def test_the_exporter_on_mig_nodes_may_monitor_mig_devices(mig_case: Case) -> None:
    spec = pod_spec(daemon_set(release(mig_case, DCGM_EXPORTER_RELEASE)))
    assert spec is not None
    (exporter,) = containers(spec)
    env = {e["name"]: e.get("value") for e in exporter.get("env") or []}
    assert env["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    # The toolkit grants the MIG monitor capability only to a container with CAP_SYS_ADMIN ([NVCTK]).
    assert "SYS_ADMIN" in exporter["securityContext"]["capabilities"]["add"]


def test_the_mig_manager_runs_where_the_exporter_waits_for_it(mig_case: Case) -> None:
    """The planned manager DaemonSet fits the MIG pool's nodes (it sets the label there), with the environment that
    lets it stop GPU clients, and nothing in the plan sets the label to `false` (which the manager would keep,
    [MIGPARTED] `maybeSetTrue`)."""
    (pool,) = mig_plans(mig_case.pools)
    (manager,) = [
        r for r in mig_case.resources if r["type"] == "kubernetes:apps/v1:DaemonSet" and "mig-manager" in r["name"]
    ]
    spec = manager["inputs"]["spec"]["template"]["spec"]
    assert fits(spec, node(pool)) == []
    (container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NODE_NAME"] is None  # from the pod's node: the manager labels its own node
    assert DCGM_EXPORTER_DEPLOY_LABEL not in pool.labels


def test_whole_gpu_nodes_keep_the_exporter_without_the_mig_labels(runtime_class_case: Case) -> None:
    """Without MIG pools the release is unchanged: no MIG gate, no MIG environment."""
    spec = pod_spec(daemon_set(release(runtime_class_case, DCGM_EXPORTER_RELEASE)))
    assert spec is not None
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 1
    (exporter,) = containers(spec)
    assert "NVIDIA_MIG_MONITOR_DEVICES" not in {e["name"] for e in exporter.get("env") or []}


# ------------------------------------------------------------------------------------------ runtime-class pools
def test_the_two_releases_render_apart_and_split_the_gpu_pools(runtime_class_case: Case) -> None:
    main = release(runtime_class_case, DCGM_EXPORTER_RELEASE)
    second = release(runtime_class_case, DCGM_EXPORTER_RUNTIME_CLASS_RELEASE)
    assert main.namespace != second.namespace
    keys = [
        {(o["kind"], o["metadata"].get("namespace") or r.namespace, o["metadata"]["name"]) for o in rendered_objects(r)}
        for r in (main, second)
    ]
    assert not keys[0] & keys[1]
    kinds = {kind for kind, _, _ in keys[1]}
    assert {"DaemonSet", "Service", "ServiceMonitor", "ConfigMap"} <= kinds
    # Each ServiceMonitor selects its own release's Service, in its own namespace: no target is scraped twice.
    for r in (main, second):
        (monitor,) = [o for o in rendered_objects(r) if o["kind"] == "ServiceMonitor"]
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [r.namespace]
        assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == r.name
    # Every GPU pool has exactly one exporter; the runtime-class pools get the one that names the RuntimeClass.
    specs = {r.name: pod_spec(daemon_set(r)) for r in (main, second)}
    for plan in runtime_class_case.pools:
        if not plan.is_gpu:
            continue
        on = sorted(name for name, spec in specs.items() if spec is not None and not fits(spec, node(plan)))
        expected = DCGM_EXPORTER_RUNTIME_CLASS_RELEASE if plan.pool.gpu_runtime == "runtime-class" else None
        assert on == [expected or DCGM_EXPORTER_RELEASE], plan.name
    second_spec = specs[DCGM_EXPORTER_RUNTIME_CLASS_RELEASE]
    assert second_spec is not None and second_spec["runtimeClassName"] == "nvidia"
    # Pods, not the host, hold the port: the two DaemonSets cannot collide on a node's port either.
    for spec in specs.values():
        assert spec is not None and not spec.get("hostNetwork")
        assert all("hostPort" not in p for c in containers(spec) for p in c.get("ports") or [])


# ------------------------------------------------------------------------------------------ level-4 diagnostics
@pytest.mark.parametrize("which", ["main", "runtime-class", "mig"])
def test_every_exporter_leaves_a_node_paused_for_a_diagnostic_and_keeps_unlabelled_ones(
    which: str, mig_case: Case, runtime_class_case: Case
) -> None:
    """`blueprint verify dcgm --dcgm-level 4` sets the deploy label to `paused-for-diagnostic`: the exporter leaves;
    a node without the label keeps it; a MIG node still needs the manager's success and `true`."""
    case = mig_case if which == "mig" else runtime_class_case
    name = DCGM_EXPORTER_RUNTIME_CLASS_RELEASE if which == "runtime-class" else DCGM_EXPORTER_RELEASE
    spec = pod_spec(daemon_set(release(case, name)))
    assert spec is not None
    migs = mig_plans(case.pools)

    def ready(plan: PoolPlan) -> dict[str, str]:
        """The labels a healthy node of the pool has: on MIG, the manager's success and `true`."""
        return {MIG_CONFIG_STATE_LABEL: MIG_STATE_SUCCESS, DCGM_EXPORTER_DEPLOY_LABEL: DONE} if plan in migs else {}

    served = [p for p in case.pools if p.is_gpu and not fits(spec, node(p, **ready(p)))]
    assert served
    for plan in served:
        mig = {MIG_CONFIG_STATE_LABEL: MIG_STATE_SUCCESS} if plan in migs else {}
        if not mig:
            assert fits(spec, node(plan)) == []
        assert fits(spec, node(plan, **mig, **{DCGM_EXPORTER_DEPLOY_LABEL: DONE})) == []
        assert fits(spec, node(plan, **mig, **{DCGM_EXPORTER_DEPLOY_LABEL: "paused-for-diagnostic"}))
        assert fits(spec, node(plan, **mig, **{DCGM_EXPORTER_DEPLOY_LABEL: PAUSED}))


# --------------------------------------------------------------------------------------------- time-sliced pools
def test_on_time_sliced_gpus_the_exporter_credits_every_pod_sharing_a_gpu(_variant_dir: Path) -> None:
    """`KUBERNETES_VIRTUAL_GPUS` makes the exporter list every pod holding a replica of a GPU, and the per-process
    utilization it gives each pod maps host PIDs, so the pod shares the host's PID namespace."""
    require_charts()
    case = planned_case("inference-time-sliced", _variant_dir)
    spec = pod_spec(daemon_set(release(case, DCGM_EXPORTER_RELEASE)))
    assert spec is not None
    (exporter,) = containers(spec)
    env = {e["name"]: e.get("value") for e in exporter.get("env") or []}
    assert env["KUBERNETES_VIRTUAL_GPUS"] == "true"
    assert spec["hostPID"] is True


def test_whole_gpus_keep_one_pod_per_gpu(runtime_class_case: Case) -> None:
    spec = pod_spec(daemon_set(release(runtime_class_case, DCGM_EXPORTER_RELEASE)))
    assert spec is not None
    (exporter,) = containers(spec)
    assert "KUBERNETES_VIRTUAL_GPUS" not in {e["name"] for e in exporter.get("env") or []}
    assert not spec.get("hostPID")
