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
from blueprint.verify.context import Context, Options
from blueprint.verify.expectations import Expectations, expectations, load_spec
from blueprint.verify.kube import KubeError, KubernetesApi, kubeconfig_source
from blueprint.verify.nccl import expected_busbw, judge_two_node
from blueprint.verify.parsers import ParseError, dcgm_failures, parse_dcgm, parse_nccl, parse_storage, parse_topology
from blueprint.verify.pods import RUN_LABEL, PodSession
from blueprint.verify.runner import run_checks, selected
from blueprint.verify.topology import judge
from tests.verify_fakes import FakeApi, daemon_pod, node, sample


@cache
def expect(stack: str) -> Expectations:
    return expectations(load_spec(stack, None))


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
        "kube-system": [daemon_pod(d, n) for n in names for d in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin")],
        "amazon-cloudwatch": [daemon_pod("dcgm-exporter", n) for n in names],
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
    assert burst is not None and burst.gpus_by_type == {"g6e.12xlarge": 4, "g6e.24xlarge": 4}
    assert burst.interconnect is not None and not burst.interconnect.nvlink
    a40 = expect("hybrid").pool("a40")
    assert a40 is not None and a40.kind == "hybrid" and (a40.min_nodes, a40.max_nodes) == (4, 4)
    assert [d.namespace for d in a40.daemons] == ["kube-system", "monitoring"]


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


def test_nccl_thresholds_from_the_fabric_bandwidth() -> None:
    h100 = expect("training").pool("h100")
    assert h100 is not None
    assert expected_busbw(h100, 0.9) == 360.0
    run = parse_nccl(sample("nccl-log-ofi-efa-h200.txt") + sample("nccl-all-reduce-2x-p5-16g.txt"))
    assert judge_two_node(run, expected_busbw(h100, 0.9))[0]
    ok, detail = judge_two_node(run, expected_busbw(h100, 1.3))
    assert not ok and "487.26 GB/s < 520 GB/s" in detail


def test_nccl_over_sockets_fails_whatever_the_bandwidth() -> None:
    run = parse_nccl(sample("nccl-log-socket-fallback.txt") + sample("nccl-all-reduce-2x-p5-16g.txt"))
    assert run.network == "Socket" and not run.ofi_efa
    ok, detail = judge_two_node(run, 1.0)
    assert not ok and "EFA not in use (NCCL network: Socket)" in detail
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
    assert doc["checks"] == ["nodes", "allocatable", "daemons", "topology", "dcgm", "nccl", "storage"]
    assert {r["check"] for r in doc["results"]} == set(doc["checks"])
    assert all(r["status"] == "pass" for r in doc["results"]), [r for r in doc["results"] if r["status"] != "pass"]
    assert doc["passed"] is True and doc["summary"]["fail"] == 0
    nccl = next(r for r in doc["results"] if r["check"] == "nccl")
    assert nccl["measured"] == 487.26 and nccl["expected"] == 360.0
    # every pod and the SSH secret were deleted, and all carried the run's label
    assert api.created and api.secrets and not api.leftovers()
    assert {b["metadata"]["labels"][RUN_LABEL] for b in api.created.values()} == {doc["runId"]}
    assert "[1/7] nodes" in err


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


def test_a_check_that_times_out_reports_error_and_deletes_its_pods() -> None:
    api = FakeApi(training_nodes(), behaviour=lambda body: ("Pending", ""))
    ticks = iter(range(0, 100_000, 400))
    session = PodSession(api, "t1", "default", clock=lambda: float(next(ticks)), sleep=lambda s: None)
    results = run_checks(
        api,
        expect("training"),
        ["topology"],
        Options(timeout_seconds=600, dcgm_image="d"),
        lambda *a: None,
        session=session,
    )
    assert [r.status for r in results] == ["error"] and "timed out after 600s" in results[0].detail
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
        + [daemon_pod("aws-efa-k8s-device-plugin", n["metadata"]["name"]) for n in p5],
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
    ("args", "message"),
    [
        (["--only", "gpus"], "--only: unknown check gpus"),
        (["--min-busbw-fraction", "0"], "--min-busbw-fraction: give a fraction"),
        (["--timeout", "-1"], "--timeout: give a positive number"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "no such file"),
    ],
)
def test_bad_input_exits_2_without_a_traceback(monkeypatch, capsys, args: list[str], message: str) -> None:
    code, _, err = run_cli(monkeypatch, capsys, training_api(), *args)
    assert code == 2 and message in err and "Traceback" not in err


def test_an_unreachable_cluster_exits_2(monkeypatch, capsys, kubeconfig: Path) -> None:
    api = training_api()

    def refuse() -> list[dict[str, Any]]:
        raise KubeError("list nodes: HTTPSConnectionPool: Max retries exceeded")

    monkeypatch.setattr(api, "list_nodes", refuse)
    code, _, err = run_cli(monkeypatch, capsys, api, "--kubeconfig", str(kubeconfig))
    assert code == 2 and "Max retries exceeded" in err and not api.created


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
    assert selected([], ["nccl", "dcgm", "storage", "topology"]) == ["nodes", "allocatable", "daemons"]
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


def test_options_are_replaced_not_mutated() -> None:
    options = Options()
    assert replace(options, dcgm_level=3).dcgm_level == 3 and options.dcgm_level == 1
