"""The script each server of a hybrid pool runs as root to join, and later to upgrade (pure, no Pulumi): its own
`--node-ip`, its Roles Anywhere node name, the pinned nodeadm, `nodeadm install` and `init` (or `nodeadm upgrade`),
then on GPU pools the NVIDIA runtime and the /dev/char links.

Why a script per pool and not per server: one NodeConfig serves the whole pool (its activation registers up to the
pool's node count), so what differs between servers is filled in on each server, by one function of the script
(`server_config`) that both modes run, so an upgrade keeps what the join set. The kubelet registers the address
of the interface that holds the default route unless `--node-ip` says otherwise (kubelet's node address setter,
which aws/eks-hybrid `internal/network/utils.go` `GetNodeIP` follows, [NODEADMENRICH]), which on a multi-homed
server can be the wrong network. The script takes the address the server reaches the VPC from (`ip route get`),
or `NODE_IP` when the operator sets it, refuses one outside `remoteNodeCidrs`, and sets it in its copy of the
NodeConfig as a kubelet flag. A Roles Anywhere node's name must be its certificate's CN (the role's trust policy,
`components.planning.hybrid.iam`), so the script reads the CN from the NodeConfig's `certificatePath`.
The steps: docs/operations.md#joining-the-servers-server-owner.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network

from components.catalog.versions import nodeadm_release
from components.planning.gpu_runtime import DEV_CHAR_RULE_FILE, containerd_runtime_commands, device_symlink_commands
from components.planning.hybrid.node_config import nodeadm_install_command
from components.planning.pools import PoolPlan

#: The file the server owner saves the pool's NodeConfig output to (`hybridNodeConfig-<pool>`).
NODE_CONFIG_FILE = "nodeConfig.yaml"
#: nodeadm's own limit on a Roles Anywhere node name (aws/eks-hybrid `internal/node/hybrid/validator.go`).
NODE_NAME_MAX = 64


def nodeadm_url(release: str) -> str:
    """The hybrid nodeadm of one release, by the host's architecture (`$arch`): each release is published under
    `releases/<version>/` before `releases/latest/` is pointed at it (aws/eks-hybrid `hack/release-nodeadm.sh`)."""
    return f"https://hybrid-assets.eks.amazonaws.com/releases/{release}/bin/linux/$arch/nodeadm"


#: How the rendered NodeConfig lists its kubelet flags (`render_node_config`: block style, lists at their key's
#: indent); the script puts `--node-ip` as the first item under this line.
KUBELET_FLAGS_LINE = "    flags:"
_NODE_IP_ITEM = "    - --node-ip="

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
    region: str,
    rule_file: str = DEV_CHAR_RULE_FILE,
) -> str:
    """The bash script for every server of `plan` (a hybrid pool), run as root in the folder holding the pool's
    NodeConfig as `nodeConfig.yaml`: no argument joins, `upgrade <kubernetes version>` upgrades. `vpc_cidr` gives
    the address whose route picks the node IP; `region` is the cluster's (the SSM installer's bucket);
    `rule_file` is for tests."""
    provider = plan.pool.credentials.provider
    lines = [
        "#!/bin/bash",
        f"# Join this server to hybrid pool {plan.name}, or upgrade it: run as root where {NODE_CONFIG_FILE} (the",
        f"# pool's hybridNodeConfig-{plan.name} output) is. No argument joins; 'upgrade <kubernetes version>'",
        "# upgrades. NODE_IP=<address> sets the address the kubelet registers"
        + ("; NODE_NAME=<name> the node name (default: the certificate's CN)." if provider != "ssm" else "."),
        "set -euo pipefail",
        f"config={NODE_CONFIG_FILE}",
        'mode="${1:-join}"',
        _IN_CIDR,
        *_server_config(plan, vpc_cidr),
        *_fetch_nodeadm(),
        'case "$mode" in',
        "  join)",
        "    server_config",
        "    fetch_nodeadm",
        f"    ./{nodeadm_install_command(kubernetes_version, provider, region)}",
        f"    ./nodeadm init --config-source file://{NODE_CONFIG_FILE}",
        "    ;;",
        "  upgrade)",
        '    [ -n "${2:-}" ] || { echo "usage: $0 upgrade <kubernetes version>" >&2; exit 64; }',
        "    server_config",
        "    fetch_nodeadm",
        f'    ./nodeadm upgrade "$2" --config-source file://{NODE_CONFIG_FILE}',
        "    ;;",
        '  *) echo "usage: $0 [upgrade <kubernetes version>]" >&2; exit 64 ;;',
        "esac",
    ]
    if plan.is_gpu:
        lines += _gpu_commands(plan, rule_file)
    return "\n".join(lines) + "\n"


def _server_config(plan: PoolPlan, vpc_cidr: IPv4Network | str) -> list[str]:
    """`server_config`: this server's edits to its copy of the NodeConfig, idempotent (a re-run with another
    NODE_IP or NODE_NAME replaces the value), each checked after the edit."""
    network = plan.pool.network
    node_cidrs = [str(c) for c in network.remote_node_cidrs] if network is not None else []
    probe = str(next(IPv4Network(str(vpc_cidr)).hosts()))
    inside = " || ".join(f'in_cidr "$node_ip" {cidr}' for cidr in node_cidrs) or "true"
    hint = "set NODE_IP to this server's address on the node network"
    lines = [
        "server_config() {",
        "  local node_ip route",
        '  if [ -n "${NODE_IP:-}" ]; then',
        '    node_ip="$NODE_IP"',
        f'  elif route="$(ip -4 -o route get {probe} 2>&1)"; then',
        '    node_ip="$(sed -n \'s/.* src \\([0-9.]*\\).*/\\1/p\' <<<"$route")"',
        "  else",
        f'    echo "no route to the VPC ({probe}): $route; {hint}" >&2',
        "    exit 1",
        "  fi",
        f"  if ! [[ $node_ip =~ ^([0-9]{{1,3}}\\.){{3}}[0-9]{{1,3}}$ ]] || ! {{ {inside}; }}; then",
        f"    echo \"node IP '$node_ip' is not in remoteNodeCidrs ({', '.join(node_cidrs)}): {hint}\" >&2",
        "    exit 1",
        "  fi",
        f"  if grep -q -- '^{_NODE_IP_ITEM}' \"$config\"; then",
        f'    sed -i "s|^{_NODE_IP_ITEM}.*$|{_NODE_IP_ITEM}$node_ip|" "$config"',
        "  else",
        f'    sed -i "s|^{KUBELET_FLAGS_LINE}$|&\\n{_NODE_IP_ITEM}$node_ip|" "$config"',
        "  fi",
        f'  grep -qx -- "{_NODE_IP_ITEM}$node_ip" "$config" || {{',
        f"    echo \"could not set --node-ip=$node_ip in $config (no '{KUBELET_FLAGS_LINE.strip()}' list under "
        'kubelet?)" >&2',
        "    exit 1",
        "  }",
    ]
    if plan.pool.credentials.provider == "iam-roles-anywhere":
        lines += _node_name_lines()
    return [*lines, "}"]


def _node_name_lines() -> list[str]:
    """Roles Anywhere: the node name is the certificate's CN (or NODE_NAME), a valid Kubernetes node name of at most
    `NODE_NAME_MAX` characters, set in `nodeName` whatever it held before."""
    return [
        "  local cert subject node_name",
        '  cert="$(sed -n \'s/^ *certificatePath: *//p\' "$config" | tr -d "\\"\'")"',
        '  if [ -n "${NODE_NAME:-}" ]; then',
        '    node_name="$NODE_NAME"',
        '  elif subject="$(openssl x509 -noout -subject -nameopt multiline -in "$cert" 2>&1)"; then',
        "    node_name=\"$(sed -n 's/^ *commonName *= *//p' <<<\"$subject\" | sed -n '1s/ *$//p')\"",
        "  else",
        '    echo "cannot read the node certificate $cert (certificatePath in $config): $subject" >&2',
        "    exit 1",
        "  fi",
        '  if [ -z "$node_name" ]; then',
        '    echo "the certificate $cert has no CN: the node name must be its CN; set NODE_NAME" >&2',
        "    exit 1",
        "  fi",
        f'  if [ "${{#node_name}}" -gt {NODE_NAME_MAX} ]; then',
        f"    echo \"node name '$node_name' is longer than {NODE_NAME_MAX} characters, which nodeadm refuses\" >&2",
        "    exit 1",
        "  fi",
        "  if ! [[ $node_name =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]]; then",
        "    echo \"node name '$node_name' is not a Kubernetes node name (lowercase letters, digits, '-', '.')\" >&2",
        "    exit 1",
        "  fi",
        '  sed -i "s|^\\( *nodeName:\\).*$|\\1 $node_name|" "$config"',
        '  grep -q "^ *nodeName: $node_name$" "$config" || { echo "could not set nodeName in $config" >&2; exit 1; }',
    ]


def _fetch_nodeadm() -> list[str]:
    """`fetch_nodeadm`: always the pinned release, so a join or upgrade never runs a nodeadm older or newer than
    the one the plan was checked against."""
    return [
        "fetch_nodeadm() {",
        "  local arch",
        '  case "$(uname -m)" in aarch64) arch=arm64 ;; *) arch=amd64 ;; esac',
        f'  curl -fsSL -o nodeadm "{nodeadm_url(nodeadm_release())}"',
        "  chmod +x nodeadm",
        "}",
    ]


def _gpu_commands(plan: PoolPlan, rule_file: str) -> Sequence[str]:
    return [
        "# The NVIDIA runtime, and GPUs that survive systemctl daemon-reload (again after an upgrade: idempotent)",
        *containerd_runtime_commands(plan),
        *device_symlink_commands(rule_file),
    ]
