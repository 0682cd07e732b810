"""The nodeadm `NodeConfig` a hybrid pool's servers join with, its credentials, and the install command (pure, no
Pulumi).

Invariant: the kubelet flags come from the same function cloud pools use, plus the on-prem zone label; the cluster's
endpoint, CA and service CIDR are in the document, so `nodeadm init` never calls `eks:DescribeCluster`.
Facts: docs/sources.md (aws-gpu-facts.md §5f, aws/eks-hybrid README and `internal/node/hybrid/configenricher.go`).
The steps: docs/operations.md#joining-the-servers-server-owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any

import yaml

from components.planning.hybrid.iam import Provider
from components.planning.nodeadm import NODEADM_API_VERSION, kubelet_flags
from components.planning.pools import PoolPlan

#: `nodeadm install --credential-provider` values per config provider (facts §5f: `ssm|iam-ra`).
NODEADM_CREDENTIAL_PROVIDER: Mapping[str, str] = {"ssm": "ssm", "iam-roles-anywhere": "iam-ra"}

#: Where nodeadm's IAM Roles Anywhere examples and AWS's own end-to-end tests put the node certificate and key
#: (aws/eks-hybrid test/e2e credentials provider: `/etc/iam/pki/server.pem`, `/etc/iam/pki/server.key`).
ROLES_ANYWHERE_CERTIFICATE_PATH = "/etc/iam/pki/server.pem"
ROLES_ANYWHERE_PRIVATE_KEY_PATH = "/etc/iam/pki/server.key"
#: The Roles Anywhere `nodeName` must equal the node certificate's CN and is at most 64 characters (facts §5f), so
#: it is per server and unknown here: the rendered NodeConfig carries this placeholder, replaced on each server.
ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER = "REPLACE-WITH-CERTIFICATE-CN"
#: The zone label hybrid nodes register with, so CoreDNS's zone anti-affinity places a replica on-prem beside the
#: cloud ones (EKS user guide, "Configure webhooks for hybrid nodes", Configure CoreDNS replicas: "Add a topology
#: zone label for each of your hybrid nodes, for example `topology.kubernetes.io/zone: onprem` ... in your nodeadm
#: configuration"). Cloud nodes carry their AZ in the same label.
ZONE_LABEL = "topology.kubernetes.io/zone"
HYBRID_ZONE = "onprem"


@dataclass(frozen=True)
class ClusterDetails:
    """What nodeadm would otherwise read with `eks:DescribeCluster`: aws/eks-hybrid's config enricher calls it
    whenever any of the three is missing (`needsClusterDetails`), and skips the call when all are given. Endpoint
    and CA are cluster outputs (known after `pulumi up`); the service CIDR is the stack's config."""

    endpoint: str
    certificate_authority: str
    service_cidr: str

    def render(self) -> dict[str, str]:
        return {
            "apiServerEndpoint": self.endpoint,
            "certificateAuthority": self.certificate_authority,
            "cidr": str(IPv4Network(self.service_cidr)),
        }


#: What the offline plan shows where `pulumi up` fills in cluster outputs and credentials.
KNOWN_AFTER_UP = "KNOWN-AFTER-PULUMI-UP"
ENDPOINT_PLACEHOLDER = f"https://{KNOWN_AFTER_UP}"
SECRET_PLACEHOLDER = "SECRET-SEE-STACK-OUTPUT"


def offline_cluster_details(service_cidr: str) -> ClusterDetails:
    return ClusterDetails(ENDPOINT_PLACEHOLDER, KNOWN_AFTER_UP, service_cidr)


@dataclass(frozen=True)
class SsmActivation:
    """Credentials of an SSM hybrid activation: shared by every server of the pool, up to its registration limit."""

    activation_id: str
    activation_code: str

    def render(self) -> dict[str, Any]:
        return {"ssm": {"activationCode": self.activation_code, "activationId": self.activation_id}}


