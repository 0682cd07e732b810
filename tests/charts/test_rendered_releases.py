"""Every Helm release of every shipped stack and variant (tests/charts/conftest.py), and the CloudWatch add-on's
`configurationValues`, rendered through the pinned chart's own templates (Helm's Go SDK, offline), and what the
templates make of our values checked: it renders, none of our values is ignored, no object comes from two releases,
every pod fits a node the stack has, every image is pinned, the pods meet their namespace's Pod Security level.
docs/charts.md describes the method and its limits. Marked `charts`: CI runs them in their own step.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from typing import Any

import pytest

from components.planning.mig import (
    DCGM_EXPORTER_DEPLOY_LABEL,
    DEPLOY_ENABLED,
    MIG_CONFIG_STATE_LABEL,
    MIG_STATE_SUCCESS,
    mig_devices,
)
from components.planning.network_policies import ALERTMANAGER_PODS, GRAFANA_PODS, PROMETHEUS_PODS
from tests.charts.conftest import Case
from tests.charts.rendering import (
    Node,
    Release,
    baseline_violations,
    charts_root,
    containers,
    fits,
    image_pinned,
    leaf_paths,
    level_violations,
    namespace_levels,
    object_key,
    objects,
    pod_spec,
    render_text,
    restates_default,
    without,
)

pytestmark = pytest.mark.charts

#: Charts a stack installs whose source the shared reference does not hold, with why.
NO_SOURCE = {
    "cilium-1.17.9-0": "EKS's own build of Cilium for hybrid nodes (an OCI artifact on public.ecr.aws/eks); its "
    "chart source is not in the shared reference, so the hybrid stack's Cilium release is not rendered here",
}

#: Workloads that need the `privileged` Pod Security level (they do what `baseline` forbids), by chart folder and
#: object name, with why. Each runs in a namespace the plan sets to `privileged` with its reason
#: (components.planning.namespaces), or in kube-system or amazon-cloudwatch, which are privileged by the cluster's
#: default (`UNLABELLED`).
PRIVILEGED = {
    ("nvidia-dra-driver-gpu-25.12.0", "nvidia-dra-driver-gpu-kubelet-plugin"): "registers with the kubelet and "
    "prepares the GPUs of claims: privileged, with the kubelet's plugin directories and the host's driver root "
    "(hostPath)",
    ("nvidia-device-plugin-0.20.0", "nvidia-device-plugin"): "reads the kubelet's device-plugin socket directory "
    "(hostPath /var/lib/kubelet/device-plugins) to register the GPUs",
    ("aws-efa-k8s-device-plugin-v0.5.30", "aws-efa-k8s-device-plugin"): "registers the EFA devices through the "
    "kubelet's device-plugin socket (hostPath) and reads /sys and /dev/infiniband",
    ("dcgm-exporter-4.8.2", "dcgm-exporter"): "reads the GPUs' counters through the pod-resources socket (hostPath) "
    "and adds SYS_ADMIN for profiling metrics",
    ("dcgm-exporter-4.8.2", "dcgm-exporter-runtime-class"): "the same exporter as dcgm-exporter, on the hybrid pools "
    "that name the nvidia RuntimeClass",
    ("kube-prometheus-stack-88.5.3", "kube-prometheus-stack-prometheus-node-exporter"): "node metrics: host network "
    "and PID namespaces, the host's root filesystem (hostPath)",
    ("csi-driver-nfs-4.13.4", "csi-nfs-node"): "a CSI node plugin mounts volumes for the kubelet: privileged, host "
    "network, the kubelet's directories (hostPath)",
    ("csi-driver-nfs-4.13.4", "csi-nfs-controller"): "the chart runs the controller on the host network",
    ("amazon-cloudwatch-observability-6.4.0", "cloudwatch-agent"): "Container Insights reads node and container "
    "metrics from the host (hostPath /, /var/run, /sys, the container runtime's socket)",
    ("amazon-cloudwatch-observability-6.4.0", "fluent-bit"): "tails the node's container logs (hostPath /var/log)",
    ("amazon-cloudwatch-observability-6.4.0", "dcgm-exporter"): "the add-on's GPU exporter: the pod-resources "
    "socket (hostPath)",
    ("amazon-cloudwatch-observability-6.4.0", "neuron-monitor"): "the add-on's Neuron monitor: host devices "
    "(hostPath /dev), privileged",
    ("amazon-cloudwatch-observability-6.4.0", "cloudwatch-agent-windows"): "Windows host metrics",
    ("amazon-cloudwatch-observability-6.4.0", "cloudwatch-agent-windows-container-insights"): "Windows host metrics",
    ("amazon-cloudwatch-observability-6.4.0", "fluent-bit-windows"): "Windows node logs (hostPath)",
    ("nvidia-device-plugin-0.20.0", "nvidia-device-plugin-gpu-feature-discovery"): "GPU feature discovery: "
    "privileged by the chart's default (to read vGPU details), writes its labels to the host's NFD features.d "
    "directory (hostPath) and reads /sys",
    ("nvidia-device-plugin-0.20.0", "nvidia-device-plugin-runtime-class-gpu-feature-discovery"): "as above, on the "
    "pools on the nvidia RuntimeClass",
    ("nvidia-device-plugin-0.20.0", "nvidia-device-plugin-node-feature-discovery-worker"): "NFD's worker reads the "
    "host's features.d directory GPU feature discovery writes to, and host /boot, /sys, /lib, /usr/lib, /usr/src, "
    "/etc/os-release and /proc/swaps (hostPath)",
    ("nvidia-device-plugin-0.20.0", "nvidia-device-plugin-runtime-class"): "the device plugin's release for the "
    "pools on the nvidia RuntimeClass: as nvidia-device-plugin",
    ("nvidia-device-plugin-0.20.0", "nvidia-device-plugin-mps-control-daemon"): "the MPS daemon (host PID "
    "namespace, privileged); it runs on no node unless MPS sharing is configured",
    ("nvidia-device-plugin-0.20.0", "nvidia-device-plugin-runtime-class-mps-control-daemon"): "as above",
    ("aws-node-termination-handler-0.27.6", "aws-node-termination-handler"): "in queue mode a Deployment; its "
    "DaemonSet template (IMDS mode) uses the host network",
}


#: Namespaces the plan does not label, and why their pods may be privileged: the cluster's default level applies,
#: which EKS leaves at `privileged` (docs/security.md#pod-security-and-networkpolicy).
UNLABELLED = {
    "kube-system": "Kubernetes' own namespace",
    "amazon-cloudwatch": "created and owned by the amazon-cloudwatch-observability EKS add-on",
}


#: Values that render the same output with or without them, kept on purpose, by chart folder and key path.
UNREAD_ON_PURPOSE = {
    ("cluster-autoscaler-9.59.0", "autoDiscovery.tags"): "the chart's default tags, templated from "
    "`autoDiscovery.clusterName`, are these two; we state them so the node groups' tags and the autoscaler's "
    "discovery come from one place (components/planning/autoscaler_tags.py)",
    ("aws-node-termination-handler-0.27.6", "serviceAccount.name"): "the name the chart derives from the release; "
    "Pod Identity binds its role to this exact name, so we pin it rather than depend on the derivation",
    ("nvidia-device-plugin-0.20.0", "nfd.enabled"): "the condition of the node-feature-discovery dependency "
    "(`nfd.enabled,gfd.enabled`: the first that is set decides): true in the first release restates what "
    "`gfd.enabled` implies, and we state it so the one NFD per cluster is explicit; false in the runtime-class "
    "release keeps a second NFD out",
}

#: DaemonSets that fit no pool of some stack by design, by (case or `*`, release, DaemonSet), with why.
IDLE_BY_DESIGN = {
    ("*", "nvidia-device-plugin", "nvidia-device-plugin-mps-control-daemon"): "the chart's MPS daemon, selected "
    "by `nvidia.com/mps.capable=true`, which only an MPS sharing config sets; no pool uses MPS",
    ("*", "nvidia-device-plugin-runtime-class", "nvidia-device-plugin-runtime-class-mps-control-daemon"): "as above",
    ("training-bottlerocket", "nvidia-device-plugin", "nvidia-device-plugin-gpu-feature-discovery"): "placed "
    "like the device plugin, which keeps off Bottlerocket's bundled one: idle for the same reason (below)",
    ("training-bottlerocket", "nvidia-device-plugin", "nvidia-device-plugin"): "every GPU pool of this variant is "
    "Bottlerocket, whose NVIDIA variants bundle the device plugin, so the release's DaemonSet keeps off them: a "
    "release with nothing to run (harmless; reported)",
}


def rendered(case: Case) -> list[Release]:
    """The case's releases that have a chart source here (the others are listed in `NO_SOURCE`)."""
    return [r for r in case.releases if r.chart_dir not in NO_SOURCE]


