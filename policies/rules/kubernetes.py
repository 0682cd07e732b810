"""Kubernetes rules: what the stack itself declares in the cluster (not what Helm charts render, which the plan
does not hold): no Service open to everyone, no pod with host access outside a named exception, and every namespace
the stack creates or labels (a Namespace, a NamespacePatch, a Helm release's `createNamespace`) under a Pod Security
level other than privileged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.resources import HELM_RELEASE, Resource, get, items, strings
from policies.rules.network import is_world, world_covered
from policies.rules.signatures import Config

NAMESPACE = "kubernetes:core/v1:Namespace"
#: Server-side apply of some fields of a namespace that exists already (`default`, which Kubernetes creates).
NAMESPACE_PATCH = "kubernetes:core/v1:NamespacePatch"
#: The resource types through which the stack makes or labels a namespace. A `helm.sh/v3:Release` creates its
#: namespace, unlabelled, when `createNamespace` is true; a `helm.sh/v4:Chart` has no such option (pulumi-kubernetes
#: 4 SDK, `ChartArgs`) and registers what the chart renders as resources, a Namespace among them judged as one.
NAMESPACE_SOURCES = (NAMESPACE, NAMESPACE_PATCH, HELM_RELEASE)
SERVICE = "kubernetes:core/v1:Service"
#: Kinds that carry a pod template, and where it sits.
POD_TEMPLATES: Mapping[str, tuple[str, ...]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
#: The Pod Security Admission label that enforces a level, and the levels
#: (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
LEVELS = ("privileged", "baseline", "restricted")
#: The in-tree annotation some clouds read as the allow-list (`loadBalancerSourceRanges` is the field).
SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"


def k8s_service_exposure(service: Resource, config: Config) -> Iterator[str]:
    """No Service of type LoadBalancer without an allow-list (`loadBalancerSourceRanges`) that stops short of the
    whole internet, and no Service of type NodePort, which opens its port on every node to whatever reaches the nodes.

    A LoadBalancer Service without source ranges admits 0.0.0.0/0
    (https://kubernetes.io/docs/concepts/services-networking/service/#loadbalancer, "loadBalancerSourceRanges";
    AWS Load Balancer Controller docs, "Access control"); a NodePort has no allow-list at all. Expose endpoints inside
    the cluster (ClusterIP) or behind a load balancer with source ranges.
    """
    kind = service.get("spec", "type", default="ClusterIP")
    name = f"Service '{service.get('metadata', 'name', default=service.name)}'"
    if kind == "NodePort":
        yield f"{name} is of type NodePort, which opens its port on every node with no allow-list"
    if kind != "LoadBalancer":
        return
    ranges = strings(service.get("spec", "loadBalancerSourceRanges"))
    annotation = service.get("metadata", "annotations", SOURCE_RANGES_ANNOTATION)
    if isinstance(annotation, str):
        ranges += [part.strip() for part in annotation.split(",") if part.strip()]
    if not ranges:
        yield f"{name} is of type LoadBalancer without loadBalancerSourceRanges, so it admits 0.0.0.0/0"
    elif any(is_world(r) for r in ranges) or world_covered(ranges):
        yield f"{name} is of type LoadBalancer with source ranges {', '.join(ranges)}, which admit the whole internet"


def host_access(pod: Any) -> list[str]:
    """What a pod spec takes from its node: the host's network, process or IPC namespace, privileged containers,
    host paths."""
    found = [field for field in ("hostNetwork", "hostPID", "hostIPC") if get(pod, field) is True]
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for container in items(get(pod, group)):
            if get(container, "securityContext", "privileged") is True:
                found.append(f"privileged container '{get(container, 'name', default='?')}'")
    for volume in items(get(pod, "volumes")):
        path = get(volume, "hostPath", "path")
        if path is not None:
            found.append(f"hostPath volume '{get(volume, 'name', default='?')}' ({path})")
    return found


def k8s_pod_host_access(r: Resource, config: Config) -> Iterator[str]:
    """No pod the stack declares runs privileged, on the host's network, PID or IPC namespace, or mounts a host
    path, outside a named exception.

    Each of them gives the pod its node: the node's credentials, the kubelet's, every other pod's traffic
    (https://kubernetes.io/docs/concepts/security/pod-security-standards/, "Baseline" forbids them all). Components
    that need the host (device plugins, the node exporter) are installed by Helm into namespaces labelled for it and
    listed in docs/security.md; a pod of the stack's own that needs it gets an approved exception.
    """
    path = POD_TEMPLATES.get(r.type)
    if path is None:
        return
    found = host_access(r.get(*path))
    if found:
        kind = r.type.rsplit(":", 1)[-1]
        yield f"{kind} '{r.get('metadata', 'name', default=r.name)}' uses {', '.join(found)}"


def k8s_namespace_pod_security(r: Resource, config: Config) -> Iterator[str]:
    """Every namespace the stack creates or labels enforces a Pod Security level (`pod-security.kubernetes.io/enforce`),
    and not `privileged` outside a named exception.

    Without the label the cluster's default applies, which on EKS is `privileged`: any pod may run privileged, on
    the host network or with the host's `/` mounted (https://kubernetes.io/docs/concepts/security/pod-security-admission/;
    EKS Best Practices, "Pod Security"). `privileged` is for namespaces of components that need the host, each
    named with its reason in an approved exception. Judged on a Namespace and on a NamespacePatch (the labels the
    stack applies to a namespace Kubernetes made), and a Helm release may not create its namespace
    (`createNamespace`), which Helm does without labels.
    """
    if r.type == HELM_RELEASE:
        if r.get("createNamespace") is True:
            release = r.get("name", default=r.name)
            namespace = r.get("namespace", default="default")
            yield (
                f"Helm release '{release}' creates namespace '{namespace}' (createNamespace) without a "
                f"{ENFORCE_LABEL} label, so it is privileged: create the namespace with its labels and set "
                "createNamespace false"
            )
        return
    labels = r.get("metadata", "labels", default={})
    level = labels.get(ENFORCE_LABEL) if isinstance(labels, Mapping) else None
    name = r.get("metadata", "name", default=r.name)
    if level is None:
        yield f"namespace '{name}' has no {ENFORCE_LABEL} label: set restricted, or baseline where a component needs it"
    elif level not in LEVELS:
        yield f"namespace '{name}' sets {ENFORCE_LABEL}={level}, which is not one of {', '.join(LEVELS)}"
    elif level == "privileged":
        yield f"namespace '{name}' enforces the privileged level: any pod in it may take its node"
