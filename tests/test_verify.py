"""`blueprint verify` against a fake Kubernetes API: the node, allocatable and daemon checks, the parsers on real
tool output (tests/data/verify/SOURCES.md), thresholds that pass and fail, every check through the CLI, and the
clean-up of test pods on failure, on timeout and on Ctrl-C."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from blueprint.verify import allocatable, command, daemons, nodes
from blueprint.verify.context import DCGM_IMAGE, Context, Options
from blueprint.verify.expectations import Expectations, expectations, load_spec
from blueprint.verify.kube import KubeError, KubernetesApi, kubeconfig_source
from blueprint.verify.nccl import expected_busbw, judge_two_node
from blueprint.verify.parsers import ParseError, dcgm_failures, parse_dcgm, parse_nccl, parse_storage, parse_topology
from blueprint.verify.pods import RUN_LABEL, PodSession
from blueprint.verify.runner import run_checks, selected
from blueprint.verify.topology import judge
from components.planning.check_pods import pod_spec
from tests.builders import TRAINING_POOL, stack_config
from tests.charts.rendering import level_violations
from tests.verify_fakes import FakeApi, daemon_pod, node, sample, workload_pod

CORPUS = Path(__file__).parent / "corpus" / "good"
#: Whole GPUs shared by time-slicing: a p5 pool (EFA, two-node NCCL) and a g5 pool (PCIe, one-node NCCL).
TIME_SLICED = """config:
  aws:region: us-east-1
  gpu-clusters:cluster: {name: corpus, endpoint: {privateAccessCidrs: [192.168.10.0/24]}}
  gpu-clusters:network: {availabilityZones: [us-east-1a, us-east-1b],
                         siteConnection: {transitGatewayId: tgw-0f3a9c1e27d84b5a6}}
  gpu-clusters:nodePools:
    - {name: system, role: system, instanceType: m7i.xlarge, scaling: {min: 2, max: 3}}
    - {name: h100, role: training, instanceType: p5.48xlarge, scaling: {min: 0, max: 2},
       devicePlugin: {timeSlicingReplicas: 2}}
    - {name: a10g, role: inference, instanceType: g5.48xlarge, scaling: {min: 0, max: 2},
       devicePlugin: {timeSlicingReplicas: 4}}
