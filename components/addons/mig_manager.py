"""NVIDIA k8s-mig-manager: partitions the GPUs of the pools with `devicePlugin.migDevices`.

A service account with the GPU Operator's RBAC, the mig-parted and GPU-clients ConfigMaps and a privileged DaemonSet
on the MIG pools' nodes, in a namespace of their own (labelled privileged by `components.namespaces`). What goes into
them is computed in `components.planning.addons.mig_manager` (why standalone, which image, which permissions).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.addons.service_account import service_account_with_roles
from components.context import ClusterContext
from components.planning.addons import mig_manager as plan
from components.planning.pools import PoolPlan


def _host_path(name: str, path: str, kind: str) -> k8s.core.v1.VolumeArgs:
    return k8s.core.v1.VolumeArgs(name=name, host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=path, type=kind))


class MigManager(pulumi.ComponentResource):
    """The mig-manager DaemonSet and what it needs, on the nodes of MIG pools only."""

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        plans: Sequence[PoolPlan],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:MigManager", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(
            provider=context.k8s_provider, parent=self, depends_on=list(context.kubernetes_ready)
        )
        meta = k8s.meta.v1.ObjectMetaArgs
        # Its namespace, labelled `privileged` with the reason, comes from components.namespaces.
        ns_opts = pulumi.ResourceOptions.merge(
            k8s_opts, pulumi.ResourceOptions(depends_on=context.namespace_ready(plan.NAMESPACE))
        )
        labels = {"app": plan.NAME}
        identity = service_account_with_roles(
            name,
            account=plan.NAME,
            namespace=plan.NAMESPACE,
            cluster_rules=plan.CLUSTER_RULES,
            namespace_rules=plan.NAMESPACE_RULES,
            cluster_opts=k8s_opts,
            namespace_opts=ns_opts,
        )
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata=meta(name=plan.CONFIG_MAP, namespace=plan.NAMESPACE),
            data={"config.yaml": plan.config_file(plans)},
            opts=ns_opts,
        )
        clients = k8s.core.v1.ConfigMap(
            f"{name}-gpu-clients",
            metadata=meta(name=plan.CLIENTS_CONFIG_MAP, namespace=plan.NAMESPACE),
            data={"clients.yaml": plan.clients_file()},
            opts=ns_opts,
        )
        where = plan.placement(plans)
        field = k8s.core.v1.EnvVarSourceArgs
        env = [
            k8s.core.v1.EnvVarArgs(
                name="NODE_NAME",
                value_from=field(field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path="spec.nodeName")),
            ),
            k8s.core.v1.EnvVarArgs(
                name="POD_NAME",
                value_from=field(field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path="metadata.name")),
            ),
            k8s.core.v1.EnvVarArgs(
                name="POD_NAMESPACE",
                value_from=field(field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path="metadata.namespace")),
            ),
            *(k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in plan.environment().items()),
        ]
        self.daemon_set = k8s.apps.v1.DaemonSet(
            f"{name}-daemon-set",
            metadata=meta(name=plan.NAME, namespace=plan.NAMESPACE, labels=labels),
            spec=k8s.apps.v1.DaemonSetSpecArgs(
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=meta(labels=labels),
                    spec=k8s.core.v1.PodSpecArgs(
                        service_account_name=plan.NAME,
                        host_pid=True,
                        host_ipc=True,
                        priority_class_name=where["priorityClassName"],
                        tolerations=[k8s.core.v1.TolerationArgs(**t) for t in where["tolerations"]],
                        affinity=k8s.core.v1.AffinityArgs(
                            node_affinity=k8s.core.v1.NodeAffinityArgs(
                                required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                                    node_selector_terms=[
                                        k8s.core.v1.NodeSelectorTermArgs(
                                            match_expressions=[
                                                k8s.core.v1.NodeSelectorRequirementArgs(**e)
                                                for e in where["matchExpressions"]
                                            ]
                                        )
                                    ]
                                )
                            )
                        ),
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name=plan.NAME,
                                image=plan.IMAGE,
                                env=env,
                                security_context=k8s.core.v1.SecurityContextArgs(privileged=True),
                                volume_mounts=[
                                    k8s.core.v1.VolumeMountArgs(name="host-root", mount_path="/host"),
                                    k8s.core.v1.VolumeMountArgs(name="host-sys", mount_path="/sys"),
                                    k8s.core.v1.VolumeMountArgs(name="gpu-clients", mount_path=plan.CLIENTS_DIR),
                                    k8s.core.v1.VolumeMountArgs(name="mig-parted-config", mount_path=plan.CONFIG_DIR),
                                ],
                            )
                        ],
                        volumes=[
                            _host_path("host-root", "/", "Directory"),
                            _host_path("host-sys", "/sys", "Directory"),
                            k8s.core.v1.VolumeArgs(
                                name="gpu-clients",
                                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=plan.CLIENTS_CONFIG_MAP),
                            ),
                            k8s.core.v1.VolumeArgs(
                                name="mig-parted-config",
                                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=plan.CONFIG_MAP),
                            ),
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions.merge(
                ns_opts, pulumi.ResourceOptions(depends_on=[*identity, self.config_map, clients])
            ),
        )
        self.register_outputs({"daemonSet": self.daemon_set.metadata.name})