@dataclass(frozen=True)
class RolesAnywhere:
    """IAM Roles Anywhere credentials: the ARNs, plus where each server keeps its certificate and key."""

    trust_anchor_arn: str
    profile_arn: str
    role_arn: str
    node_name: str = ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER
    certificate_path: str = ROLES_ANYWHERE_CERTIFICATE_PATH
    private_key_path: str = ROLES_ANYWHERE_PRIVATE_KEY_PATH

    def render(self) -> dict[str, Any]:
        return {
            "iamRolesAnywhere": {
                "nodeName": self.node_name,
                "trustAnchorArn": self.trust_anchor_arn,
                "profileArn": self.profile_arn,
                "roleArn": self.role_arn,
                "certificatePath": self.certificate_path,
                "privateKeyPath": self.private_key_path,
            }
        }


def pod_identity_agent_hybrid_configuration() -> dict[str, Any]:
    """`configuration_values` of the eks-pod-identity-agent add-on in a cluster with hybrid pools.

    It creates the add-on's second DaemonSet, which targets hybrid nodes and mounts the credentials file that
    `enableCredentialsFile` makes nodeadm write; the default DaemonSet needs IMDS, which hybrid nodes lack (EKS user
    guide, hybrid-nodes-add-ons.html, "EKS Pod Identity Agent add-on"; add-on v1.3.3-eksbuild.1 or later).
    """
    return {"daemonsets": {"hybrid": {"create": True}}}


def offline_credentials(provider: Provider) -> SsmActivation | RolesAnywhere:
    """The credentials block the offline plan shows: placeholders for what the activation or trust anchor gives."""
    if provider == "ssm":
        return SsmActivation(activation_id=KNOWN_AFTER_UP, activation_code=SECRET_PLACEHOLDER)
    return RolesAnywhere(trust_anchor_arn=KNOWN_AFTER_UP, profile_arn=KNOWN_AFTER_UP, role_arn=KNOWN_AFTER_UP)


def hybrid_node_config(
    cluster_name: str,
    region: str,
    cluster: ClusterDetails,
    credentials: SsmActivation | RolesAnywhere,
    plan: PoolPlan,
) -> dict[str, Any]:
    """The nodeadm `NodeConfig` a hybrid pool's servers join with (facts §5f, aws/eks-hybrid README).

    Endpoint, CA and service CIDR are given (`ClusterDetails`), so the join needs no EKS API call and the site no
    egress to the EKS regional endpoint. No `--node-ip`: one document serves the whole pool, so each server adds its
    own address (`components.planning.hybrid.join_script`). The kubelet flags are the same function cloud pools use,
    fed with the pool plan's labels
    (`nvidia.com/gpu.present=true`, the accelerator label, `gpu-clusters/pool=<name>`...), the on-prem zone label
    CoreDNS spreads by (`ZONE_LABEL`), and taints.

    `enableCredentialsFile` makes nodeadm keep the node's temporary credentials in `/eks-hybrid/.aws/credentials`,
    which the Pod Identity agent's hybrid DaemonSet reads because hybrid nodes have no IMDS (EKS user guide,
    hybrid-nodes-add-ons.html, "EKS Pod Identity Agent add-on"; `pod_identity_agent_hybrid_configuration`).
    """
    return {
        "apiVersion": NODEADM_API_VERSION,
        "kind": "NodeConfig",
        "spec": {
            "cluster": {"name": cluster_name, "region": region, **cluster.render()},
            "hybrid": {**credentials.render(), "enableCredentialsFile": True},
            "kubelet": {"flags": kubelet_flags({**plan.labels, ZONE_LABEL: HYBRID_ZONE}, plan.registration_taints)},
        },
    }


def render_node_config(document: Mapping[str, Any]) -> str:
    """YAML for `nodeadm init --config-source file://nodeConfig.yaml`; keys in NodeConfig order, no line wrapping."""
    return yaml.safe_dump(dict(document), sort_keys=False, default_flow_style=False, width=1 << 20)


def nodeadm_install_command(kubernetes_version: str, provider: Provider, region: str) -> str:
    """`nodeadm install <version> --credential-provider ssm|iam-ra --region <region>` (facts §5f), run once per
    server as root. Without `--region` nodeadm downloads the SSM agent installer from its default Region's bucket
    (us-west-2, aws/eks-hybrid `cmd/nodeadm/install/install.go`, `internal/ssm/source.go`), not the cluster's, which
    the egress list (`components.planning.hybrid.egress`) names."""
    return (
        f"nodeadm install {kubernetes_version} --credential-provider {NODEADM_CREDENTIAL_PROVIDER[provider]} "
        f"--region {region}"
    )