"""


@cache
def expect(stack: str) -> Expectations:
    return expectations(load_spec(stack, None))


@cache
def expect_file(path: Path) -> Expectations:
    return expectations(load_spec(None, path))


@pytest.fixture(scope="module")
def time_sliced(tmp_path_factory: pytest.TempPathFactory) -> Expectations:
    path = tmp_path_factory.mktemp("verify") / "time-sliced.yaml"
    path.write_text(TIME_SLICED)
    return expect_file(path)


def file_context(api: FakeApi, expect_: Expectations) -> Context:
    return Context(api, expect_, PodSession(api, "abc123", "default", sleep=lambda s: None), Options())


def context(api: FakeApi, stack: str = "training", options: Options | None = None) -> Context:
    return Context(api, expect(stack), PodSession(api, "abc123", "default", sleep=lambda s: None), options or Options())


def training_nodes(efa: int = 32, gpus: int = 8, count: int = 2) -> list[dict[str, Any]]:
    return [
        node("ip-10-0-0-1", "system", "m7i.xlarge"),
        node("ip-10-0-0-2", "system", "m7i.xlarge"),
        *(node(f"ip-10-0-1-{i}", "h100", "p5.48xlarge", gpus=gpus, efa=efa) for i in range(count)),
    ]


def training_daemons(names: list[str]) -> dict[str, list[dict[str, Any]]]:
    return {
        "kube-system": [
            daemon_pod(d, n)
            for n in names
            for d in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin", "eks-node-monitoring-agent", "dcgm-server")
        ],
        # the training stack runs the Prometheus path: NVIDIA's exporter chart in `monitoring`
        "monitoring": [daemon_pod("dcgm-exporter", n) for n in names],
    }


# ----------------------------------------------------------------------------------------------- expectations
def test_expectations_come_from_the_pool_plans_and_the_catalog() -> None:
    h100 = expect("training").pool("h100")
    assert h100 is not None
    assert (h100.min_nodes, h100.max_nodes, h100.gpus_per_node, h100.efa_devices, h100.fabric_gbps) == (
        0,
        4,
        8,
        32,
        3200,
    )
    assert h100.interconnect is not None and h100.interconnect.links == 18
    burst = expect("hybrid").pool("burst")
    assert burst is not None and burst.gpus_by_type == {"g6e.12xlarge": 4}
    assert burst.interconnect is not None and not burst.interconnect.nvlink
    a40 = expect("hybrid").pool("a40")
    assert a40 is not None and a40.kind == "hybrid" and (a40.min_nodes, a40.max_nodes) == (4, 4)
    assert [d.namespace for d in a40.daemons] == ["kube-system", "monitoring"]


def test_mig_and_time_sliced_pools_separate_advertised_slots_from_physical_gpus(time_sliced: Expectations) -> None:
    mig = expect_file(CORPUS / "mig-h100-pool.yaml").pool("mig")
    assert mig is not None and (mig.gpus_per_node, mig.physical_gpus) == (112, 8)
    assert mig.mig_layout == "7x 1g.10gb per GPU"
    mixed = expect_file(CORPUS / "mig-hybrid-h100-pcie.yaml").pool("h100")
    assert mixed is not None and (mixed.gpus_per_node, mixed.physical_gpus) == (0, 4)
    assert mixed.advertised_resources(None) == {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 8}
    h100 = time_sliced.pool("h100")
    assert h100 is not None and (h100.gpus_per_node, h100.physical_gpus, h100.mig_layout) == (16, 8, None)


# ----------------------------------------------------------------------------------------------- nodes
def test_nodes_pass_when_every_pool_is_ready_within_its_bounds() -> None:
    results = nodes.check(context(FakeApi(training_nodes())))
    assert [(r.target, r.status) for r in results] == [("system", "pass"), ("h100", "pass")]


def test_nodes_fail_on_a_node_not_ready_and_on_a_count_above_the_maximum() -> None:
    api = FakeApi([*training_nodes(count=5)[:-1], node("ip-10-0-1-9", "h100", "p5.48xlarge", ready=False)])
    h100 = next(r for r in nodes.check(context(api)) if r.target == "h100")
    assert h100.status == "fail"
    assert "5 nodes, the plan says 0..4" in h100.detail and "ip-10-0-1-9" in h100.detail
    assert h100.nodes == ("ip-10-0-1-9",)


def test_nodes_fail_when_a_system_pool_is_below_its_minimum_or_a_pool_is_unknown() -> None:
    api = FakeApi([node("ip-10-0-0-1", "system"), node("ip-10-0-9-9", "old-pool")])
    results = {r.target: r for r in nodes.check(context(api))}
    assert results["system"].status == "fail" and "1 nodes, the plan says 2..3" in results["system"].detail
    assert results["ip-10-0-9-9"].status == "fail"


def test_hybrid_servers_must_have_joined_as_hybrid_nodes() -> None:
    servers = [node(f"a40-{i}", "a40", gpus=4, hybrid=i != 3) for i in range(4)]
    cloud = [node("s1", "system"), node("s2", "system")]
    results = {r.target: r for r in nodes.check(context(FakeApi(cloud + servers), "hybrid"))}
    assert results["a40"].status == "fail" and "a40-3" in results["a40"].detail
    joined = [node(f"a40-{i}", "a40", gpus=4, hybrid=True) for i in range(4)]
    assert {r.target: r.status for r in nodes.check(context(FakeApi(cloud + joined), "hybrid"))}["a40"] == "pass"


# ----------------------------------------------------------------------------------------------- allocatable
def test_allocatable_gpus_and_efa_devices_match_the_catalog() -> None:
    results = allocatable.check(context(FakeApi(training_nodes())))
    assert [r.status for r in results] == ["pass", "pass"]
    assert results[0].measured == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}


def test_allocatable_fails_a_node_missing_efa_devices_or_gpus() -> None:
    api = FakeApi([node("ip-1", "h100", "p5.48xlarge", gpus=7, efa=31)])
    (result,) = allocatable.check(context(api))
    assert result.status == "fail" and result.nodes == ("ip-1",)
    assert (
        "nvidia.com/gpu 7 (expected 8)" in result.detail and "vpc.amazonaws.com/efa 31 (expected 32)" in result.detail
    )


def mixed_mig_node(name: str, state: str | None, mig_devices: int = 8) -> dict[str, Any]:
    labels = {"nvidia.com/mig.config.state": state} if state else {}
    return node(
        name, "h100", gpus=0, hybrid=True, resources={"nvidia.com/mig-3g.40gb": mig_devices}, extra_labels=labels
    )


def test_allocatable_compares_every_mig_resource_and_the_mig_state() -> None:
    expect_ = expect_file(CORPUS / "mig-hybrid-h100-pcie.yaml")
    api = FakeApi([mixed_mig_node("h100-0", "success"), mixed_mig_node("h100-1", "success")])
    results = allocatable.check(file_context(api, expect_))
    assert [r.status for r in results] == ["pass"] * 4
    assert results[1].measured == {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 8, "vpc.amazonaws.com/efa": 0}
    assert results[0].detail == "mig.config.state=success (2x 3g.40gb per GPU)"


def test_allocatable_fails_a_missing_mig_device_and_a_failed_or_unset_mig_state() -> None:
    expect_ = expect_file(CORPUS / "mig-hybrid-h100-pcie.yaml")
    api = FakeApi([mixed_mig_node("h100-0", "failed", mig_devices=6), mixed_mig_node("h100-1", None)])
    state0, devices0, state1, devices1 = allocatable.check(file_context(api, expect_))
    assert state0.status == "fail" and state0.nodes == ("h100-0",)
    assert state0.detail.startswith(
        "mig.config.state=failed: the mig-manager could not apply 2x 3g.40gb per GPU; see its logs"
    )
    assert devices0.status == "fail" and "nvidia.com/mig-3g.40gb 6 (expected 8)" in devices0.detail
    assert state1.status == "fail" and state1.detail.startswith("mig.config.state not set")
    assert devices1.status == "pass"


def test_allocatable_skips_a_pool_at_zero() -> None:
    (result,) = allocatable.check(context(FakeApi(training_nodes(count=0))))
    assert result.status == "skip"


# ----------------------------------------------------------------------------------------------- daemons
def test_daemons_pass_with_a_ready_pod_of_each_daemonset_on_each_gpu_node() -> None:
    names = ["ip-10-0-1-0", "ip-10-0-1-1"]
    results = daemons.check(context(FakeApi(training_nodes(), training_daemons(names))))
    assert [r.status for r in results] == ["pass", "pass"]


def test_daemons_fail_a_node_without_the_efa_plugin() -> None:
    pods = training_daemons(["ip-10-0-1-0", "ip-10-0-1-1"])
    pods["kube-system"] = [
        p
        for p in pods["kube-system"]
        if p["spec"]["nodeName"] != "ip-10-0-1-1"
        or p["metadata"]["ownerReferences"][0]["name"] != "aws-efa-k8s-device-plugin"
    ]
    results = {r.target: r for r in daemons.check(context(FakeApi(training_nodes(), pods)))}
    bad = results["h100/ip-10-0-1-1"]
    assert bad.status == "fail" and "EFA device plugin" in bad.detail and "NVIDIA" not in bad.detail


# ----------------------------------------------------------------------------------------------- parsers
@pytest.mark.parametrize("name", ["topo-p5.48xlarge.txt", "topo-h100-nv18-legend.txt"])
def test_topology_of_an_8_gpu_h100_is_nv18_between_every_pair(name: str) -> None:
    topology = parse_topology(sample(name))
    assert topology.gpus == tuple(f"GPU{i}" for i in range(8))
    assert {code for _, _, code in topology.pairs()} == {"NV18"}
    h100 = expect("training").pool("h100")
    assert h100 is not None
    assert judge(topology, 8, h100.interconnect) == (True, "NV18 between all 8 GPUs")


def test_topology_fails_nv12_or_pcie_where_nv18_is_promised() -> None:
    h100 = expect("training").pool("h100")
    assert h100 is not None
    ok, detail = judge(parse_topology(sample("topo-p4d.24xlarge.txt")), 8, h100.interconnect)
    assert not ok and "GPU0-GPU1 NV12" in detail
    assert not judge(parse_topology(sample("topo-g5.48xlarge.txt")), 8, h100.interconnect)[0]
    assert judge(parse_topology(sample("topo-p5.48xlarge.txt")), 4, h100.interconnect)[1].startswith("8 GPUs")


def test_topology_of_pcie_gpus_with_nic_columns() -> None:
    topology = parse_topology(sample("topo-8x4090-pcie-nics.txt"))
    assert len(topology.gpus) == 8 and {c for _, _, c in topology.pairs()} == {"SYS"}
    l40s = expect("inference").pool("l40s")
    assert l40s is not None
    assert judge(topology, 8, l40s.interconnect) == (True, "PCIe paths SYS between 8 GPUs")
    with pytest.raises(ParseError):
        parse_topology("nvidia-smi: command not found")


def test_nccl_two_p5_nodes_peak_bus_bandwidth_and_efa_transport() -> None:
    run = parse_nccl(sample("nccl-log-ofi-efa-h200.txt") + sample("nccl-all-reduce-2x-p5-16g.txt"))
    assert run.peak.size_bytes == 17179869184 and run.peak.busbw == 487.26 and run.peak.wrong == 0
    assert run.ofi_efa and run.network == "Libfabric"
    k8s = parse_nccl(sample("nccl-all-reduce-2x-p5.txt"))
    assert k8s.avg_busbw == 52.9753 and k8s.peak.busbw == 437.89


def test_nccl_thresholds_from_the_published_run_else_no_reference() -> None:
    h100 = expect("training").pool("h100")
    assert h100 is not None
    # 0.9 of AWS's published 2 x p5.48xlarge run (487.26 GB/s), not of the fabric's 400 GB/s
    assert expected_busbw(h100, 0.9) == 438.5
    run = parse_nccl(sample("nccl-log-ofi-efa-h200.txt") + sample("nccl-all-reduce-2x-p5-16g.txt"))
    assert judge_two_node(run, expected_busbw(h100, 0.9))[0] == "pass"
    status, detail = judge_two_node(run, expected_busbw(h100, 1.1))
    assert status == "fail" and "487.26 GB/s < 536 GB/s" in detail
    # p4d shares the published p4de figure (78.33 GB/s), well above its fabric's 50 GB/s
    p4d = replace(h100, gpus_by_type={"p4d.24xlarge": 8}, fabric_gbps=400)
    assert expected_busbw(p4d, 0.9) == 70.5
    # no published run for the type: no threshold is made up, the bandwidth is reported unjudged
    p5en = replace(h100, gpus_by_type={"p5en.48xlarge": 8})
    assert expected_busbw(p5en, 0.9) is None
    status, detail = judge_two_node(run, None)
    assert status == "skip" and detail.startswith("no reference for the instance type: 487.26 GB/s")


def test_nccl_over_sockets_fails_whatever_the_bandwidth() -> None:
    run = parse_nccl(sample("nccl-log-socket-fallback.txt") + sample("nccl-all-reduce-2x-p5-16g.txt"))
    assert run.network == "Socket" and not run.ofi_efa
    status, detail = judge_two_node(run, None)
    assert status == "fail" and "EFA not in use (NCCL network: Socket)" in detail
    with pytest.raises(ParseError):
        parse_nccl(sample("nccl-log-socket-fallback.txt"))


def test_dcgm_diag_json_with_warnings_and_nulls_parses_and_a_failure_is_found() -> None:
    text = sample("dcgm-diag-r1-pass.json.txt")
    tests = parse_dcgm(text)
    assert len(tests) == 17 and not dcgm_failures(tests)
    failing = text.replace(
        '"name" : "Inforom",\n\t\t\t\t\t\t"results" :\n\t\t\t\t\t\t[\n\t\t\t\t\t\t\t{\n'
        '\t\t\t\t\t\t\t\t"gpu_ids" : "0,1,2,3,4,5,6,7",\n\t\t\t\t\t\t\t\t"status" : "PASS"',
        '"name" : "Inforom",\n\t\t\t\t\t\t"results" :\n\t\t\t\t\t\t[\n\t\t\t\t\t\t\t{\n'
        '\t\t\t\t\t\t\t\t"gpu_ids" : "0,1,2,3,4,5,6,7",\n\t\t\t\t\t\t\t\t"status" : "FAIL"',
    )
    assert [t.name for t in dcgm_failures(parse_dcgm(failing))] == ["Inforom"]
    dcgm4 = json.dumps({"tests": [{"name": "memory", "results": [{"entity_id": 3, "status": "Fail"}]}]})
    assert [(t.name, t.gpus) for t in dcgm_failures(parse_dcgm(dcgm4))] == [("memory", "3")]


def test_storage_probe_output() -> None:
    assert parse_storage('noise\n{"writeMBps": 812.5, "readMBps": 1500.0}\n') == {
        "writeMBps": 812.5,
        "readMBps": 1500.0,
    }
    with pytest.raises(ParseError):
        parse_storage("Traceback: OSError")


# ----------------------------------------------------------------------------------------------- the whole command
def behaviour(
    topology: str = "topo-p5.48xlarge.txt", dcgm: str = "dcgm-diag-r1-pass.json.txt", storage_mbps: float = 2000
):
    nccl_log = sample("nccl-log-ofi-efa-h200.txt") + sample("nccl-all-reduce-2x-p5-16g.txt")

    def act(body: dict[str, Any]) -> tuple[str, str]:
        check = body["metadata"]["labels"]["blueprint-verify/check"]
        name = body["metadata"]["name"]
        if check == "topology":
            return "Succeeded", sample(topology)
        if check == "dcgm":
            return "Succeeded", sample(dcgm)
        if check == "nccl":
            return ("Running", "") if "-w" in name else ("Succeeded", nccl_log)
        return "Succeeded", json.dumps({"writeMBps": storage_mbps, "readMBps": storage_mbps * 1.5})

    return act


def training_api(**kwargs: Any) -> FakeApi:
    names = ["ip-10-0-1-0", "ip-10-0-1-1"]
    claims = {
        ("training", "lustre-scratch"): {"status": {"phase": "Bound"}, "spec": {"accessModes": ["ReadWriteMany"]}}
    }
    return FakeApi(training_nodes(), training_daemons(names), behaviour(**kwargs), claims)


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], api: FakeApi, *args: str):
    from blueprint import cli

    monkeypatch.setattr(command, "connect", lambda path: api)
    capsys.readouterr()
    code = cli.main(["verify", "--stack", "training", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_check_runs_against_the_fake_api_and_cleans_up(monkeypatch, capsys, kubeconfig: Path) -> None:
    api = training_api()
    code, out, err = run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--format", "json")
    doc = json.loads(out)
    assert code == 0, doc
    assert doc["checks"] == [
        "nodes",
        "allocatable",
        "daemons",
        "conditions",
        "drivers",
        "topology",
        "dcgm",
        "nccl",
        "storage",
    ]
    assert {r["check"] for r in doc["results"]} == set(doc["checks"])
    unjudged = [r for r in doc["results"] if r["status"] != "pass"]
    # a single node's all-reduce has no published figure: reported, not judged
    assert {(r["check"], r["status"]) for r in unjudged} == {("nccl", "skip")}, unjudged
    assert all(r["detail"].startswith("no reference for one node") for r in unjudged)
    assert doc["passed"] is True and doc["summary"]["fail"] == 0
    nccl = next(r for r in doc["results"] if r["check"] == "nccl" and "+" in r["target"])
    assert nccl["measured"] == 487.26 and nccl["expected"] == 389.8  # the default 0.8 of the published run
    # every pod and the SSH secret were deleted, and all carried the run's label
    assert api.created and api.secrets and not api.leftovers()
    assert {b["metadata"]["labels"][RUN_LABEL] for b in api.created.values()} == {doc["runId"]}
    assert "[1/9] nodes" in err


def test_the_result_table_fits_80_columns_on_stdout(monkeypatch, capsys, kubeconfig: Path) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(monkeypatch, capsys, training_api(), "--kubeconfig", str(kubeconfig))
    assert code == 0 and "[1/9] nodes" in err and "[1/9]" not in out
    assert "nccl" in out and "PASS" in out and "FAIL" not in out
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out


def test_the_nccl_pods_ask_for_what_an_efa_job_needs(monkeypatch, capsys, kubeconfig: Path) -> None:
    api = training_api()
    run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--only", "nccl")
    workers = [b for (_, n), b in api.created.items() if "-w" in n]
    assert len(workers) == 2
    limits = workers[0]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "8" and limits["vpc.amazonaws.com/efa"] == "32"
    assert limits["hugepages-2Mi"] == "5120Mi"
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in workers[0][
        "spec"
    ]["tolerations"]
    nodes_used = {w["spec"]["nodeSelector"]["kubernetes.io/hostname"] for w in workers}
    assert nodes_used == {"ip-10-0-1-0", "ip-10-0-1-1"}
    launcher = next(b for (_, n), b in api.created.items() if n.endswith("launcher"))
    script = launcher["spec"]["containers"][0]["command"][-1]
    assert "FI_PROVIDER=efa" in script and "NCCL_DEBUG=INFO" in script and "-np 16" in script
    assert script.split(" && ")[-1].startswith("/opt/amazon/openmpi/bin/mpirun --prefix /opt/amazon/openmpi")
    assert launcher["spec"]["containers"][0].get("resources") is None
    # sshd listens before the worker counts as Ready, so mpirun never connects too early
    assert all(w["spec"]["containers"][0]["readinessProbe"]["tcpSocket"] == {"port": 22} for w in workers)


def test_the_nccl_run_uses_the_reference_manifests_library_path_and_tuning(monkeypatch, capsys, kubeconfig) -> None:
    api = training_api()
    run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--only", "nccl")
    launcher = next(b for (_, n), b in api.created.items() if n.endswith("launcher"))
    container = launcher["spec"]["containers"][0]
    script = container["command"][-1]
    # the manifest's directories go in front of the image's own value, which bash expands in the container
    assert script.startswith(
        "export LD_LIBRARY_PATH=/opt/amazon/openmpi/lib:/opt/nccl/build/lib:/opt/amazon/efa/lib:"
        "/opt/aws-ofi-nccl/install/lib:/usr/local/nvidia/lib:$LD_LIBRARY_PATH && "
    )
    assert "LD_LIBRARY_PATH" not in {e["name"] for e in container["env"]}
    for tuning in (
        "NCCL_BUFFSIZE=8388608",
        "NCCL_P2P_NET_CHUNKSIZE=524288",
        "NCCL_TUNER_PLUGIN=/opt/aws-ofi-nccl/install/lib/libnccl-ofi-tuner.so",
    ):
        assert f"-x {tuning} " in script
    assert "ofi-nccl/lib/x86_64-linux-gnu" not in script


def test_a_mig_pool_skips_the_whole_gpu_checks_and_starts_no_pod_there() -> None:
    expect_ = expect_file(CORPUS / "mig-h100-pool.yaml")
    mig_nodes = [node(f"mig-{i}", "mig", "p5.48xlarge", gpus=112, efa=32) for i in range(2)]
    api = FakeApi(
        [*training_nodes(count=0), *[node(f"t-{i}", "train", "p5.48xlarge", 8, 32) for i in range(2)], *mig_nodes]
    )
    api.behaviour = behaviour()
    results = run_checks(api, expect_, ["topology", "dcgm", "nccl"], Options(), lambda *a: None)
    skipped = [r for r in results if r.target == "mig"]
    assert [(r.check, r.status) for r in skipped] == [("topology", "skip"), ("dcgm", "skip"), ("nccl", "skip")]
    assert all(r.detail.startswith("skipped: MIG pool (7x 1g.10gb per GPU); ") for r in skipped)
    train = [r for r in results if r.target.startswith("train")]
    assert {r.status for r in train if r.check != "nccl" or "+" in r.target} == {"pass"}
    assert not [
        b for b in api.created.values() if b["spec"]["nodeSelector"]["kubernetes.io/hostname"].startswith("mig")
    ]


def test_a_time_sliced_pool_holds_every_slot_and_runs_one_rank_per_physical_gpu(time_sliced: Expectations) -> None:
    h100 = [node(f"h-{i}", "h100", "p5.48xlarge", gpus=16, efa=32) for i in range(2)]
    a10g = node("g-0", "a10g", "g5.48xlarge", gpus=32)
    act = behaviour()

    def per_pool(body: dict[str, Any]) -> tuple[str, str]:
        on_g5 = body["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "g-0"
        check = body["metadata"]["labels"]["blueprint-verify/check"]
        if on_g5 and check == "topology":
            return "Succeeded", sample("topo-g5.48xlarge.txt")
        if on_g5 and check == "nccl":
            return "Succeeded", sample("nccl-all-reduce-2x-p5.txt")
        return act(body)

    api = FakeApi([*h100, a10g], behaviour=per_pool)
    results = run_checks(api, time_sliced, ["topology", "dcgm", "nccl"], Options(dcgm_image="d"), lambda *a: None)
    assert {(r.check, r.target): r.status for r in results if r.check != "dcgm"} == {
        ("topology", "h100/h-0"): "pass",
        ("topology", "a10g/g-0"): "pass",
        ("nccl", "h100/h-0"): "skip",  # each NVLink node on its own: no published single-node figure
        ("nccl", "h100/h-1"): "skip",
        ("nccl", "h100/h-0+h-1"): "pass",
        ("nccl", "a10g/g-0"): "skip",  # PCIe G type: no reference
    }
    pods = {n: b for (_, n), b in api.created.items()}

    def limit(body: dict[str, Any]) -> str | None:
        return (body["spec"]["containers"][0].get("resources") or {}).get("limits", {}).get("nvidia.com/gpu")

    on_g5 = {n for n, b in pods.items() if b["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "g-0"}
    assert {limit(b) for n, b in pods.items() if n not in on_g5 and "launcher" not in n} == {"16"}
    assert {limit(pods[n]) for n in on_g5} == {"32"}
    launcher = next(b for n, b in pods.items() if n.endswith("launcher"))["spec"]["containers"][0]["command"][-1]
    assert "-np 16 -N 8 " in launcher and ":8," in launcher
    one_node = next(pods[n] for n in on_g5 if "-nccl-" in n)["spec"]["containers"][0]["command"][-1]
    assert one_node.endswith(" -g 8")


def test_a_failing_check_exits_1_and_still_cleans_up(monkeypatch, capsys, kubeconfig: Path) -> None:
    api = training_api(topology="topo-p4d.24xlarge.txt", storage_mbps=100)
    code, out, _ = run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--skip", "nccl,dcgm")
    assert code == 1
    assert "FAIL" in out and "NV12" in out and "writeMBps 100 < 1171.9" in out
    assert api.created and not api.leftovers()


def test_dcgm_failures_are_listed_and_cordoned_on_request(
    monkeypatch, capsys, kubeconfig: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "dcgm-fail.txt"
    bad.write_text(
        sample("dcgm-diag-r1-pass.json.txt").replace(
            '"status" : "PASS"\n\t\t\t\t\t\t\t}\n\t\t\t\t\t\t]\n\t\t\t\t\t}\n\t\t\t\t]',
            '"status" : "FAIL"\n\t\t\t\t\t\t\t}\n\t\t\t\t\t\t]\n\t\t\t\t\t}\n\t\t\t\t]',
            1,
        )
    )
    api = training_api(dcgm=str(bad))
    code, out, _ = run_cli(
        monkeypatch,
        capsys,
        api,
        "--kubeconfig",
        str(kubeconfig),
        "--only",
        "dcgm",
        "--cordon-failed",
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert code == 1
    assert sorted(api.cordoned) == ["ip-10-0-1-0", "ip-10-0-1-1"]
    assert all("Inforom" in r["detail"] for r in doc["results"] if r["status"] == "fail")
    assert not api.leftovers()


def test_an_api_error_mid_check_reports_error_and_cleans_up(kubeconfig: Path) -> None:
    api = training_api()
    api.fail_reads = KubeError("read pod default/x: 500 Internal Server Error")
    results = run_checks(api, expect("training"), ["topology", "dcgm"], Options(dcgm_image="d"), lambda *a: None)
    assert [r.status for r in results] == ["error", "error"]
    assert api.created and not api.leftovers()


def test_a_pod_that_never_starts_times_out_on_the_pull_budget_and_is_deleted() -> None:
    api = FakeApi(training_nodes(), behaviour=lambda body: ("ContainerCreating", ""))
    ticks = iter(range(0, 100_000, 400))
    session = PodSession(api, "t1", "default", clock=lambda: float(next(ticks)), sleep=lambda s: None)
    results = run_checks(
        api,
        expect("training"),
        ["topology"],
        Options(timeout_seconds=600, pull_timeout_seconds=1200, dcgm_image="d"),
        lambda *a: None,
        session=session,
    )
    assert [r.status for r in results] == ["error"]
    assert "not started after 1200s (scheduling and image pull, --pull-timeout)" in results[0].detail
    assert "ContainerCreating" in results[0].detail
    assert api.created and not api.leftovers()


def test_ctrl_c_deletes_the_test_pods(monkeypatch, capsys, kubeconfig: Path) -> None:
    api = training_api()
    api.fail_reads = KeyboardInterrupt()
    code, _, err = run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--only", "topology")
    assert code == 130 and "interrupted" in err
    assert api.created and not api.leftovers()


def test_a_hybrid_stack_runs_single_node_nccl_and_both_file_systems(monkeypatch, capsys, kubeconfig: Path) -> None:
    p5 = [node(f"ip-10-0-1-{i}", "h100", "p5.48xlarge", gpus=8, efa=32) for i in range(2)]
    a40 = [node(f"a40-{i}", "a40", gpus=4, hybrid=True) for i in range(4)]
    gpu_nodes = [n["metadata"]["name"] for n in p5 + a40]
    pods = {
        "kube-system": [daemon_pod("nvidia-device-plugin", n) for n in gpu_nodes]
        + [
            daemon_pod(d, n["metadata"]["name"])
            for n in p5
            for d in ("aws-efa-k8s-device-plugin", "eks-node-monitoring-agent", "dcgm-server")
        ],
        "monitoring": [daemon_pod("dcgm-exporter", n) for n in gpu_nodes],
    }
    bound = {"status": {"phase": "Bound"}, "spec": {"accessModes": ["ReadWriteMany"]}}
    claims = {("training", "lustre-scratch"): bound, ("inference", "model-weights"): bound}
    api = FakeApi([node("s1", "system"), node("s2", "system"), *p5, *a40], pods, behaviour(), claims)
    monkeypatch.setattr(command, "connect", lambda path: api)
    from blueprint import cli

    code = cli.main(
        ["verify", "--stack", "hybrid", "--kubeconfig", str(kubeconfig), "--skip", "topology", "--format", "json"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, [r for r in doc["results"] if r["status"] != "pass"]
    targets = {(r["check"], r["target"].split("/")[0]) for r in doc["results"]}
    assert {("nccl", "h100"), ("nccl", "a40"), ("nodes", "burst")} <= targets
    single = next(r for r in doc["results"] if r["check"] == "nccl" and r["target"].startswith("a40"))
    assert "on one node" in single["detail"]
    storage_pods = [
        b for (ns, _), b in api.created.items() if b["metadata"]["labels"]["blueprint-verify/check"] == "storage"
    ]
    assert {b["spec"]["nodeSelector"]["gpu-clusters/pool"] for b in storage_pods} == {"h100", "a40"}
    assert {ns for (ns, n) in api.created if "storage" in n} == {"training", "inference"}
    assert not api.leftovers()


def test_sigterm_cleans_up_like_ctrl_c(monkeypatch, capsys, kubeconfig: Path) -> None:
    import signal

    api = training_api()

    def terminated(namespace: str, name: str) -> dict[str, Any]:
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        handler(signal.SIGTERM, None)  # what the interpreter does when the process gets SIGTERM
        return {}

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(api, "read_pod", terminated)
    code, _, err = run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--only", "dcgm")
    assert code == 130 and "interrupted" in err and api.created and not api.leftovers()
    assert signal.getsignal(signal.SIGTERM) == before


# ----------------------------------------------------------------------------------------------- input and config
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--only", "gpus"], 64, "--only: unknown check gpus"),
        (["--min-busbw-fraction", "0"], 64, "--min-busbw-fraction: give a fraction"),
        (["--timeout", "-1"], 64, "--timeout: give a positive number"),
        (["--pull-timeout", "0"], 64, "--pull-timeout: give a positive number"),
        (["--only", "nodes", "--skip", "nodes"], 64, "--only and --skip leave no check to run"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], 74, "no such file"),
    ],
)
def test_usage_and_io_errors_have_their_own_codes_and_no_traceback(
    monkeypatch, capsys, args: list[str], code: int, message: str
) -> None:
    api = training_api()
    got, out, err = run_cli(monkeypatch, capsys, api, *args)
    assert (got, out) == (code, "") and message in err and "Traceback" not in err
    assert not api.created


def test_an_unreachable_cluster_is_an_io_error(monkeypatch, capsys, kubeconfig: Path) -> None:
    api = training_api()

    def refuse() -> list[dict[str, Any]]:
        raise KubeError("list nodes: HTTPSConnectionPool: Max retries exceeded")

    monkeypatch.setattr(api, "list_nodes", refuse)
    code, _, err = run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig))
    assert code == 74 and "Max retries exceeded" in err and not api.created


def test_no_kubeconfig_anywhere_is_bad_input(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(KubeError, match="no kubeconfig"):
        kubeconfig_source(None, "training", environ={}, home=tmp_path)
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("x")
    assert kubeconfig_source(None, "training", environ={}, home=tmp_path).path == tmp_path / ".kube" / "config"


def test_the_stack_output_kubeconfig_is_read_with_the_pulumi_cli_and_deleted_after(
    monkeypatch, capsys, tmp_path: Path
) -> None:
    import subprocess

    calls: list[list[str]] = []

    def pulumi(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="apiVersion: v1\nkind: Config\n", stderr="")

    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("shutil.which", lambda name: "/usr/local/bin/pulumi")
    monkeypatch.setattr("subprocess.run", pulumi)
    seen: list[Path] = []
    api = training_api()

    def connect(path: Path) -> FakeApi:
        seen.append(path)
        assert path.read_text().startswith("apiVersion: v1")
        return api

    monkeypatch.setattr(command, "connect", connect)
    from blueprint import cli

    code = cli.main(["verify", "--stack", "training", "--only", "nodes"])
    err = capsys.readouterr().err
    assert code == 0 and "pulumi stack output kubeconfig --stack training" in err
    assert calls == [["pulumi", "stack", "output", "kubeconfig", "--show-secrets", "--stack", "training"]]
    assert seen and not seen[0].exists()


def test_selection_keeps_the_fixed_order() -> None:
    assert selected([], ["nccl", "dcgm", "storage", "topology"]) == [
        "nodes",
        "allocatable",
        "daemons",
        "conditions",
        "drivers",
    ]
    assert selected(["storage", "nodes"], []) == ["nodes", "storage"]


# ----------------------------------------------------------------------------------------------- the real adapter
def test_the_adapter_maps_client_models_to_api_json_and_ignores_a_404_on_delete() -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    class Core:
        deleted: list[str] = []

        def list_node(self) -> client.V1NodeList:
            meta = client.V1ObjectMeta(name="n1", labels={"gpu-clusters/pool": "h100"})
            status = client.V1NodeStatus(allocatable={"nvidia.com/gpu": "8"})
            return client.V1NodeList(items=[client.V1Node(metadata=meta, status=status)])

        def delete_namespaced_pod(self, name: str, namespace: str, grace_period_seconds: int) -> None:
            raise ApiException(status=404, reason="Not Found")

        def read_namespaced_pod(self, name: str, namespace: str) -> None:
            raise ApiException(status=403, reason="Forbidden")

    api = KubernetesApi(Core(), client.ApiClient())
    assert api.list_nodes() == [
        {
            "metadata": {"name": "n1", "labels": {"gpu-clusters/pool": "h100"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        }
    ]
    api.delete_pod("default", "gone")
    with pytest.raises(KubeError, match="read pod default/p: 403 Forbidden"):
        api.read_pod("default", "p")


def test_the_dcgm_pods_run_the_pinned_dcgm_image(monkeypatch, capsys, kubeconfig: Path) -> None:
    api = training_api()
    run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--only", "dcgm")
    images = {b["spec"]["containers"][0]["image"] for b in api.created.values()}
    assert images == {DCGM_IMAGE} and DCGM_IMAGE.startswith("nvcr.io/nvidia/cloud-native/dcgm:")


def test_options_are_replaced_not_mutated() -> None:
    options = Options()
    assert replace(options, dcgm_level=3).dcgm_level == 3 and options.dcgm_level == 1


def test_nodes_whose_gpus_another_pod_holds_are_skipped_not_failed(monkeypatch, capsys, kubeconfig: Path) -> None:
    """A serving replica on one node: the whole-GPU checks skip that node, naming the pod, and create nothing there;
    the other node is tested; NCCL, needing two free nodes, is skipped with the reason."""
    api = training_api()
    api.pods["inference"] = [workload_pod("inference", "chat-7d9f-abcde", "ip-10-0-1-1", 1)]
    code, out, _ = run_cli(
        monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--format", "json", "--only", "dcgm,nccl"
    )
    doc = json.loads(out)
    held = [r for r in doc["results"] if "GPUs in use by inference/chat-7d9f-abcde" in r["detail"]]
    assert {(r["check"], r["target"], r["status"]) for r in held} == {
        ("dcgm", "h100/ip-10-0-1-1", "skip"),
        ("nccl", "h100/ip-10-0-1-1", "skip"),
    }
    assert [r["status"] for r in doc["results"] if r["check"] == "dcgm" and r["target"] == "h100/ip-10-0-1-0"] == [
        "pass"
    ]
    nccl = [r for r in doc["results"] if r["check"] == "nccl" and r["target"] == "h100"]
    assert nccl and nccl[0]["status"] == "skip" and "free GPUs" in nccl[0]["detail"]
    on_busy_node = [
        b for b in api.created.values() if b["spec"]["nodeSelector"].get("kubernetes.io/hostname") == "ip-10-0-1-1"
    ]
    assert on_busy_node == [] and code == 0


# ------------------------------------------------------------------------------------------- Pod Security of the pods
def test_the_storage_probe_runs_restricted_as_the_directory_owner_inside_its_namespace_directory(
    monkeypatch, capsys, kubeconfig: Path
) -> None:
    api = training_api()
    code, _, _ = run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig), "--only", "storage")
    assert code == 0
    (namespace, _), body = next(
        (key, b) for key, b in api.created.items() if b["metadata"]["labels"]["blueprint-verify/check"] == "storage"
    )
    assert namespace == "training"
    spec = body["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = spec["containers"][0]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert container["command"][3].startswith("/mnt/claim/training/.blueprint-verify-")
    assert level_violations(spec, "restricted") == []


def test_the_probe_follows_the_configured_directory_owner() -> None:
    lustre = {"kubernetes": {"namespace": "team-a"}, "workloadDirectories": {"uid": 4242, "gid": 777}}
    spec = stack_config(TRAINING_POOL, storage={"lustre": lustre}, validated=True)
    fs = next(s for s in expectations(spec).storage if s.kind == "lustre")
    assert (fs.namespace, fs.run_as, fs.directory) == ("team-a", (4242, 777), "team-a")
    off = stack_config(TRAINING_POOL, storage={"lustre": {"workloadDirectories": {"enabled": False}}}, validated=True)
    assert next(iter(expectations(off).storage)).directory is None


def test_probes_that_need_root_or_capabilities_stay_out_of_restricted_pods() -> None:
    with pytest.raises(ValueError, match="cannot add capabilities"):
        pod_spec("p", {}, "img", ["true"], {}, [], capabilities=("SYS_ADMIN",), run_as=(1000, 1000))
    root = pod_spec("p", {}, "img", ["true"], {}, [], run_as=None)
    assert "securityContext" not in root["spec"]
    assert level_violations(root["spec"], "restricted")
