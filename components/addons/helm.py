"""One way to install a pinned Helm chart, shared by every add-on.

Every release takes its chart, version and repository from the catalog's `ChartPin` (one place for versions), gets
an explicit release name (Pulumi would otherwise add a random suffix, and chart-derived names such as service
accounts would change with it), and waits for `ClusterContext.kubernetes_ready` (the CoreDNS add-on ACTIVE, so a
system node is Ready) so it never lands in a cluster without a node to run on, and for its namespace, which the stack
creates with its Pod Security labels (`ClusterContext.namespace_ready`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import versions
from components.catalog.versions import ChartPin
from components.context import ClusterContext
from components.planning.pools import PoolPlan

#: How long the provider waits for each Kubernetes operation of a release (its `timeout`, in seconds; Helm's own
#: default is 300, https://helm.sh/docs/helm/helm_install/ `--timeout`). Releases start once a system node is Ready,
#: but a first install still pulls every image (Prometheus, Grafana, DCGM are hundreds of MB) and runs hook Jobs,
#: and the second system node may still be booting (a node boots, joins and turns Ready in minutes): 15 minutes
#: covers that, where 5 can fail a first `pulumi up` half way.
RELEASE_TIMEOUT_SECONDS = 900


def helm_release(
    name: str,
    release_name: str,
    pin: ChartPin,
    namespace: str,
    values: Mapping[str, Any] | pulumi.Input[Mapping[str, Any]],
    ctx: ClusterContext,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
    skip_await: bool = False,
) -> k8s.helm.v3.Release:
    """A `helm.v3.Release` of a pinned chart. OCI charts are referenced by their full `oci://` URL and take no
    repository options (Helm resolves them from the URL); https charts name their repository. `skip_await` is for
    charts whose pods cannot be ready during `pulumi up` (Cilium waits for hybrid servers that join afterwards)."""
    return k8s.helm.v3.Release(
        name,
        name=release_name,
        chart=pin.chart_ref,
        version=pin.version,
        repository_opts=None if pin.is_oci else k8s.helm.v3.RepositoryOptsArgs(repo=pin.repository),
        namespace=namespace,
        # The stack creates every namespace with its Pod Security labels (components.namespaces), never Helm.
        create_namespace=False,
        values=values,
        skip_await=skip_await,
        timeout=RELEASE_TIMEOUT_SECONDS,
        opts=pulumi.ResourceOptions(
            provider=ctx.k8s_provider,
            parent=parent,
            depends_on=[*ctx.kubernetes_ready, *ctx.namespace_ready(namespace), *depends_on],
        ),
    )


def service_account_role(
    ctx: ClusterContext,
    name: str,
    namespace: str,
    service_account: str,
    policy_json: pulumi.Input[str] | None,
    managed_policies: Sequence[str],
    parent: pulumi.Resource,
) -> list[pulumi.Resource]:
    """A Pod Identity role for a chart's service account, and what the release must wait for.

    Pods get Pod Identity credentials only if the association exists when they start, so a release waits for the
    role and, with the cluster core's `PodIdentityRoles`, for the association itself.
    """
    role = ctx.pod_identity_role(name, namespace, service_account, policy_json, list(managed_policies), parent)
    association = getattr(ctx.pod_identity_role, "associations", {}).get(name)
    return [role] if association is None else [role, association]


class ChartAddon(pulumi.ComponentResource):
    """An add-on that is one pinned Helm release and nothing else. A subclass names its component type, release,
    chart (as the catalog pins it), namespace, and the planning function of its values."""

    TYPE: ClassVar[str]
    RELEASE: ClassVar[str]
    CHART: ClassVar[str]
    NAMESPACE: ClassVar[str]
    PLANNED_VALUES: ClassVar[Callable[[Sequence[PoolPlan]], Mapping[str, Any]]]

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        plans: Sequence[PoolPlan],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.values = type(self).PLANNED_VALUES(plans)
        self.release: k8s.helm.v3.Release = helm_release(
            name, self.RELEASE, versions.chart(self.CHART), self.NAMESPACE, self.values, context, parent=self
        )
        self.register_outputs({"release": self.release.name})
