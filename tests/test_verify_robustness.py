"""`blueprint verify` on a slow, broken or half-broken cluster, through the fake Kubernetes API: DCGM levels get the
time they take, image pulls their own budget, a pod that cannot start or a worker that ends stops the wait at once
with the reason, a pool that times out leaves the other pools' results standing, DCGM's `test_summary` fails a
node, and the NCCL pairs name the bad node of an EFA pool."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.plan.runner import stack_file
from blueprint.verify import dcgm, nccl
from blueprint.verify.context import Options
from blueprint.verify.expectations import Expectations
from blueprint.verify.model import Result
from blueprint.verify.nccl import pairs
from blueprint.verify.parsers import ParseError, dcgm_failures, parse_dcgm, parse_nccl
from blueprint.verify.pods import PodSession
from blueprint.verify.runner import run_checks
from tests.test_verify import TIME_SLICED, expect, expect_file, training_nodes
from tests.verify_fakes import FakeApi, daemon_pod, node, sample

SUMMARY_FAIL = "dcgm4-diag-r2-nvswitch-summary-fail.json.txt"
GOOD_NCCL = sample("nccl-log-ofi-efa-h200.txt") + sample("nccl-all-reduce-2x-p5-16g.txt")
SOCKET_NCCL = sample("nccl-log-socket-fallback.txt") + sample("nccl-all-reduce-2x-p5-16g.txt")


@pytest.fixture(scope="module")
def time_sliced(tmp_path_factory: pytest.TempPathFactory) -> Expectations:
    path = tmp_path_factory.mktemp("verify") / "time-sliced.yaml"
    path.write_text(TIME_SLICED)
    return expect_file(path)


def host(body: dict[str, Any]) -> str:
    return str(body["spec"]["nodeSelector"].get("kubernetes.io/hostname"))


def run(
    api: FakeApi, checks: list[str], options: Options, expect_: Expectations | None = None
) -> tuple[list[Result], list[float]]:
    """The checks on a fake clock that moves a minute per poll; returns the results and the clock at the end."""
    now = [0.0]
    session = PodSession(api, "r1", "default", clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + 60))
    results = run_checks(api, expect_ or expect("training"), checks, options, lambda *a: None, session=session)
    assert api.created and not api.leftovers()
    return results, now


def after_reads(api: FakeApi, steps: list[tuple[int, str]], log: str) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """A pod that is in `steps[i][1]` for `steps[i][0]` reads of it, then Succeeded with `log`."""

    def act(body: dict[str, Any]) -> tuple[str, str]:
        seen = api.reads.count(body["metadata"]["name"])
        for count, phase in steps:
            if seen < count:
                return phase, ""
            seen -= count
        return "Succeeded", log

    return act


# ------------------------------------------------------------------------------------------------------- DCGM
def test_a_level_3_diagnostic_gets_its_hour_after_a_slow_pull() -> None:
    """10 minutes pulling the image, then 50 minutes of diagnostics: level 3 ("approximately 15 minutes", with room)
    passes; the same run at level 1 overruns its 900 s."""
    api = FakeApi(training_nodes())
    api.behaviour = after_reads(api, [(10, "ContainerCreating"), (50, "Running")], sample("dcgm-diag-r1-pass.json.txt"))
    results, now = run(api, ["dcgm"], Options(dcgm_level=3))
    assert [(r.target, r.status) for r in results] == [("h100/ip-10-0-1-0", "pass"), ("h100/ip-10-0-1-1", "pass")]
    assert now[0] >= 3600  # an hour on the clock: more than the old 900 s per check
    api = FakeApi(training_nodes())
    api.behaviour = after_reads(api, [(10, "ContainerCreating"), (50, "Running")], sample("dcgm-diag-r1-pass.json.txt"))
    results, _ = run(api, ["dcgm"], Options(dcgm_level=1))
    assert {r.status for r in results} == {"error"}
    assert "still running after 900s (--timeout)" in results[0].detail


def test_level_budgets_grow_with_the_level_and_timeout_overrides_them() -> None:
    assert [dcgm.LEVEL_RUN_SECONDS[level] for level in (1, 2, 3, 4)] == [900, 900, 3600, 10800]
    api = FakeApi(training_nodes())
    api.behaviour = after_reads(api, [(130, "Running")], sample("dcgm-diag-r1-pass.json.txt"))  # 2 h 10 min
    results, _ = run(api, ["dcgm"], Options(dcgm_level=4))
    assert {r.status for r in results} == {"pass"}
    api = FakeApi(training_nodes())
    api.behaviour = after_reads(api, [(130, "Running")], sample("dcgm-diag-r1-pass.json.txt"))
    results, _ = run(api, ["dcgm"], Options(dcgm_level=4, timeout_seconds=3600))
    assert {r.status for r in results} == {"error"} and "still running after 3600s" in results[0].detail


def test_a_test_summary_failure_fails_the_node_though_every_gpu_passed() -> None:
    tests = parse_dcgm(sample(SUMMARY_FAIL))
    assert all(t.status == "pass" for t in tests if t.gpus != "summary")
    (failure,) = dcgm_failures(tests)
    assert (failure.category, failure.name, failure.gpus) == ("Hardware", "nvlink", "summary")
    api = FakeApi(training_nodes(), behaviour=lambda body: ("Succeeded", sample(SUMMARY_FAIL)))
    results, _ = run(api, ["dcgm"], Options(cordon_failed=True))
    failed = [r for r in results if r.status == "fail"]
    assert [r.nodes for r in failed] == [("ip-10-0-1-0",), ("ip-10-0-1-1",)]
    assert failed[0].detail == (
        "Hardware nvlink (all GPUs (test summary)) fail: Detected fatal errors on NvSwitch 2 link 17"
    )
    assert sorted(api.cordoned) == ["ip-10-0-1-0", "ip-10-0-1-1"]


def test_a_diagnostic_that_could_not_run_is_an_error_with_dcgms_words() -> None:
    text = '{"DCGM Diagnostic": {"runtime_error": "Unable to run diagnostics: the GPUs are in use"}}'
    with pytest.raises(ParseError, match="dcgmi diag could not run: Unable to run diagnostics"):
        parse_dcgm(text)
    api = FakeApi(training_nodes(), behaviour=lambda body: ("Succeeded", text))
    results, _ = run(api, ["dcgm"], Options())
    assert {r.status for r in results} == {"error"}


# ------------------------------------------------------------------------------------------------------- early exits
def test_an_image_that_cannot_be_pulled_ends_that_nodes_wait_at_once() -> None:
    def act(body: dict[str, Any]) -> tuple[str, str]:
        if host(body) == "ip-10-0-1-1":
            return "ImagePullBackOff", ""
        return "Succeeded", sample("dcgm-diag-r1-pass.json.txt")

    api = FakeApi(training_nodes(), behaviour=act)
    results, now = run(api, ["dcgm"], Options())
    good, bad = results
    assert (good.target, good.status) == ("h100/ip-10-0-1-0", "pass")
    assert (bad.status, bad.nodes) == ("error", ("ip-10-0-1-1",))
    assert "cannot start: ImagePullBackOff: Back-off pulling image" in bad.detail
    assert now[0] == 0  # no poll waited: the reason was there at the first read


def test_an_unschedulable_pod_errors_its_pool_and_the_other_pool_still_passes(time_sliced: Expectations) -> None:
    h100 = [node(f"h-{i}", "h100", "p5.48xlarge", gpus=16, efa=32) for i in range(2)]
    a10g = node("g-0", "a10g", "g5.48xlarge", gpus=32)

    def act(body: dict[str, Any]) -> tuple[str, str]:
        if host(body) == "g-0":
            return "Unschedulable", ""
        return "Succeeded", sample("topo-p5.48xlarge.txt")

    api = FakeApi([*h100, a10g], behaviour=act)
    results, _ = run(api, ["topology"], Options(), time_sliced)
    by_target = {r.target: r for r in results}
    assert by_target["h100/h-0"].status == "pass"
    assert by_target["a10g/g-0"].status == "error"
    assert "Unschedulable: 0/4 nodes are available: 1 Insufficient nvidia.com/gpu." in by_target["a10g/g-0"].detail


def test_a_pool_that_times_out_keeps_the_results_before_and_after_it(time_sliced: Expectations) -> None:
    h100 = [node(f"h-{i}", "h100", "p5.48xlarge", gpus=16, efa=32) for i in range(2)]
    a10g = node("g-0", "a10g", "g5.48xlarge", gpus=32)

    def act(body: dict[str, Any]) -> tuple[str, str]:
        if host(body) == "h-0":
            return "Running", ""  # hangs
        return "Succeeded", sample("topo-g5.48xlarge.txt")

    api = FakeApi([*h100, a10g], behaviour=act)
    results, _ = run(api, ["topology"], Options(timeout_seconds=600), time_sliced)
    by_target = {r.target: r for r in results}
    assert by_target["h100/h-0"].status == "error" and "still running after 600s" in by_target["h100/h-0"].detail
    assert by_target["a10g/g-0"].status == "pass"


def test_a_worker_that_fails_before_it_is_ready_ends_the_pair_at_once() -> None:
    def act(body: dict[str, Any]) -> tuple[str, str]:
        name = body["metadata"]["name"]
        if name.endswith("-w1"):
            return "Failed", "sshd: no hostkeys available -- exiting."
        if "-w" in name:
            return "Running", ""
        return "Succeeded", GOOD_NCCL

    api = FakeApi(training_nodes(), behaviour=act)
    results, now = run(api, ["nccl"], Options())
    (pair,) = [r for r in results if "+" in r.target]
    assert pair.status == "error" and pair.nodes == ("ip-10-0-1-0", "ip-10-0-1-1")
    assert "-w1 ended Failed" in pair.detail and "sshd: no hostkeys available" in pair.detail
    assert not [n for (_, n) in api.created if n.endswith("launcher")]
    assert now[0] == 0


def test_a_worker_that_dies_during_the_run_ends_the_launchers_wait_at_once() -> None:
    def act(body: dict[str, Any]) -> tuple[str, str]:
        name = body["metadata"]["name"]
        launched = any(n.endswith("launcher") for (_, n) in api.created)
        if name.endswith("-w1"):
            return ("Failed", "Killed") if launched else ("Running", "")
        if "-w" in name or name.endswith("launcher"):
            return "Running", ""  # mpirun would hang on the lost rank
        return "Succeeded", GOOD_NCCL

    api = FakeApi(training_nodes(), behaviour=act)
    results, now = run(api, ["nccl"], Options())
    (pair,) = [r for r in results if "+" in r.target]
    assert pair.status == "error" and "worker bpv-nccl-r1-h100-0-w1 ended Failed" in pair.detail
    assert now[0] == 0


# ------------------------------------------------------------------------------------------------------- NCCL pairs
def test_pairs_cover_every_node() -> None:
    assert pairs(["a", "b", "c", "d"]) == [("a", "b"), ("c", "d")]
    assert pairs(["a", "b", "c"]) == [("a", "b"), ("c", "a")]
    assert pairs(["a"]) == []


@pytest.mark.parametrize("count", [4, 5])
def test_every_node_of_an_efa_pool_is_tested_and_the_bad_one_is_named(count: int) -> None:
    bad = "ip-10-0-1-2"

    def act(body: dict[str, Any]) -> tuple[str, str]:
        name = body["metadata"]["name"]
        if "-w" in name:
            return "Running", ""
        script = body["spec"]["containers"][0]["command"][-1]
        on_bad = f"{bad}:8" in script or (host(body) == bad and "-H" not in script)
        return "Succeeded", SOCKET_NCCL if on_bad and "-H" in script else GOOD_NCCL

    api = FakeApi(training_nodes(count=count), behaviour=act)
    results, _ = run(api, ["nccl"], Options())
    names = [f"ip-10-0-1-{i}" for i in range(count)]
    # each node's own NVLink all-reduce
    assert {r.target for r in results if "+" not in r.target} == {f"h100/{n}" for n in names}
    # pairs cover every node, not only the first two
    paired = {n for r in results if "+" in r.target for n in r.target.split("/")[1].split("+")}
    assert paired == set(names)
    # the failed pair's nodes were run again with a good node: only the bad one is blamed there
    failed = [r for r in results if r.status == "fail"]
    assert failed and all(bad in r.target for r in failed)
    isolated = [r for r in failed if len(r.nodes) == 1]
    assert [r.nodes for r in isolated] == [(bad,)]
    assert "EFA not in use" in isolated[0].detail


# ------------------------------------------------------------------------------------------ NCCL sizes and references
P5EN = """config:
  aws:region: us-east-2
  gpu-clusters:cluster: {name: corpus, endpoint: {privateAccessCidrs: [192.168.10.0/24]}}
  gpu-clusters:network: {availabilityZones: [us-east-2a, us-east-2b],
                         siteConnection: {transitGatewayId: tgw-0f3a9c1e27d84b5a6}}
  gpu-clusters:nodePools:
    - {name: system, role: system, instanceType: m7i.xlarge, scaling: {min: 2, max: 3}}
    - {name: h200, role: training, instanceType: p5en.48xlarge, scaling: {min: 0, max: 4}}
