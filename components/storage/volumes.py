"""The Kubernetes side shared by every file system: namespaces, claims, storage classes and CSI driver add-ons.

Lustre, EFS and an existing NFS server differ in how the volume comes to be (a static PersistentVolume bound to a
file system the stack created, or a StorageClass whose provisioner makes one per claim), but pods always see the
same thing: a ReadWriteMany PersistentVolumeClaim in a namespace, mounted by claim name. The builders here make
those objects one way for all three, so the fields the tests pin down (access modes, reclaim policy, storage class
"" for static binding) cannot drift between file systems.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.context import ClusterContext
from components.managed_addons import addon_version

#: Every shared volume is mounted by many pods on many nodes at once.
ACCESS_MODES = ["ReadWriteMany"]
#: Deleting a claim or a dynamically provisioned volume must never delete the data behind it (stateful
#: things are kept unless the stack says otherwise: docs/operations.md#stateful-resources-and-pulumi-destroy).
RECLAIM_POLICY = "Retain"
KUBE_SYSTEM = "kube-system"


def quantity(gib: int) -> str:
    """A Kubernetes storage quantity in GiB (`4800Gi`)."""
    return f"{gib}Gi"


def k8s_options(
    ctx: ClusterContext, parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = ()
) -> pulumi.ResourceOptions:
    """Options of every Kubernetes object: the cluster's provider, and wait until the cluster can run pods."""
    return pulumi.ResourceOptions(
        provider=ctx.k8s_provider, parent=parent, depends_on=[*ctx.kubernetes_ready, *depends_on]
    )


def create_namespaces(
    names: Sequence[str], ctx: ClusterContext, parent: pulumi.Resource
) -> dict[str, k8s.core.v1.Namespace]:
    """One Namespace per name, created once even when several file systems put their claims there. Pod Security
    Admission enforces `baseline` in it: no pod there may use the host (docs/security.md)."""
    labels = {"app.kubernetes.io/managed-by": "gpu-clusters", "pod-security.kubernetes.io/enforce": "baseline"}
    return {
        name: k8s.core.v1.Namespace(
            f"{ctx.cluster_name_plain}-ns-{name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels=labels),
            opts=k8s_options(ctx, parent),
        )
        for name in names
    }


def storage_labels(file_system: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "gpu-clusters", "gpu-clusters/storage": file_system}


def claim(
    resource_name: str,
    *,
    claim_name: str,
    namespace: str,
    capacity_gib: int,
    storage_class: pulumi.Input[str],
    file_system: str,
    volume_name: pulumi.Input[str] | None = None,
    opts: pulumi.ResourceOptions,
) -> k8s.core.v1.PersistentVolumeClaim:
    """A ReadWriteMany claim: bound to `volume_name` with storage class "" (static), or provisioned by a class."""
    return k8s.core.v1.PersistentVolumeClaim(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=claim_name, namespace=namespace, labels=storage_labels(file_system)),
        spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
            access_modes=ACCESS_MODES,
            storage_class_name=storage_class,
            volume_name=volume_name,
            resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": quantity(capacity_gib)}),
        ),
        opts=opts,
    )


def storage_class(
    resource_name: str,
    *,
    name: str,
    provisioner: str,
    parameters: Mapping[str, pulumi.Input[str]],
    file_system: str,
    mount_options: Sequence[str] | None = None,
    opts: pulumi.ResourceOptions,
) -> k8s.storage.v1.StorageClass:
    """A StorageClass that keeps what it provisions (`Retain`) and binds at once (the volumes are shared)."""
    return k8s.storage.v1.StorageClass(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels=storage_labels(file_system)),
        provisioner=provisioner,
        parameters=dict(parameters),
        reclaim_policy=RECLAIM_POLICY,
        volume_binding_mode="Immediate",
        mount_options=list(mount_options) if mount_options else None,
        opts=opts,
    )


def csi_addon(
    name: str,
    *,
    ctx: ClusterContext,
    configuration: Mapping[str, Any],
    identity: Sequence[pulumi.Resource],
    parent: pulumi.Resource,
) -> aws.eks.Addon:
    """An EKS-managed CSI driver add-on with its configuration values.

    Its IAM role comes from `ClusterContext.pod_identity_role`, which also binds it to the controller's service
    account, so the add-on carries no association of its own (a second one for the same service account would
    conflict). It waits for that identity (`components.addons.helm.service_account_role`: pods get Pod Identity
    credentials only if the association exists when they start) and for the nodes (`kubernetes_ready`): EKS
    reports a CSI add-on healthy only once its node DaemonSet and controller pods run.
    """
    return aws.eks.Addon(
        f"{ctx.cluster_name_plain}-{name}",
        cluster_name=ctx.cluster_name,
        addon_name=name,
        addon_version=addon_version(name, ctx.kubernetes_version, ctx.managed_addon_pins),
        configuration_values=json.dumps(configuration, sort_keys=True),
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        tags=dict(ctx.tags),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*identity, *ctx.kubernetes_ready]),
    )
