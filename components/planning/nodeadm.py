"""What a self-managed node boots with: its AMI and the bootstrap document in its user data.

AL2023 nodes read a nodeadm `NodeConfig` from MIME user data ([AMI], aws-gpu-facts.md §5b), Bottlerocket nodes TOML
settings; both are rendered here, and hybrid nodes reuse the same `kubelet_flags`. Invariant: labels and taints are
kubelet flags, so they exist the moment a node registers ([CA] §6, [NVDP] §8). Why:
docs/design-notes.md#node-bootstrap-documents.
"""

from __future__ import annotations

import email.policy
import json
import re
from collections.abc import Mapping, Sequence
from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart
from ipaddress import IPv4Network
from typing import Any

import yaml

from components.config import Taint
from components.planning.hugepages import sysctls
from components.planning.lustre_clients import efa_client_setup_script
from components.planning.pools import PoolPlan

NODEADM_API_VERSION = "node.eks.aws/v1alpha1"
#: The MIME type nodeadm looks for in multipart user data ([AMI] `nodeadm/doc/examples.md`).
NODEADM_CONTENT_TYPE = "application/node.eks.aws"
#: A fixed boundary keeps the rendered user data byte-for-byte stable between runs. The email package would pick a
#: random one, which would make every `pulumi up` publish a new launch template version and roll every node.
MIME_BOUNDARY = "==GPU-CLUSTERS-NODEADM-BOUNDARY=="
#: cloud-init runs `text/x-shellscript` parts in its final stage, and `nodeadm-run.service`, which starts the
#: kubelet, runs `After=... cloud-final.service` "in order to pickup changes the user may have applied via cloud-init
#: scripts" (https://github.com/awslabs/amazon-eks-ami/blob/81fec2e895854f599974fe4d3d72f61c0a9aaffa/templates/al2023/
#: runtime/rootfs/etc/systemd/system/nodeadm-run.service): kernel settings made there are in place when kubelet starts.
SHELL_SCRIPT_CONTENT_TYPE = "text/x-shellscript"
#: Where the script persists its kernel settings, so they survive a reboot (sysctl.d(5)).
SYSCTL_FILE = "/etc/sysctl.d/90-gpu-clusters.conf"

#: The service CIDR's 10th address is the cluster DNS (kube-dns) address on EKS; nodeadm infers it from `cidr`
#: ([AMI] api.md: "This value is used to infer your cluster's DNS address"), Bottlerocket takes it explicitly
#: (`settings.kubernetes.cluster-dns-ip`).
CLUSTER_DNS_HOST_INDEX = 10

#: Bottlerocket's RAID0 equivalent of nodeadm's `localStorage.strategy: RAID0`: build one array from the
#: instance-store disks and bind the kubelet, containerd and pod-log directories onto it. The same commands
#: Karpenter renders for `instanceStorePolicy: RAID0` (aws/karpenter-provider-aws
#: pkg/providers/amifamily/bootstrap/bottlerocket.go).
BOTTLEROCKET_RAID0_COMMANDS = (
    ("apiclient", "ephemeral-storage", "init"),
    ("apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"),
)


# ------------------------------------------------------------------------------------------------------ kubelet
def kubelet_flags(labels: Mapping[str, str], taints: Sequence[Taint]) -> list[str]:
    """kubelet command-line flags that register the node with its labels and taints.

    Labels are sorted by key so the rendered user data does not change when a dict's order does; taints keep
    their configured order (the order kubelet registers them in). A flag with nothing to say is left out.
    """
    flags: list[str] = []
    if labels:
        flags.append("--node-labels=" + ",".join(f"{key}={labels[key]}" for key in sorted(labels)))
    if taints:
        flags.append("--register-with-taints=" + ",".join(taint.render() for taint in taints))
    return flags