"""


@pytest.mark.parametrize(
    ("instance_type", "largest"),
    [
        ("p5.48xlarge", "16G"),  # AWS's reference size, 3 x 16 GiB fit in 80 GiB
        ("p5en.48xlarge", "16G"),
        ("p4de.24xlarge", "2G"),  # AWS's reference size for the p4de figure
        ("p4d.24xlarge", "2G"),  # 40 GiB A100: 3 x 16 GiB would not fit
        ("g6e.48xlarge", "8G"),  # 44.7 GiB L40S
        ("g5.48xlarge", "4G"),  # 22.35 GiB A10G
    ],
)
def test_the_two_node_run_fits_three_buffers_of_its_largest_size_in_a_gpu(instance_type: str, largest: str) -> None:
    from components import catalog

    size = nccl.largest_size([instance_type])
    args = nccl.two_node_args(size)
    assert args[args.index("-e") + 1] == largest and "-c" in args
    assert 3 * size <= catalog.instance_types()[instance_type].gpu_memory_gib * 2**30
    known = nccl.reference([instance_type])
    assert known is None or known.size_bytes == size


def test_the_launcher_runs_the_pools_largest_size() -> None:
    api = FakeApi(
        training_nodes(),
        behaviour=lambda body: ("Running", "") if "-w" in body["metadata"]["name"] else ("Succeeded", GOOD_NCCL),
    )
    run(api, ["nccl"], Options())
    (launcher,) = [b for b in api.created.values() if b["metadata"]["name"].endswith("launcher")]
    assert "-e 16G" in launcher["spec"]["containers"][0]["command"][-1]


def test_a_run_whose_largest_size_is_not_the_references_is_not_judged_by_it() -> None:
    parsed = parse_nccl(GOOD_NCCL)  # p5 pair, 16 GiB at the top
    assert nccl.judge_two_node(parsed, 9999.0, 16 * 2**30)[0] == "fail"
    status, detail = nccl.judge_two_node(parsed, 9999.0, 2 * 2**30)
    assert status == "skip" and "measured at 2 GiB" in detail


@pytest.mark.parametrize("broken", ["socket", "no-output"])
def test_without_a_reference_a_pair_that_completed_is_the_good_partner(tmp_path: Any, broken: str) -> None:
    path = tmp_path / "p5en.yaml"
    path.write_text(P5EN)
    bad = "ip-10-0-1-2"

    def act(body: dict[str, Any]) -> tuple[str, str]:
        name = body["metadata"]["name"]
        if "-w" in name:
            return "Running", ""
        script = body["spec"]["containers"][0]["command"][-1]
        if f"{bad}:8" in script:
            return ("Succeeded", SOCKET_NCCL) if broken == "socket" else ("Failed", "mpirun: rank 9 exited")
        return "Succeeded", GOOD_NCCL

    nodes = [node(f"ip-10-0-1-{i}", "h200", "p5en.48xlarge", gpus=8, efa=16) for i in range(4)]
    api = FakeApi([node("ip-10-0-0-1", "system", "m7i.xlarge"), *nodes], behaviour=act)
    results, _ = run(api, ["nccl"], Options(), expect_file(path))
    pair_results = [r for r in results if "+" in r.target]
    assert {r.status for r in pair_results} >= {"skip"}
    assert all("no reference" in r.detail for r in pair_results if r.status == "skip")
    # the broken pair's nodes ran again with a node of the pair that completed: only the bad one is named
    isolated = [r for r in pair_results if len(r.nodes) == 1]
    assert [r.nodes for r in isolated] == [(bad,)]
    assert isolated[0].status == ("fail" if broken == "socket" else "error")
    retested = [r.target for r in pair_results if "ip-10-0-1-3" in r.target and r.status == "skip"]
    assert len(retested) == 1 and "ip-10-0-1-0" in retested[0]


# ------------------------------------------------------------------------------ level 4 pauses the DCGM exporter
DEPLOY = "nvidia.com/gpu.deploy.dcgm-exporter"
L40S = ["ip-10-0-2-0", "ip-10-0-2-1"]


@cache
def inference_on_the_device_plugin() -> Expectations:
    """The inference stack with its L40S pool on the device plugin: DCGM's pods, which ask for `nvidia.com/gpu`,
    skip a DRA pool (the shipped stack's)."""
    raw = yaml.safe_load(stack_file("inference").read_text())
    for pool in raw["config"]["gpu-clusters:nodePools"]:
        pool.pop("gpuAllocation", None)
    path = Path(tempfile.mkdtemp()) / "Pulumi.inference-device-plugin.yaml"
    path.write_text(yaml.safe_dump(raw))
    return expect_file(path)


def inference_api(exporter_leaves: bool = True) -> FakeApi:
    """An inference stack's two L40S nodes, one of them labelled `true` already (as a MIG manager would), each with
    the stack's exporter pod; the DaemonSet controller removes a node's pod when its label reads a pause value and
    starts it again once it does not (unless `exporter_leaves` is False: a pod stuck terminating)."""
    nodes = [node("ip-10-0-0-1", "system", "m7i.xlarge")]
    nodes += [node(n, "l40s", "g6e.12xlarge", gpus=4) for n in L40S]
    nodes[1]["metadata"]["labels"][DEPLOY] = "true"
    api = FakeApi(nodes, pods={"monitoring": [daemon_pod("dcgm-exporter", n) for n in L40S]})

    def controller(api: FakeApi, name: str) -> None:
        (labels,) = [n["metadata"]["labels"] for n in api.nodes if n["metadata"]["name"] == name]
        pods = [p for p in api.pods["monitoring"] if p["spec"]["nodeName"] != name]
        if not labels.get(DEPLOY, "").startswith("paused-") or not exporter_leaves:
            pods.append(daemon_pod("dcgm-exporter", name))
        api.pods["monitoring"] = pods

    api.on_label = controller
    return api


def exporter_on(api: FakeApi, name: str) -> bool:
    return any(p["spec"]["nodeName"] == name for p in api.pods["monitoring"])


@pytest.mark.parametrize("outcome", ["pass", "fail", "timeout"])
def test_level_4_pauses_each_nodes_exporter_and_restores_its_label(outcome: str) -> None:
    api = inference_api()
    beside: list[bool] = []

    def act(body: dict[str, Any]) -> tuple[str, str]:
        beside.append(exporter_on(api, host(body)))
        if outcome == "timeout":
            return "Running", ""
        return "Succeeded", sample("dcgm-diag-r1-pass.json.txt" if outcome == "pass" else SUMMARY_FAIL)

    api.behaviour = act
    results, _ = run(api, ["dcgm"], Options(dcgm_level=4), inference_on_the_device_plugin())
    assert {r.status for r in results} == {{"pass": "pass", "fail": "fail", "timeout": "error"}[outcome]}
    assert beside and not any(beside)  # no diagnostic ran beside an exporter
    # paused first, then each label back as it was: `true` restored, the absent one removed
    assert api.labelled == [
        (L40S[0], DEPLOY, "paused-for-diagnostic"),
        (L40S[1], DEPLOY, "paused-for-diagnostic"),
        (L40S[0], DEPLOY, "true"),
        (L40S[1], DEPLOY, None),
    ]
    assert all(exporter_on(api, n) for n in L40S)


def test_an_exporter_that_does_not_leave_keeps_level_4_off_its_node_and_the_label_is_restored() -> None:
    api = inference_api(exporter_leaves=False)
    now = [0.0]
    session = PodSession(api, "r1", "default", clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + 60))
    results = run_checks(
        api, inference_on_the_device_plugin(), ["dcgm"], Options(dcgm_level=4), lambda *a: None, session=session
    )
    assert [(r.target, r.status) for r in results] == [(f"l40s/{n}", "error") for n in L40S]
    assert "did not leave the node within 300s" in results[0].detail
    assert not api.created and now[0] == 300  # waited the exporter's time, ran no diagnostic beside it
    assert [v for (_, _, v) in api.labelled[2:]] == ["true", None]


def test_lower_levels_leave_the_exporter_alone() -> None:
    api = inference_api()
    api.behaviour = lambda body: ("Succeeded", sample("dcgm-diag-r1-pass.json.txt"))
    results, _ = run(api, ["dcgm"], Options(dcgm_level=3), inference_on_the_device_plugin())
    assert {r.status for r in results} == {"pass"} and api.labelled == []


def test_a_failed_nvswitch_result_is_named_by_its_entity_group() -> None:
    log = json.dumps(
        {
            "DCGM Diagnostic": {
                "test_categories": [
                    {
                        "category": "Hardware",
                        "tests": [
                            {
                                "name": "nvswitch",
                                "results": [
                                    {"entity_group": "NvSwitch", "entity_id": 2, "status": "Fail"},
                                    {"entity_group": "GPU", "entity_id": 0, "status": "Pass"},
                                ],
                            }
                        ],
                    }
                ]
            }
        }
    )
    failures = dcgm_failures(parse_dcgm(log))
    assert [(t.entity, t.gpus) for t in failures] == [("NvSwitch", "2")]
    assert "(NvSwitch 2) fail" in dcgm._describe(failures)
