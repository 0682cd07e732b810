"""Joining on-prem servers with no more egress than documented: the NodeConfig carries the cluster's endpoint, CA and
service CIDR (so `nodeadm init` makes no `eks:DescribeCluster` call) and conforms to nodeadm's schema; the egress
list is derived from the images the plan runs on hybrid nodes; the join script sets each server's `--node-ip`,
joins, and installs the /dev/char links that keep GPUs through `systemctl daemon-reload`."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.plan.mocks import FAKE_CA
from blueprint.plan.runner import stack_file
from components.catalog.versions import nodeadm_release
from components.planning.gpu_runtime import DEV_CHAR_RULE, DEV_CHAR_SYMLINKS, NVIDIA_CTK_PATH
from components.planning.hybrid import (
    ClusterDetails,
    RolesAnywhere,
    SsmActivation,
    hybrid_node_config,
    offline_cluster_details,
    render_node_config,
)
from components.planning.hybrid.egress import EKS_REGISTRY_ACCOUNT, HybridImage, egress, registry_of
from components.planning.hybrid.join_script import join_script, nodeadm_url
from components.planning.hybrid.node_config import ENDPOINT_PLACEHOLDER, KNOWN_AFTER_UP, SECRET_PLACEHOLDER
from tests.builders import HYBRID_POOL, file_plan, first_pool_plan, pool, shipped_stack
from tests.charts.conftest import require_charts
from tests.nodeconfig_schema import problems
from tests.test_hybrid import CA_PEM

PROJECT = "gpu-clusters"
PINNED_NODEADM_AMD64 = nodeadm_url(nodeadm_release()).replace("$arch", "amd64")
SSM = SsmActivation(activation_id="0c1b2a39-8a4f-4c3d-9e2f-1a2b3c4d5e6f", activation_code="A" * 20)
CLUSTER = ClusterDetails("https://ABCDEF.gr7.us-east-1.eks.amazonaws.com", FAKE_CA, "172.20.0.0/16")


@pytest.fixture(autouse=True, scope="module")
def _schema() -> None:
    require_charts()  # the schema sits beside the chart sources in the shared reference


def needs_describe_cluster(document: dict[str, Any]) -> bool:
    """aws/eks-hybrid `internal/node/hybrid/configenricher.go` `needsClusterDetails`: any of the three empty."""
    cluster = document["spec"]["cluster"]
    return not (cluster.get("apiServerEndpoint") and cluster.get("certificateAuthority") and cluster.get("cidr"))


# ------------------------------------------------------------------------------------------------ NodeConfig
@pytest.mark.program
def test_the_exported_node_config_conforms_and_spares_the_describe_cluster_call() -> None:
    document = yaml.safe_load(shipped_stack("hybrid").exports["hybridNodeConfig-a40"])
    assert problems(document) == []
    assert not needs_describe_cluster(document)
    assert document["spec"]["cluster"]["cidr"] == "172.20.0.0/16"


def test_a_roles_anywhere_node_config_conforms_too() -> None:
    plan = first_pool_plan(
        pool(HYBRID_POOL, credentials={"provider": "iam-roles-anywhere", "trustAnchorCertificate": CA_PEM})
    )
    arn = "arn:aws:rolesanywhere:us-east-1:123456789012:trust-anchor/abc"
    credentials = RolesAnywhere(trust_anchor_arn=arn, profile_arn=arn, role_arn=arn)
    document = hybrid_node_config("gpu", "us-east-1", CLUSTER, credentials, plan)
    assert problems(document) == []
    assert not needs_describe_cluster(document)


def test_the_schema_check_catches_what_nodeadm_would_refuse() -> None:
    """The checker is not vacuous: a misspelt field and a CA that is not base64 are reported."""
    document = hybrid_node_config("gpu", "us-east-1", CLUSTER, SSM, first_pool_plan(HYBRID_POOL))
    document["spec"]["cluster"]["endpoint"] = document["spec"]["cluster"].pop("apiServerEndpoint")
    document["spec"]["cluster"]["certificateAuthority"] = "not base64!"
    assert problems(document) == [
        "$.spec.cluster.certificateAuthority: 'not base64!' is not base64",
        "$.spec.cluster: unknown field 'endpoint'",
    ]
    assert needs_describe_cluster(document)


@pytest.mark.program
def test_the_offline_plan_shows_placeholders_where_pulumi_up_fills_in() -> None:
    plan = shipped_stack("hybrid").plan["summary"]["hybrid"]
    document = next(p for p in plan["pools"] if p["name"] == "a40")["nodeConfig"]
    cluster = document["spec"]["cluster"]
    assert cluster["apiServerEndpoint"] == ENDPOINT_PLACEHOLDER
    assert cluster["cidr"] == "172.20.0.0/16"  # config, known now
    assert document["spec"]["hybrid"]["ssm"] == {"activationCode": SECRET_PLACEHOLDER, "activationId": KNOWN_AFTER_UP}
    # the one field the schema refuses is the placeholder CA: nobody can join with the plan's copy by mistake
    assert problems(document) == [f"$.spec.cluster.certificateAuthority: {KNOWN_AFTER_UP!r} is not base64"]
    assert offline_cluster_details("172.20.0.0/16").certificate_authority == KNOWN_AFTER_UP


# ------------------------------------------------------------------------------------------------- egress
def hosts(summary: dict[str, Any]) -> dict[str, str]:
    return {rule["host"]: rule["phase"] for rule in summary["hybrid"]["egress"]}


@pytest.mark.program
def test_the_shipped_hybrid_stack_reaches_exactly_its_endpoints_and_registries() -> None:
    summary = shipped_stack("hybrid").plan["summary"]
    assert hosts(summary) == {
        "hybrid-assets.eks.amazonaws.com": "install",
        "amazon-ssm-us-east-1.s3.us-east-1.amazonaws.com": "install",
        "ssm.us-east-1.amazonaws.com": "ongoing",
        "sts.us-east-1.amazonaws.com": "ongoing",
        "eks-auth.us-east-1.api.aws": "ongoing",
        "api.ecr.us-east-1.amazonaws.com": "ongoing",
        "prod-us-east-1-starport-layer-bucket.s3.us-east-1.amazonaws.com": "ongoing",
        f"{EKS_REGISTRY_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com": "ongoing",
        "public.ecr.aws": "ongoing",  # Cilium
        "nvcr.io": "ongoing",  # device plugin, DCGM exporter
        "quay.io": "ongoing",  # node exporter
        "registry.k8s.io": "ongoing",  # NFS CSI node plugin
        "registry-1.docker.io": "ongoing",  # the vLLM server
        "auth.docker.io": "ongoing",
    }
    # the NodeConfig carries endpoint, CA and service CIDR: the EKS regional API is not needed
    assert "eks.us-east-1.amazonaws.com" not in hosts(summary)
    assert {r["registry"] for r in summary["hybrid"]["images"]} == {
        "public.ecr.aws",
        "nvcr.io",
        "quay.io",
        "registry.k8s.io",
        "docker.io",
        f"{EKS_REGISTRY_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com",
    }


def changed_hybrid_stack(tmp_path: Path, change: Any) -> dict[str, Any]:
    config = copy.deepcopy(yaml.safe_load(stack_file("hybrid").read_text())["config"])
    change(config)
    path = tmp_path / "Pulumi.hybrid-changed.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return file_plan(path)["summary"]


@pytest.mark.program
def test_the_registries_follow_the_images_not_a_hand_written_list(tmp_path: Path) -> None:
    """A serving image from another registry adds that registry, and Docker Hub, which nothing else on the servers
    pulls from, leaves the list; Roles Anywhere replaces SSM's hosts."""

    def change(config: dict[str, Any]) -> None:
        config[f"{PROJECT}:workloads"]["serving"][0]["image"] = "ghcr.io/example/llm-server:1.0.0"
        a40 = next(p for p in config[f"{PROJECT}:nodePools"] if p["name"] == "a40")
        a40["credentials"] = {
            "provider": "iam-roles-anywhere",
            "trustAnchorCertificate": CA_PEM,
        }

    changed = hosts(changed_hybrid_stack(tmp_path, change))
    shipped = hosts(shipped_stack("hybrid").plan["summary"])
    assert set(changed) - set(shipped) == {
        "ghcr.io",
        "rolesanywhere.amazonaws.com",
        "rolesanywhere.us-east-1.amazonaws.com",
    }
    assert set(shipped) - set(changed) == {
        "registry-1.docker.io",
        "auth.docker.io",
        "amazon-ssm-us-east-1.s3.us-east-1.amazonaws.com",
        "ssm.us-east-1.amazonaws.com",
    }