# ---------------------------------------------------------------------------------------------- AL2023 nodeadm
def node_config(
    cluster_name: str,
    endpoint: str,
    certificate_authority: str,
    service_cidr: str | IPv4Network,
    plan: PoolPlan,
) -> dict[str, Any]:
    """The nodeadm `NodeConfig` of a pool ([AMI] `nodeadm/doc/api.md`, facts §5b).

    Giving endpoint, CA and service CIDR up front spares every node a `DescribeCluster` call at boot (and the node
    role the permission). `kubelet.config.maxPods` replaces nodeadm's own figure, which counts slots that EFA
    devices occupy (components.planning.max_pods); nodeadm writes `kubelet.config` as a kubelet drop-in that wins
    over its defaults ([AMI] `nodeadm/internal/kubelet/config.go`, `40-nodeadm.conf`). `instance.localStorage` is
    set only when the plan asks for a strategy: RAID0 puts `/var/lib/kubelet`, `/var/lib/containerd` and
    `/var/log/pods` on one array of all instance-store NVMe disks ([AMI] `templates/shared/runtime/bin/
    setup-local-disks`), which is where multi-GB training images and checkpoints should land.
    """
    kubelet: dict[str, Any] = {"flags": kubelet_flags(plan.labels, plan.registration_taints)}
    if plan.max_pods is not None:
        kubelet["config"] = {"maxPods": plan.max_pods}
    spec: dict[str, Any] = {
        "cluster": {
            "name": cluster_name,
            "apiServerEndpoint": endpoint,
            "certificateAuthority": certificate_authority,
            "cidr": str(IPv4Network(str(service_cidr))),
        },
        "kubelet": kubelet,
    }
    if plan.local_storage:
        spec["instance"] = {"localStorage": {"strategy": plan.local_storage}}
    return {"apiVersion": NODEADM_API_VERSION, "kind": "NodeConfig", "spec": spec}


#: How user data is written, chosen for speed with the same bytes out (a large plan renders it once per pool):
#: libyaml's safe emitter where PyYAML has it, and the email package's compat32 policy, which writes these fixed
#: ASCII headers exactly as the modern policy does without building its header objects.
_YAML_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_MIME_POLICY = email.policy.compat32


def user_data(
    node_config: Mapping[str, Any], kernel_settings: Mapping[str, str] | None = None, scripts: Sequence[str] = ()
) -> str:
    """The MIME multipart user data: one NodeConfig part (`Content-Type: application/node.eks.aws`), then, when
    there are kernel settings to make, a shell script part that cloud-init runs before the kubelet starts, then one
    part per further script (run in that order, also before the kubelet).

    nodeadm reads only the parts of its own type and cloud-init runs the script (EKS user guide, launch templates:
    user data is "a MIME multi-part file", https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html).
    Launch templates take user data base64-encoded; the caller encodes this text.
    """
    document = "---\n" + yaml.dump(
        dict(node_config), Dumper=_YAML_DUMPER, sort_keys=False, default_flow_style=False, width=1 << 20
    )
    message = MIMEMultipart("mixed", boundary=MIME_BOUNDARY, policy=_MIME_POLICY)
    message.attach(_mime_part(NODEADM_CONTENT_TYPE, document))
    if kernel_settings:
        message.attach(_mime_part(SHELL_SCRIPT_CONTENT_TYPE, sysctl_script(kernel_settings)))
    for script in scripts:
        message.attach(_mime_part(SHELL_SCRIPT_CONTENT_TYPE, script))
    return message.as_string(policy=_MIME_POLICY)


def pool_user_data(node_config: Mapping[str, Any], plan: PoolPlan, lustre_boot_script: str | None = None) -> str:
    """The AL2023 user data of a pool: its NodeConfig, the kernel settings its nodes need (EFA huge pages), on FSx
    for Lustre EFA clients the Lustre EFA setup (components.planning.lustre_clients) and, on every Lustre client,
    the script that makes the workload directories (components.planning.lustre_directories), after the EFA setup."""
    scripts = [efa_client_setup_script()] if plan.lustre_client == "efa" else []
    if plan.lustre_client is not None and lustre_boot_script:
        scripts.append(lustre_boot_script)
    return user_data(node_config, sysctls(plan), scripts)


def sysctl_script(kernel_settings: Mapping[str, str]) -> str:
    """A script that writes the settings to a sysctl.d file (kept across reboots) and applies them now."""
    settings = [f"{key} = {kernel_settings[key]}" for key in sorted(kernel_settings)]
    lines = ["#!/bin/bash", "set -euo pipefail", f"cat > {SYSCTL_FILE} <<'EOF'", *settings, "EOF"]
    return "\n".join([*lines, f"sysctl -p {SYSCTL_FILE}", ""])


def _mime_part(content_type: str, payload: str) -> MIMENonMultipart:
    maintype, subtype = content_type.split("/")
    part = MIMENonMultipart(maintype, subtype, policy=_MIME_POLICY)
    part.set_payload(payload)
    return part


# ------------------------------------------------------------------------------------------------- Bottlerocket
def cluster_dns_ip(service_cidr: str | IPv4Network) -> str:
    """The cluster DNS address EKS gives kube-dns: the 10th address of the service CIDR (172.20.0.10 by default)."""
    return str(IPv4Network(str(service_cidr))[CLUSTER_DNS_HOST_INDEX])