@cache
def _render(chart_dir: str, name: str, namespace: str, given_json: str, values_json: str) -> dict[str, str]:
    given = tuple(json.loads(given_json).items())
    return render_text(Release(name, chart_dir, namespace, {}, "", given), json.loads(values_json))


def _key(release: Release, values: dict[str, Any] | None) -> tuple[str, str, str, str, str]:
    chosen = release.values if values is None else values
    given = json.dumps(dict(release.given), sort_keys=True)
    return release.chart_dir, release.name, release.namespace, given, json.dumps(chosen, sort_keys=True)


def render(release: Release, values: dict[str, Any] | None = None) -> dict[str, str]:
    """The release rendered with our values (or `values` instead), once per distinct input."""
    return _render(*_key(release, values))


@cache
def _objects(chart_dir: str, name: str, namespace: str, given_json: str, values_json: str) -> list[dict[str, Any]]:
    return objects(_render(chart_dir, name, namespace, given_json, values_json))


def objects_of(release: Release) -> list[dict[str, Any]]:
    """The objects of the release rendered with our values, parsed once (callers only read them)."""
    return _objects(*_key(release, None))


def test_every_release_has_its_chart_source_and_renders(case: Case) -> None:
    """Every release's pinned chart is in the reference, and renders with our values into some objects."""
    assert case.releases, f"{case.name}: no Helm release planned"
    for release in case.releases:
        if release.chart_dir in NO_SOURCE:
            continue
        assert (charts_root() / release.chart_dir).is_dir(), (
            f"{case.name}: {release.resource} pins {release.chart_dir}, which the shared reference does not hold"
        )
        assert objects_of(release), f"{case.name}: {release.name} ({release.chart_dir}) renders no object"


