"""Render a plan's Helm releases (and the CloudWatch add-on's `configurationValues`) through the pinned charts'
sources, offline, with Helm's Go SDK (`helm_python`), and read what the templates make of our values.

The chart sources live outside the repository, in the shared reference folder (`upstream/charts/<name>-<version>/`,
provenance in its PROVENANCE.txt); `upstream_root` finds it. docs/charts.md explains the checks.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Where the shared reference is, unless `BLUEPRINT_UPSTREAM` names another folder.
UPSTREAM_ENV = "BLUEPRINT_UPSTREAM"
#: Set (to 1) where the chart sources must be present: CI's `charts` step fails instead of skipping.
REQUIRE_ENV = "BLUEPRINT_REQUIRE_UPSTREAM"
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
ADDON_TYPE = "aws:eks/addon:Addon"
#: The EKS add-on whose `configurationValues` are the values of a Helm chart we have the source of: the add-on
#: installs the aws-observability/helm-charts chart `amazon-cloudwatch-observability` (docs/charts.md, sources).
CLOUDWATCH_ADDON = "amazon-cloudwatch-observability"
CLOUDWATCH_CHART = "amazon-cloudwatch-observability-6.4.0"
CLOUDWATCH_NAMESPACE = "amazon-cloudwatch"


def upstream_root() -> Path:
    """The shared reference folder: `$BLUEPRINT_UPSTREAM`, else `shared/reference/upstream` beside the project or
    beside the nearest folder above it that has one (a checkout in a subfolder of the workspace finds it too)."""
    override = os.environ.get(UPSTREAM_ENV)
    if override:
        return Path(override)
    candidates = [folder / "shared" / "reference" / "upstream" for folder in PROJECT_ROOT.parents]
    return next((path for path in candidates if path.is_dir()), candidates[0])


def charts_root() -> Path:
    return upstream_root() / "charts"


@dataclass(frozen=True)
class Release:
    """One thing Helm installs: a planned Helm release, or the chart under an EKS add-on."""

    name: str
    #: `<chart>-<version>`, the folder under `charts_root()`.
    chart_dir: str
    namespace: str
    values: dict[str, Any]
    #: The plan resource it came from (its Pulumi name), for messages.
    resource: str
    #: Values the platform adds to ours (EKS gives the add-on's chart the cluster's name and Region); rendered
    #: with ours, never reported as ours.
    given: tuple[tuple[str, Any], ...] = ()


def chart_folder(chart: str, version: str) -> str:
    """`oci://.../aws-node-termination-handler` 0.27.6 -> `aws-node-termination-handler-0.27.6`."""
    return f"{chart.rstrip('/').rsplit('/', 1)[-1]}-{version}"


def releases_of(resources: Sequence[Mapping[str, Any]], region: str) -> list[Release]:
    """Every Helm release of a plan, and the CloudWatch add-on as the chart it installs (with the cluster name and
    Region EKS supplies: the chart's templates require `clusterName` and read `region`)."""
    found = []
    for resource in resources:
        inputs = resource["inputs"]
        if resource["type"] == RELEASE_TYPE:
            found.append(
                Release(
                    name=inputs["name"],
                    chart_dir=chart_folder(inputs["chart"], inputs["version"]),
                    namespace=inputs["namespace"],
                    values=_integral(inputs.get("values") or {}),
                    resource=resource["name"],
                )
            )
        elif resource["type"] == ADDON_TYPE and inputs["addonName"] == CLOUDWATCH_ADDON:
            found.append(
                Release(
                    name=CLOUDWATCH_ADDON,
                    chart_dir=CLOUDWATCH_CHART,
                    namespace=CLOUDWATCH_NAMESPACE,
                    values=json.loads(inputs.get("configurationValues") or "{}"),
                    resource=resource["name"],
                    given=(("clusterName", inputs["clusterName"]), ("region", region)),
                )
            )
    return found


def _integral(value: Any) -> Any:
    """Whole floats back to ints: the mocks hand numbers back as floats (`replicas: 2.0`), Pulumi sends them as
    JSON numbers, which Helm reads the same either way; ints keep rendered text as the cluster would see it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


@cache
def _chart(folder: str) -> Any:
    import helm_python

    return helm_python.Chart.load(charts_root() / folder)


def chart_defaults(folder: str) -> dict[str, Any]:
    defaults: dict[str, Any] = _chart(folder).values
    return defaults


def render_text(release: Release, values: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Template path -> rendered text, as `helm install` would render it (offline: `lookup` finds nothing).

    Each render loads the chart afresh: Helm drops a dependency its condition turns off from the loaded chart
    itself, so a cached chart would lose the subchart for every later render (the NVIDIA device plugin's NFD,
    off in its runtime-class release and on in the first)."""
    import helm_python

    rendered: dict[str, str] = helm_python.Chart.load(charts_root() / release.chart_dir).render(
        dict(release.given) | dict(release.values if values is None else values),
        name=release.name,
        namespace=release.namespace,
        is_install=True,
    )
    return rendered


def objects(rendered: Mapping[str, str]) -> list[dict[str, Any]]:
    """The Kubernetes objects of a render (NOTES.txt and empty documents left out)."""
    found = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for document in yaml.safe_load_all(text):
            if isinstance(document, dict) and document.get("kind"):
                found.append(document)
    return found


def object_key(obj: Mapping[str, Any], namespace: str) -> tuple[str, str, str]:
    """(kind, namespace, name); namespaced objects the chart leaves without a namespace land in the release's.
    Cluster-scoped kinds keep an empty namespace."""
    meta = obj.get("metadata") or {}
    scope = "" if obj["kind"] in CLUSTER_SCOPED else meta.get("namespace") or namespace
    return obj["kind"], scope, meta.get("name", "")


CLUSTER_SCOPED = frozenset(
    {
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "Namespace",
        "PriorityClass",
        "StorageClass",
        "CSIDriver",
        "RuntimeClass",
        "APIService",
        "PersistentVolume",
        "IngressClass",
        "GatewayClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)


def leaf_paths(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every leaf key path of our values: a mapping's keys are descended into, a list or scalar is one leaf."""
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from leaf_paths(value, (*prefix, key))
    else:
        yield prefix


def without(values: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """`values` with the leaf at `path` removed (and its parents, when it was their only key)."""
    copied = copy.deepcopy(dict(values))
    trail = [copied]
    for key in path[:-1]:
        trail.append(trail[-1][key])
    del trail[-1][path[-1]]
    for depth in range(len(path) - 1, 0, -1):
        if not trail[depth]:
            del trail[depth - 1][path[depth - 1]]
    return copied


def at(values: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at `path`, or a marker object when the path is absent."""
    current: Any = values
    for key in path:
        if not isinstance(current, Mapping) or key not in current:
            return _ABSENT
        current = current[key]
    return current


_ABSENT = object()


def restates_default(release: Release, path: tuple[str, ...]) -> bool:
    """Whether our value at `path` is the chart's own default there (so dropping it cannot change the render)."""
    return at(chart_defaults(release.chart_dir), path) == at(release.values, path)


# ------------------------------------------------------------------------------------------------ pods and nodes
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")


def pod_spec(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod template's spec of a workload object (None for anything else)."""
    if obj["kind"] not in WORKLOAD_KINDS:
        return None
    spec = obj.get("spec") or {}
    if obj["kind"] == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    template: dict[str, Any] = (spec.get("template") or {}).get("spec") or {}
    return template


@dataclass(frozen=True)
class Node:
    """A node of one pool, as the scheduler sees it: its labels and taints."""

    pool: str
    labels: dict[str, str]
    taints: tuple[tuple[str, str | None, str], ...]  # (key, value, effect)


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: tuple[str, str | None, str]) -> bool:
    """Kubernetes toleration matching (core/v1 Toleration: empty key with Exists matches every taint; an empty
    effect matches every effect; operator defaults to Equal)."""
    key, value, effect = taint
    for toleration in tolerations or ():
        if toleration.get("effect") and toleration["effect"] != effect:
            continue
        operator = toleration.get("operator") or "Equal"
        if not toleration.get("key"):
            if operator == "Exists":
                return True
            continue
        if toleration["key"] != key:
            continue
        if operator == "Exists" or (toleration.get("value") or "") == (value or ""):
            return True
    return False


def _matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        if key not in labels:
            return False
        number, bound = int(labels[key]), int(values[0])
        return number > bound if operator == "Gt" else number < bound
    raise ValueError(f"unknown node selector operator {operator}")


def fits(spec: Mapping[str, Any], node: Node) -> list[str]:
    """Why a pod with this spec cannot run on `node` (empty: it can): untolerated NoSchedule/NoExecute taints, a
    nodeSelector the labels miss, required node affinity no term of which matches (scheduler semantics: terms are
    ORed, a term's expressions ANDed)."""
    reasons = []
    for taint in node.taints:
        if taint[2] in ("NoSchedule", "NoExecute") and not tolerates(spec.get("tolerations") or [], taint):
            reasons.append(f"taint {taint[0]}={taint[1]}:{taint[2]} not tolerated")
    for key, value in (spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != str(value):
            reasons.append(f"nodeSelector {key}={value}")
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        or {}
    ).get("nodeSelectorTerms")
    if required and not any(
        all(_matches(e, node.labels) for e in term.get("matchExpressions") or []) for term in required
    ):
        reasons.append("required node affinity")
    return reasons


# ------------------------------------------------------------------------------------------ images, pod security
def containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        *(spec.get("initContainers") or []),
        *(spec.get("containers") or []),
        *(spec.get("ephemeralContainers") or []),
    ]


def image_pinned(image: str) -> bool:
    """A tag other than `latest`, or a digest."""
    if not image:
        return False
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    return ":" in last and last.rsplit(":", 1)[1] not in ("", "latest")


#: Pod Security Standards, `baseline` level (kubernetes.io/docs/concepts/security/pod-security-standards/): the
#: capabilities a container may add.
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def baseline_violations(spec: Mapping[str, Any]) -> list[str]:
    """What in a pod spec the `baseline` Pod Security level forbids (host namespaces, privileged containers,
    capabilities beyond the baseline set, hostPath volumes, host ports), so the pod needs `privileged`."""
    found = [f"{field}: true" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    found += [f"hostPath volume {v['name']}" for v in spec.get("volumes") or [] if "hostPath" in v]
    for container in containers(spec):
        context = container.get("securityContext") or {}
        name = container.get("name")
        if context.get("privileged"):
            found.append(f"container {name} privileged")
        added = set((context.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            found.append(f"container {name} adds {sorted(added)}")
        found += [
            f"container {name} hostPort {p['hostPort']}"
            for p in container.get("ports") or []
            if p.get("hostPort") and not spec.get("hostNetwork")
        ]
    return found


#: Pod Security Standards, `restricted` level: the only volume types a pod may use.
RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)


def restricted_violations(spec: Mapping[str, Any]) -> list[str]:
    """What in a pod spec the `restricted` level forbids beyond `baseline`: volume types outside the allowed set,
    privilege escalation not turned off, running as root (or not saying it runs as non-root), no `RuntimeDefault`
    or `Localhost` seccomp profile, capabilities not all dropped or added beyond NET_BIND_SERVICE."""
    found = [
        f"volume {v['name']} of type {kind}"
        for v in spec.get("volumes") or []
        for kind in v
        if kind != "name" and kind not in RESTRICTED_VOLUMES
    ]
    pod = spec.get("securityContext") or {}
    for container in containers(spec):
        context = container.get("securityContext") or {}
        name = container.get("name")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"container {name} may escalate privileges")
        if not context.get("runAsNonRoot", pod.get("runAsNonRoot")):
            found.append(f"container {name} is not required to run as non-root")
        if context.get("runAsUser", pod.get("runAsUser")) == 0:
            found.append(f"container {name} runs as UID 0")
        seccomp = (context.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"container {name} has seccomp profile {seccomp}")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"container {name} does not drop ALL capabilities")
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"container {name} adds {sorted(capabilities['add'])}")
    return found


def level_violations(spec: Mapping[str, Any], level: str) -> list[str]:
    """What in a pod spec its namespace's Pod Security `enforce` level refuses."""
    if level == "privileged":
        return []
    found = baseline_violations(spec)
    return found + restricted_violations(spec) if level == "restricted" else found


def namespace_levels(resources: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The Pod Security `enforce` level the plan labels each of its namespaces with (namespaces without one are
    absent)."""
    levels = {}
    for resource in resources:
        if resource["type"] in ("kubernetes:core/v1:Namespace", "kubernetes:core/v1:NamespacePatch"):
            meta = resource["inputs"]["metadata"]
            level = (meta.get("labels") or {}).get("pod-security.kubernetes.io/enforce")
            if level:
                levels[meta["name"]] = level
    return levels


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())
