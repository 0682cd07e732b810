"""The kubeconfig of the cluster and the Kubernetes provider every Kubernetes resource uses.

Authentication is `aws eks get-token` exec auth: no long-lived token is stored in the kubeconfig or the Pulumi
state, the caller's AWS identity decides what they may do (through an access entry), and the same kubeconfig works
for `kubectl` after `pulumi stack output kubeconfig --show-secrets`. It is exported as a secret all the same: it
names the endpoint and the CA of a private cluster.

The provider is explicit (never the ambient `~/.kube/config`), so a stack can only ever touch its own cluster.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

#: client-go credential plugin API version that `aws eks get-token` answers with
#: (https://docs.aws.amazon.com/eks/latest/userguide/create-kubeconfig.html).
EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"


def kubeconfig_document(cluster_name: str, endpoint: str, certificate_authority: str, region: str) -> dict[str, Any]:
    """A kubeconfig for one EKS cluster with `aws eks get-token` exec auth (pure; the tests read it)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": endpoint, "certificate-authority-data": certificate_authority},
            }
        ],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [
            {
                "name": cluster_name,
                "user": {
                    "exec": {
                        "apiVersion": EXEC_API_VERSION,
                        "command": "aws",
                        "args": [
                            "eks",
                            "get-token",
                            "--cluster-name",
                            cluster_name,
                            "--region",
                            region,
                            "--output",
                            "json",
                        ],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
    }


def kubeconfig(
    cluster_name: str,
    endpoint: pulumi.Input[str],
    certificate_authority: pulumi.Input[str],
    region: str,
) -> pulumi.Output[str]:
    """The kubeconfig as a JSON string (kubectl and the provider read JSON as YAML)."""
    return pulumi.Output.all(endpoint, certificate_authority).apply(
        lambda v: json.dumps(kubeconfig_document(cluster_name, v[0], v[1], region), indent=2)
    )


def kubernetes_provider(
    name: str, config: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None
) -> k8s.Provider:
    """The explicit provider for every Kubernetes resource and Helm release of the cluster.

    Server-side apply: fields other managers own (EKS managed add-ons, controllers) are not overwritten and
    conflicts surface instead of flapping.
    """
    return k8s.Provider(name, kubeconfig=config, enable_server_side_apply=True, opts=opts)