def _renders_the_same(release: Release, path: tuple[str, ...], baseline: dict[str, str]) -> bool:
    """Whether the release renders byte for byte the same without the value at `path`; a chart that refuses to
    render without it (its own `fail`, as the DRA driver's `gpuResourcesEnabledOverride`) read it."""
    from helm_python.errors import HelmRenderError

    try:
        return render(release, without(release.values, path)) == baseline
    except HelmRenderError:
        return False


def test_none_of_our_values_is_ignored(case: Case) -> None:
    """Each leaf of our values (a mapping is descended into; a list or scalar is one leaf) is dropped in turn and
    the release rendered again: when the output is byte for byte the same, no template read the value, unless it
    restates the chart's own default (then dropping it cannot show anything; such a value is not reported). A key
    a template reads only under a condition our other values turn off counts as ignored too, which is the point:
    it does nothing on this stack."""
    ignored = []
    for release in rendered(case):
        baseline = render(release)
        for path in leaf_paths(release.values):
            if not path or restates_default(release, path):
                continue
            if (release.chart_dir, ".".join(path)) in UNREAD_ON_PURPOSE:
                continue
            if _renders_the_same(release, path, baseline):
                ignored.append(f"{release.name} ({release.chart_dir}): {'.'.join(path)}")
    assert not ignored, f"{case.name}: values no template reads:\n  " + "\n  ".join(ignored)


def test_no_two_releases_render_the_same_object(case: Case) -> None:
    """Helm refuses to install an object another release owns, so `pulumi up` would fail on the second one."""
    owners: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for release in rendered(case):
        for obj in objects_of(release):
            owners[object_key(obj, release.namespace)].append(release.name)
    shared = {key: names for key, names in owners.items() if len(names) > 1}
    assert not shared, f"{case.name}: objects rendered by more than one release: " + "; ".join(
        f"{kind} {ns}/{name} by {', '.join(names)}" for (kind, ns, name), names in sorted(shared.items())
    )