def bottlerocket_settings(
    cluster_name: str,
    endpoint: str,
    certificate_authority: str,
    service_cidr: str | IPv4Network,
    plan: PoolPlan,
) -> dict[str, Any]:
    """Bottlerocket settings for a pool (bottlerocket.dev "settings.kubernetes").

    `node-taints` maps a taint key to a list of `value:Effect` strings, so one key can carry several effects (the
    shape Karpenter renders, aws/karpenter-provider-aws bootstrap/bottlerocket.go). `max-pods` is the VPC CNI's
    figure (components.planning.max_pods) and `kernel.sysctl` the EFA huge pages, as on AL2023. Bottlerocket has no
    RAID10 or Mount strategy: any local-storage strategy becomes the ephemeral-storage RAID0 bootstrap command.
    """
    taints: dict[str, list[str]] = {}
    for taint in plan.registration_taints:
        taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
    kubernetes: dict[str, Any] = {
        "cluster-name": cluster_name,
        "api-server": endpoint,
        "cluster-certificate": certificate_authority,
        "cluster-dns-ip": cluster_dns_ip(service_cidr),
        "node-labels": dict(sorted(plan.labels.items())),
    }
    if taints:
        kubernetes["node-taints"] = taints
    if plan.max_pods is not None:
        kubernetes["max-pods"] = plan.max_pods
    settings: dict[str, Any] = {"kubernetes": kubernetes}
    kernel_settings = sysctls(plan)
    if kernel_settings:
        settings["kernel"] = {"sysctl": dict(sorted(kernel_settings.items()))}
    if plan.local_storage:
        settings["bootstrap-commands"] = {
            "000-mount-instance-storage": {
                "commands": [list(command) for command in BOTTLEROCKET_RAID0_COMMANDS],
                "essential": True,
                "mode": "always",
            }
        }
    return {"settings": settings}


def bottlerocket_user_data(settings: Mapping[str, Any]) -> str:
    """Render settings as TOML (tables for mappings; strings, booleans, integers and lists of them as values)."""
    lines: list[str] = []
    _toml_table(lines, (), settings)
    return "\n".join(lines).strip() + "\n"


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _toml_string(value: str) -> str:
    # JSON string escapes (\" \\ \n \t \uXXXX) are valid TOML basic-string escapes; ensure_ascii=False avoids
    # the surrogate-pair escapes TOML does not accept.
    return json.dumps(value, ensure_ascii=False)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot render {type(value).__name__} as a TOML value: {value!r}")


def _toml_table(lines: list[str], path: tuple[str, ...], table: Mapping[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    tables = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    if path and (scalars or not tables):
        lines.append("")
        lines.append("[" + ".".join(_toml_key(p) for p in path) + "]")
    for key, value in scalars.items():
        lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in tables.items():
        _toml_table(lines, (*path, key), value)


# ---------------------------------------------------------------------------------------------------------- AMI
def ami_ssm_parameter(kubernetes_version: str, ami_family: str, arch: str, gpu: bool, release: str) -> str:
    """The public SSM parameter holding the AMI id of one pinned EKS-optimized release (facts §5a).

    Pinned, not `recommended`/`latest`: those move whenever AWS publishes a release, and each move would give every
    `pulumi up` a new launch template version (and roll the pools). The release is the stack's
    (`cluster.amiRelease`, `cluster.bottlerocketRelease`), so images change when the config does.

    AL2023: `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<nvidia|standard>/
    amazon-eks-node-al2023-<arch>-<variant>-<k8s>-<release>/image_id`, the parameter Karpenter reads for an
    `al2023@<release>` alias (aws/karpenter-provider-aws pkg/providers/amifamily/al2023.go `resolvePath`, commit
    41cd7465; the `recommended` form is https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html).
    Bottlerocket: `/aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<arch>/<version>/image_id`, version without
    GitHub's `v` (karpenter-provider-aws pkg/providers/amifamily/bottlerocket.go, commit b522a943; [EKSUG]
    retrieve-ami-id-bottlerocket). GPU types get the NVIDIA variants (driver, container toolkit and EFA host
    components baked in, facts §2).
    """
    if arch not in ("x86_64", "arm64"):
        raise ValueError(f"no EKS-optimized AMI parameter for architecture {arch!r} (x86_64 or arm64)")
    if ami_family == "al2023":
        variant = "nvidia" if gpu else "standard"
        name = f"amazon-eks-node-al2023-{arch}-{variant}-{kubernetes_version}-{release}"
        return f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/{arch}/{variant}/{name}/image_id"
    if ami_family == "bottlerocket":
        variant = f"aws-k8s-{kubernetes_version}" + ("-nvidia" if gpu else "")
        return f"/aws/service/bottlerocket/{variant}/{arch}/{release.removeprefix('v')}/image_id"
    raise ValueError(f"unknown AMI family {ami_family!r} (al2023 or bottlerocket)")