@pytest.mark.parametrize(
    ("reference", "registry"),
    [
        ("vllm/vllm-openai:v0.31.0", "docker.io"),
        ("busybox:1.36", "docker.io"),
        ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "nvcr.io"),
        ("registry.example.com:5000/llm:1", "registry.example.com:5000"),
        ("localhost/llm:1", "localhost"),
    ],
)
def test_registry_of_resolves_references_as_container_runtimes_do(reference: str, registry: str) -> None:
    assert registry_of(reference) == registry


def test_ecr_api_and_layer_bucket_only_with_an_ecr_registry() -> None:
    only_public = egress("us-east-1", ["ssm"], [HybridImage("chart x", "quay.io/a/b:1")])
    assert not any("ecr" in rule.host for rule in only_public)


# -------------------------------------------------------------------------------------------- join script
def stub(bin_dir: Path, name: str, body: str) -> None:
    """A command that runs `body`: a POSIX sh script, which starts in half the time of bash (a join runs eight)."""
    (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / name).chmod(0o755)


NODEADM_STUB = '#!/bin/sh\necho "nodeadm $*" >> {log}\n'


def run_join(
    tmp_path: Path,
    plan_pool: dict[str, Any],
    route_src: str = "192.168.100.11",
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    ip_body: str | None = None,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the pool's script (`args`: none joins, `upgrade <version>` upgrades) with `ip`, `curl`, `nodeadm`,
    `nvidia-ctk` and `systemctl` stubbed (each logs its arguments; `curl` writes the nodeadm stub where `-o`
    says), in a folder holding the pool's rendered NodeConfig; the udev rule goes to the folder. Roles Anywhere
    pools' NodeConfig points at `cert.pem` in the folder."""
    work = tmp_path / "server"
    bin_dir = tmp_path / "bin"
    work.mkdir(exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls"
    plan = first_pool_plan(plan_pool)
    credentials = SSM
    if plan.pool.credentials.provider == "iam-roles-anywhere":
        arn = "arn:aws:iam::123456789012:role/x"
        credentials = RolesAnywhere(  # type: ignore[assignment]
            trust_anchor_arn=arn, profile_arn=arn, role_arn=arn, certificate_path=str(work / "cert.pem")
        )
    config = work / "nodeConfig.yaml"
    if not config.exists():
        config.write_text(render_node_config(hybrid_node_config("gpu", "us-east-1", CLUSTER, credentials, plan)))
    route = f'echo "10.0.0.1 via 192.168.100.1 dev eth1 src {route_src} uid 0"'
    stub(bin_dir, "ip", f'echo "ip $*" >> {log}; {ip_body or route}')
    (tmp_path / "nodeadm.stub").write_text(NODEADM_STUB.format(log=log))
    stub(
        bin_dir,
        "curl",
        f'echo "curl $*" >> {log}; while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done; '
        f'cp {tmp_path / "nodeadm.stub"} "$out"',
    )
    stub(bin_dir, "nvidia-ctk", f'echo "nvidia-ctk $*" >> {log}')
    stub(bin_dir, "systemctl", f'echo "systemctl $*" >> {log}')
    stub(bin_dir, "hostname", "echo not-the-cn")  # the old script named Roles Anywhere nodes after the host
    stub(bin_dir, "uname", "echo x86_64")
    rule_file = tmp_path / "71-nvidia-dev-char.rules"
    script = join_script(plan, "1.35", "10.0.0.0/16", "us-east-1", rule_file=str(rule_file))
    full_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", **(env or {})}
    result = subprocess.run(
        ["bash", "-c", script, "join.sh", *args], cwd=work, env=full_env, capture_output=True, text=True, check=False
    )
    return result, tmp_path


def calls(root: Path) -> list[str]:
    return (root / "calls").read_text().splitlines()


def node_config(root: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((root / "server" / "nodeConfig.yaml").read_text())
    return document


def test_the_join_script_registers_the_address_that_reaches_the_vpc(tmp_path: Path) -> None:
    result, root = run_join(tmp_path, HYBRID_POOL)
    assert result.returncode == 0, result.stderr
    document = node_config(root)
    assert document["spec"]["kubelet"]["flags"][0] == "--node-ip=192.168.100.11"
    assert problems(document) == []  # still a NodeConfig nodeadm reads
    assert calls(root) == [
        "ip -4 -o route get 10.0.0.1",
        f"curl -fsSL -o nodeadm {PINNED_NODEADM_AMD64}",
        "nodeadm install 1.35 --credential-provider ssm --region us-east-1",
        "nodeadm init --config-source file://nodeConfig.yaml",
        "nvidia-ctk runtime configure --runtime=containerd --nvidia-runtime-name=nvidia "
        "--drop-in-config=/etc/containerd/config.d/99-nvidia.toml --set-as-default",
        "systemctl restart containerd",
        "nvidia-ctk system create-dev-char-symlinks --create-all",
    ]


def test_the_udev_rule_recreates_the_links_the_script_creates_now(tmp_path: Path) -> None:
    """NVIDIA's rule runs the same command, by absolute path, whenever the driver binds (after every reboot)."""
    result, root = run_join(tmp_path, HYBRID_POOL)
    assert result.returncode == 0, result.stderr
    rule = (root / "71-nvidia-dev-char.rules").read_text()
    assert rule == DEV_CHAR_RULE + "\n"
    assert 'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia"' in rule
    run = rule.split('RUN+="')[1].rstrip('"\n')
    assert run == f"{NVIDIA_CTK_PATH} {DEV_CHAR_SYMLINKS.removeprefix('nvidia-ctk ')}"
    assert f"nvidia-ctk {DEV_CHAR_SYMLINKS.removeprefix('nvidia-ctk ')}" in calls(root)


def test_a_multi_homed_server_sets_its_address_and_a_rerun_replaces_it(tmp_path: Path) -> None:
    result, root = run_join(tmp_path, HYBRID_POOL, route_src="10.20.0.5", env={"NODE_IP": "192.168.100.42"})
    assert result.returncode == 0, result.stderr
    again, _ = run_join(tmp_path, HYBRID_POOL, env={"NODE_IP": "192.168.100.43"})
    assert again.returncode == 0, again.stderr
    flags = node_config(root)["spec"]["kubelet"]["flags"]
    assert [f for f in flags if f.startswith("--node-ip=")] == ["--node-ip=192.168.100.43"]
    assert problems(node_config(root)) == []


@pytest.mark.parametrize("node_ip", ["not-an-address", "192.168.100.5|x", "192.168.100.5 "])
def test_a_node_ip_that_is_not_an_address_is_refused(tmp_path: Path, node_ip: str) -> None:
    result, root = run_join(tmp_path, HYBRID_POOL, env={"NODE_IP": node_ip})
    assert result.returncode == 1
    assert f"node IP '{node_ip}' is not in remoteNodeCidrs (192.168.100.0/24)" in result.stderr
    assert "--node-ip" not in (root / "server" / "nodeConfig.yaml").read_text()


def test_a_server_without_a_route_to_the_vpc_gets_the_node_ip_hint(tmp_path: Path) -> None:
    unreachable = 'echo "RTNETLINK answers: Network is unreachable" >&2; exit 2'
    result, root = run_join(tmp_path, HYBRID_POOL, ip_body=unreachable)
    assert result.returncode == 1
    assert result.stderr == (
        "no route to the VPC (10.0.0.1): RTNETLINK answers: Network is unreachable; "
        "set NODE_IP to this server's address on the node network\n"
    )
    assert not any(call.startswith(("curl", "nodeadm")) for call in calls(root))


def test_an_address_outside_the_node_network_stops_before_nodeadm(tmp_path: Path) -> None:
    """The default route's address on a multi-homed server (a storage or management network) is refused: EKS only
    reaches kubelets inside remoteNodeCidrs."""
    result, root = run_join(tmp_path, HYBRID_POOL, route_src="10.20.0.5")
    assert result.returncode == 1
    assert "node IP '10.20.0.5' is not in remoteNodeCidrs (192.168.100.0/24)" in result.stderr
    assert not any(call.startswith("nodeadm") for call in calls(root))
    assert "--node-ip" not in (root / "server" / "nodeConfig.yaml").read_text()


@pytest.mark.program
def test_the_ssm_installer_comes_from_the_region_the_egress_list_names() -> None:
    """nodeadm's default installer Region is us-west-2: the script passes the cluster's, the one the site opens."""
    summary = shipped_stack("hybrid").plan["summary"]
    installer = next(h for h in hosts(summary) if h.startswith("amazon-ssm-"))
    installer_region = re.fullmatch(r"amazon-ssm-([a-z0-9-]+)\.s3\.([a-z0-9-]+)\.amazonaws\.com", installer)
    assert installer_region is not None and installer_region[1] == installer_region[2]
    script = next(p for p in summary["hybrid"]["pools"] if p["name"] == "a40")["joinScript"]
    install = next(line.strip() for line in script.splitlines() if "nodeadm install" in line)
    assert install.split()[install.split().index("--region") + 1] == installer_region[1] == "us-east-1"


def test_every_download_is_the_pinned_nodeadm_even_with_one_in_the_folder(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "nodeadm").write_text("#!/bin/bash\necho stale nodeadm >&2; exit 1\n")
    result, root = run_join(tmp_path, HYBRID_POOL)
    assert result.returncode == 0, result.stderr
    assert f"curl -fsSL -o nodeadm {PINNED_NODEADM_AMD64}" in calls(root)
    assert "/releases/latest/" not in PINNED_NODEADM_AMD64


def test_an_upgrade_keeps_the_servers_node_ip(tmp_path: Path) -> None:
    """The upgrade runs the same per-server edits as the join, on the pool's NodeConfig as exported."""
    result, root = run_join(tmp_path, HYBRID_POOL, env={"NODE_IP": "192.168.100.42"}, args=("upgrade", "1.36"))
    assert result.returncode == 0, result.stderr
    assert node_config(root)["spec"]["kubelet"]["flags"][0] == "--node-ip=192.168.100.42"
    assert [c for c in calls(root) if c.startswith(("curl", "nodeadm"))] == [
        f"curl -fsSL -o nodeadm {PINNED_NODEADM_AMD64}",
        "nodeadm upgrade 1.36 --config-source file://nodeConfig.yaml",
    ]


def test_an_upgrade_without_a_version_is_a_usage_error(tmp_path: Path) -> None:
    result, root = run_join(tmp_path, HYBRID_POOL, args=("upgrade",))
    assert result.returncode == 64
    assert "usage: join.sh upgrade <kubernetes version>" in result.stderr
    assert not (root / "calls").exists()


RA_POOL = pool(HYBRID_POOL, credentials={"provider": "iam-roles-anywhere", "trustAnchorCertificate": CA_PEM})


def certificate(tmp_path: Path, subject: str) -> None:
    """A real self-signed node certificate where the Roles Anywhere NodeConfig's certificatePath points. Its key is
    EC P-256, which Roles Anywhere signs with as it does with RSA (AWS4-X509-ECDSA-SHA256, its user guide's
    "authentication signing process"): made in a millisecond, where an RSA key's prime search takes up to a second;
    the script reads only the subject."""
    (tmp_path / "server").mkdir(exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days",
         "1", "-subj", subject,
         "-keyout", str(tmp_path / "server" / "key.pem"), "-out", str(tmp_path / "server" / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip


def test_a_roles_anywhere_server_is_named_after_its_certificate_cn(tmp_path: Path) -> None:
    """The role's trust policy requires RoleSessionName == the certificate's CN, and nodeadm uses nodeName."""
    certificate(tmp_path, "/O=Example Corp/CN=a40-server-7/OU=gpu")
    result, root = run_join(tmp_path, RA_POOL)
    assert result.returncode == 0, result.stderr
    document = node_config(root)
    assert document["spec"]["hybrid"]["iamRolesAnywhere"]["nodeName"] == "a40-server-7"
    assert problems(document) == []
    assert "nodeadm install 1.35 --credential-provider iam-ra --region us-east-1" in calls(root)


def test_an_upgrade_of_a_roles_anywhere_server_keeps_its_name_and_address(tmp_path: Path) -> None:
    certificate(tmp_path, "/CN=a40-server-7")
    result, root = run_join(tmp_path, RA_POOL, env={"NODE_IP": "192.168.100.42"}, args=("upgrade", "1.36"))
    assert result.returncode == 0, result.stderr
    document = node_config(root)
    assert document["spec"]["hybrid"]["iamRolesAnywhere"]["nodeName"] == "a40-server-7"
    assert document["spec"]["kubelet"]["flags"][0] == "--node-ip=192.168.100.42"
    assert "nodeadm upgrade 1.36 --config-source file://nodeConfig.yaml" in calls(root)


def test_node_name_overrides_the_cn_and_a_rerun_replaces_the_name(tmp_path: Path) -> None:
    certificate(tmp_path, "/CN=a40-server-7")
    first, root = run_join(tmp_path, RA_POOL, env={"NODE_NAME": "a40-old"})
    assert first.returncode == 0, first.stderr
    again, _ = run_join(tmp_path, RA_POOL)
    assert again.returncode == 0, again.stderr
    assert node_config(root)["spec"]["hybrid"]["iamRolesAnywhere"]["nodeName"] == "a40-server-7"


@pytest.mark.parametrize(
    ("subject", "env", "error"),
    [
        ("/O=Example Corp", {}, "has no CN: the node name must be its CN; set NODE_NAME"),
        ("/CN=a40-server-7", {"NODE_NAME": "n" * 65}, f"node name '{'n' * 65}' is longer than 64 characters"),
        ("/CN=A40_Server", {}, "node name 'A40_Server' is not a Kubernetes node name"),
        (None, {}, "cannot read the node certificate"),
    ],
)
def test_a_bad_node_name_stops_before_nodeadm(
    tmp_path: Path, subject: str | None, env: dict[str, str], error: str
) -> None:
    if subject is not None:
        certificate(tmp_path, subject)
    result, root = run_join(tmp_path, RA_POOL, env=env)
    assert result.returncode == 1
    assert error in result.stderr
    assert not any(call.startswith(("curl", "nodeadm")) for call in calls(root))


@pytest.mark.program
def test_the_plan_and_the_stack_output_print_the_same_script() -> None:
    stack = shipped_stack("hybrid")
    planned = next(p for p in stack.plan["summary"]["hybrid"]["pools"] if p["name"] == "a40")
    assert stack.exports["hybridJoinScript-a40"] == planned["joinScript"]
    assert planned["nodeadmInstall"] == stack.exports["hybridNodeadmInstall-a40"]