def _nodes(case: Case, existing_only: bool) -> list[Node]:
    """A node of each pool (with the labels every EKS node carries: os, arch, instance type; hybrid nodes'
    compute-type); `existing_only`: only the pools with nodes right after `pulumi up` (EC2 pools whose group
    starts above zero; hybrid servers join when their owners run nodeadm)."""
    nodes = []
    for plan in case.pools:
        if existing_only and (plan.kind != "aws" or plan.initial_nodes == 0):
            continue
        labels = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", **plan.labels}
        if mig_devices(plan) and not existing_only:
            # mig-manager labels a node once it has partitioned its GPUs; the device plugin and exporter wait for it
            labels[MIG_CONFIG_STATE_LABEL] = MIG_STATE_SUCCESS
            labels[DCGM_EXPORTER_DEPLOY_LABEL] = DEPLOY_ENABLED
        if plan.kind == "aws":
            labels["node.kubernetes.io/instance-type"] = plan.instance_types[0]
        else:
            labels["eks.amazonaws.com/compute-type"] = "hybrid"
        nodes.append(Node(plan.name, labels, tuple((t.key, t.value, t.effect) for t in plan.taints)))
    return nodes


def test_every_deployment_fits_a_node_that_exists_after_up(case: Case) -> None:
    """Deployments, StatefulSets and Jobs (the chart's hooks among them) must fit a node of a pool that has nodes
    right after `pulumi up`: Helm and the EKS add-on API wait for them, and nothing else starts a node for them
    (cluster-autoscaler may itself be one of them)."""
    nodes = _nodes(case, existing_only=True)
    stuck = []
    for release in rendered(case):
        for obj in objects_of(release):
            spec = pod_spec(obj)
            if spec is None or obj["kind"] in ("DaemonSet", "CronJob") or _scaled_to_zero(obj):
                continue
            why = {node.pool: fits(spec, node) for node in nodes}
            if all(why.values()):
                stuck.append(f"{release.name}: {obj['kind']} {obj['metadata']['name']}: {why}")
    assert not stuck, f"{case.name}: pods that fit no node:\n  " + "\n  ".join(stuck)


def _scaled_to_zero(obj: dict[str, Any]) -> bool:
    return obj["kind"] in ("Deployment", "StatefulSet") and (obj.get("spec") or {}).get("replicas") == 0


def test_every_daemonset_fits_some_pool(case: Case) -> None:
    """A DaemonSet that fits no pool of the stack (at any size) runs nowhere: a dead release."""
    nodes = _nodes(case, existing_only=False)
    nowhere = []
    for release in rendered(case):
        for obj in objects_of(release):
            spec = pod_spec(obj)
            if spec is None or obj["kind"] != "DaemonSet" or _windows_only(spec):
                continue
            name = obj["metadata"]["name"]
            if {(case.name, release.name, name), ("*", release.name, name)} & IDLE_BY_DESIGN.keys():
                continue
            why = {node.pool: fits(spec, node) for node in nodes}
            if all(why.values()):
                nowhere.append(f"{release.name}: DaemonSet {obj['metadata']['name']}: {why}")
    assert not nowhere, f"{case.name}: DaemonSets that fit no pool:\n  " + "\n  ".join(nowhere)


def test_every_daemonset_of_a_gated_pool_runs_while_the_gate_holds_the_node(case: Case) -> None:
    """A node of a gated GPU pool registers with the health gate's startup taint and keeps it until its check
    passes; the check needs the device plugins, exporters, CSI node plugins and every other agent running, so each
    DaemonSet that runs on the pool's admitted nodes must run on its held ones too."""
    plans = {plan.name: plan for plan in case.pools}
    held = []
    for admitted in _nodes(case, existing_only=False):
        plan = plans[admitted.pool]
        if not plan.health_gated:
            continue
        gated = Node(
            admitted.pool, admitted.labels, tuple((t.key, t.value, t.effect) for t in plan.registration_taints)
        )
        for release in rendered(case):
            for obj in objects_of(release):
                spec = pod_spec(obj)
                if spec is None or obj["kind"] != "DaemonSet":
                    continue
                if not fits(spec, admitted) and fits(spec, gated):
                    held.append(
                        f"{release.name}: DaemonSet {obj['metadata']['name']} on {plan.name}: {fits(spec, gated)}"
                    )
    assert not held, f"{case.name}: DaemonSets the startup taint keeps off gated nodes:\n  " + "\n  ".join(held)


