"""Kueue and the stack's queues: the controller's release, then its ResourceFlavors, Topology, admission check,
ClusterQueues and LocalQueues, all planned in `components.planning.queues` and `components.planning.addons.kueue`.

Order on a first `pulumi up`: every Kueue object waits for the release, and the release is awaited (no
`skipAwait`): Helm installs the chart's CRDs (they are templates of the chart, [KUEUE] templates/crd) and the
provider waits until its Deployment is ready, so Kueue's admission webhook, which the API server calls for every
Kueue object, answers before the first one is created. With the capacity check, the ProvisioningRequest CRD comes
first: Kueue sets up its ProvisioningRequest controller only when the API serves that kind at start-up ([KUEUE]
cmd/kueue/main.go `ServerSupportsProvisioningRequest`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.addons.helm import helm_release
from components.catalog import versions
from components.context import ClusterContext
from components.planning.addons.kueue import KUEUE_RELEASE, kueue_values
from components.planning.pools import PoolPlan
from components.planning.queues import (
    KUEUE_API_VERSION,
    PROVISIONING_CHECK,
    PROVISIONING_REQUEST_CRD_URL,
    TOPOLOGY_NAME,
    QueuePlan,
    admission_check_spec,
    provisioning_config_spec,
    topology_spec,
)
from components.planning.training_platform import KUEUE_NAMESPACE


class Kueue(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        plans: Sequence[PoolPlan],
        queues: QueuePlan,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:Kueue", name, None, opts)
        pin = versions.chart("kueue")
        self.release: k8s.helm.v3.Release = helm_release(
            name,
            KUEUE_RELEASE,
            pin,
            KUEUE_NAMESPACE,
            kueue_values(plans, queues.admission, pin.app_version or pin.version),
            context,
            parent=self,
            depends_on=depends_on,
        )
        self.objects: dict[str, k8s.apiextensions.CustomResource] = {}
        after_release = [self.release]
        if queues.topology:
            self._object(context, name, "Topology", TOPOLOGY_NAME, None, topology_spec(), after_release)
        for flavor in queues.flavors:
            self._object(context, name, "ResourceFlavor", flavor.name, None, flavor.spec(), after_release)
        if queues.provisioning:
            self._object(
                context,
                name,
                "ProvisioningRequestConfig",
                PROVISIONING_CHECK,
                None,
                provisioning_config_spec(queues.admission),
                after_release,
            )
            self._object(
                context, name, "AdmissionCheck", PROVISIONING_CHECK, None, admission_check_spec(), after_release
            )
        for cq in queues.cluster_queues:
            self._object(context, name, "ClusterQueue", cq.name, None, cq.spec(), after_release)
        for lq in queues.local_queues:
            waits = [*after_release, *context.namespace_ready(lq.namespace)]
            self._object(context, name, "LocalQueue", lq.name, lq.namespace, lq.spec(), waits)
        self.register_outputs({"release": self.release.name})

    def _object(
        self,
        context: ClusterContext,
        prefix: str,
        kind: str,
        object_name: str,
        namespace: str | None,
        spec: dict[str, Any],
        waits: Sequence[pulumi.Resource],
    ) -> None:
        """One Kueue object; every one waits for the release (its CRD and webhook), a LocalQueue for its
        namespace too."""
        key = f"{kind}/{namespace}/{object_name}" if namespace else f"{kind}/{object_name}"
        metadata: dict[str, Any] = {"name": object_name}
        if namespace is not None:
            metadata["namespace"] = namespace
        suffix = f"{namespace}-{object_name}" if namespace else object_name
        self.objects[key] = k8s.apiextensions.CustomResource(
            f"{prefix}-{kind.lower()}-{suffix}",
            api_version=KUEUE_API_VERSION,
            kind=kind,
            metadata=metadata,
            spec=spec,
            opts=pulumi.ResourceOptions(provider=context.k8s_provider, parent=self, depends_on=list(waits)),
        )


def provisioning_request_crd(name: str, context: ClusterContext, parent: pulumi.Resource) -> k8s.yaml.v2.ConfigFile:
    """The ProvisioningRequest CRD from cluster-autoscaler's source at its pinned tag: neither the cluster-autoscaler
    chart nor Kueue's installs it, and both controllers need it when they start."""
    return k8s.yaml.v2.ConfigFile(
        name,
        file=PROVISIONING_REQUEST_CRD_URL,
        opts=pulumi.ResourceOptions(provider=context.k8s_provider, parent=parent, depends_on=context.kubernetes_ready),
    )
