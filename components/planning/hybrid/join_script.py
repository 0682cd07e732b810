"""The script each server of a hybrid pool runs as root to join (pure, no Pulumi): its own `--node-ip`, its Roles
Anywhere node name, `nodeadm install` and `init`, then on GPU pools the NVIDIA runtime and the /dev/char links.

Why a script per pool and not per server: one NodeConfig serves the whole pool (its activation registers up to the
pool's node count), so what differs between servers is filled in on each server. The kubelet registers the address
of the interface that holds the default route unless `--node-ip` says otherwise (kubelet's node address setter,
which aws/eks-hybrid `internal/network/utils.go` `GetNodeIP` follows, [NODEADMENRICH]), which on a multi-homed
server can be the wrong network. The script takes the address the server reaches the VPC from (`ip route get`),
or `NODE_IP` when the operator sets it, refuses one outside `remoteNodeCidrs`, and adds it to its copy of the
NodeConfig as a kubelet flag. The steps: docs/operations.md#joining-the-servers-server-owner.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network

from components.planning.gpu_runtime import DEV_CHAR_RULE_FILE, containerd_runtime_commands, device_symlink_commands
from components.planning.hybrid.node_config import ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER, nodeadm_install_command
from components.planning.pools import PoolPlan

#: The file the server owner saves the pool's NodeConfig output to (`hybridNodeConfig-<pool>`).
NODE_CONFIG_FILE = "nodeConfig.yaml"
#: The hybrid build of nodeadm, by the host's architecture (EKS user guide, hybrid-nodes-nodeadm).
NODEADM_URL = "https://hybrid-assets.eks.amazonaws.com/releases/latest/bin/linux/$arch/nodeadm"
#: How the rendered NodeConfig lists its kubelet flags (`render_node_config`: block style, lists at their key's
#: indent); the script adds `--node-ip` as the first item under this line.
KUBELET_FLAGS_LINE = "    flags:"

#: A bash function: is IPv4 address $1 inside CIDR $2? (32-bit arithmetic, no tools beyond bash.)
_IN_CIDR = """in_cidr() {
  local a b c d e f g h bits=${2#*/} mask
  IFS=. read -r a b c d <<<"$1"
  IFS=. read -r e f g h <<<"${2%/*}"
  mask=$(( bits == 0 ? 0 : (0xFFFFFFFF << (32 - bits)) & 0xFFFFFFFF ))
  (( (((a << 24) | (b << 16) | (c << 8) | d) & mask) == (((e << 24) | (f << 16) | (g << 8) | h) & mask) ))
}"""


def join_script(
    plan: PoolPlan,
    kubernetes_version: str,
    vpc_cidr: IPv4Network | str,
    rule_file: str = DEV_CHAR_RULE_FILE,
) -> str:
    """The bash script for every server of `plan` (a hybrid pool), run as root in the folder holding the pool's
    NodeConfig as `nodeConfig.yaml`. `vpc_cidr` gives the address whose route picks the node IP; `rule_file` is
    for tests."""
    network = plan.pool.network
    node_cidrs = [str(c) for c in network.remote_node_cidrs] if network is not None else []
    probe = str(next(IPv4Network(str(vpc_cidr)).hosts()))
    provider = plan.pool.credentials.provider
    inside = " || ".join(f'in_cidr "$node_ip" {cidr}' for cidr in node_cidrs) or "true"
    lines = [
        "#!/bin/bash",
        f"# Join this server to hybrid pool {plan.name}: run as root where {NODE_CONFIG_FILE} (the pool's",
        f"# hybridNodeConfig-{plan.name} output) is. NODE_IP=<address> sets the address the kubelet registers.",
        "set -euo pipefail",
        f"config={NODE_CONFIG_FILE}",
        _IN_CIDR,
        f"node_ip=\"${{NODE_IP:-$(ip -4 -o route get {probe} | sed -n 's/.* src \\([0-9.]*\\).*/\\1/p')}}\"",
        f'if [ -z "$node_ip" ] || ! {{ {inside}; }}; then',
        f"  echo \"node IP '$node_ip' is not in remoteNodeCidrs ({', '.join(node_cidrs)}): "
        "set NODE_IP to this server's address on the node network\" >&2",
        "  exit 1",
        "fi",
        f'grep -q -- \'--node-ip=\' "$config" || sed -i "s|^{KUBELET_FLAGS_LINE}$|&\\n    - --node-ip=$node_ip|" '
        '"$config"',
    ]
    if provider == "iam-roles-anywhere":
        lines.append(f'sed -i "s/{ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER}/${{NODE_NAME:-$(hostname -s)}}/" "$config"')
    lines += [
        "if [ ! -x ./nodeadm ]; then",
        '  case "$(uname -m)" in aarch64) arch=arm64 ;; *) arch=amd64 ;; esac',
        f'  curl -fsSLo nodeadm "{NODEADM_URL}" && chmod +x nodeadm',
        "fi",
        f"./{nodeadm_install_command(kubernetes_version, provider)}",
        f"./nodeadm init --config-source file://{NODE_CONFIG_FILE}",
    ]
    if plan.is_gpu:
        lines += _gpu_commands(plan, rule_file)
    return "\n".join(lines) + "\n"


def _gpu_commands(plan: PoolPlan, rule_file: str) -> Sequence[str]:
    return [
        "# The NVIDIA runtime, and GPUs that survive systemctl daemon-reload",
        *containerd_runtime_commands(plan),
        *device_symlink_commands(rule_file),
    ]