def _windows_only(spec: dict[str, Any]) -> bool:
    """The CloudWatch chart renders Windows DaemonSets on every cluster; the stacks have no Windows pool."""
    return (spec.get("nodeSelector") or {}).get("kubernetes.io/os") == "windows"


def test_every_image_is_pinned(case: Case) -> None:
    """A tag other than `latest`, or a digest: the same config deploys the same software."""
    loose = []
    for release in rendered(case):
        for obj in objects_of(release):
            spec = pod_spec(obj)
            for container in containers(spec or {}):
                if not image_pinned(container.get("image") or ""):
                    loose.append(f"{release.name}: {obj['kind']} {obj['metadata']['name']}: {container.get('image')!r}")
    assert not loose, f"{case.name}: images without a tag or digest:\n  " + "\n  ".join(loose)


def test_pods_meet_their_namespaces_pod_security_level(case: Case) -> None:
    """Every pod meets the Pod Security `enforce` level the plan labels its namespace with (`restricted`: non-root,
    seccomp, no escalation, capabilities dropped; `baseline`: no host access), and lands only in a namespace the
    plan labels or in one of `UNLABELLED`; a pod beyond `baseline` is also listed in `PRIVILEGED` with why (a new
    one fails here until it is listed and its namespace's plan says so)."""
    levels = namespace_levels(case.resources)
    refused, unlisted, unplanned = [], [], set()
    for release in rendered(case):
        for obj in objects_of(release):
            spec = pod_spec(obj)
            if spec is None:
                continue
            namespace = obj["metadata"].get("namespace") or release.namespace
            if namespace not in levels and namespace not in UNLABELLED:
                unplanned.add(f"{release.name}: {namespace}")
            where = f"{release.name}: {obj['kind']} {namespace}/{obj['metadata']['name']}"
            found = level_violations(spec, levels.get(namespace, "privileged"))
            if found:
                refused.append(f"{where} ({levels.get(namespace)}): {found}")
            if baseline_violations(spec) and (release.chart_dir, obj["metadata"]["name"]) not in PRIVILEGED:
                unlisted.append(where)
    assert not unplanned, f"{case.name}: pods in namespaces the plan neither labels nor names: {sorted(unplanned)}"
    assert not refused, f"{case.name}: pods their namespace's level refuses:\n  " + "\n  ".join(refused)
    assert not unlisted, f"{case.name}: pods beyond `baseline` not in PRIVILEGED:\n  " + "\n  ".join(unlisted)


def test_the_monitoring_policies_select_the_pods_the_chart_runs(case: Case) -> None:
    """The NetworkPolicies of `monitoring` select Prometheus, Alertmanager and Grafana by the labels the chart's own
    Services select them by, so each policy guards the pods it names (and no policy is a no-op)."""
    selectors = {
        (obj["metadata"]["name"]): (obj.get("spec") or {}).get("selector")
        for release in rendered(case)
        if release.name == "kube-prometheus-stack"
        for obj in objects_of(release)
        if obj["kind"] == "Service"
    }
    guarded = {
        r["inputs"]["metadata"]["name"]
        for r in case.resources
        if r["type"] == "kubernetes:networking.k8s.io/v1:NetworkPolicy"
        and r["inputs"]["metadata"]["namespace"] == "monitoring"
    }
    if not selectors:
        assert not guarded, f"{case.name}: policies in monitoring without kube-prometheus-stack: {guarded}"
        return
    assert guarded == {"prometheus-clients", "alertmanager-clients", "grafana-clients"}
    assert selectors["kube-prometheus-stack-prometheus"] == PROMETHEUS_PODS
    assert selectors["kube-prometheus-stack-alertmanager"] == ALERTMANAGER_PODS
    assert selectors["kube-prometheus-stack-grafana"] == GRAFANA_PODS
