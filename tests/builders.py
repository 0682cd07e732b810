"""The one set of builders the tests share: stack configs, component runs under mocks, and the shipped stacks.

- `stack_config` turns the few keys a test varies into a `StackConfig`, the way a stack file would spell them.
- `run_with_context` registers a component on a `tests.fakes.fake_context` under fresh mocks (`run_mocked` sets
  fresh mocks per call: a module-level `set_mocks` leaks across files, pulumi-testing-notes §1.5).
- `addon_stack` and `run_addons` do the same for the `Addons` component, with pools as stack-file dicts.
- `shipped_stack` and `shipped_plan` build each stack in `stacks/` once per session, in one run
  (`run_stack_under_mocks`): the whole program under mocks and the offline plan (what `blueprint plan` prints) are
  the slowest things a test can ask for, and every test of a shipped stack only reads them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from collections.abc import Callable, Sequence
from functools import cache, wraps
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias, TypeVar

from blueprint import cli
from blueprint.plan.plan import PlannedStack, run_stack_under_mocks
from blueprint.plan.runner import ProgramRun, list_stacks, load_stack, run_mocked, stack_file
from components.addons import Addons
from components.config import StackConfig
from components.context import ClusterContext
from components.planning import stack_plan as planning
from components.planning.pools import PoolPlan
from components.planning.site_routes import site_cidrs
from components.planning.stack_plan import plan_pools
from components.validation import validate
from components.yaml_loader import dump_yaml, parse_yaml

# Re-exported: the tests import every type token from here.
from policies.resources import (  # noqa: F401
    AUTOSCALING_GROUP,
    EFS,
    EKS_CLUSTER,
    HELM_RELEASE,
    KMS_KEY,
    LAUNCH_TEMPLATE,
    LUSTRE,
    PLACEMENT_GROUP,
    SECURITY_GROUP,
    SG_INGRESS_RULE,
    SUBNET,
)
from tests.fakes import fake_context

REGION = "us-east-1"
TWO_ZONES = ("us-east-1a", "us-east-1b")
#: Example pools for `stack_config(pools=[...])`: the system pool, a p5 training pool, four on-prem A40 servers.
SYSTEM = {"name": "system", "role": "system", "instanceType": "m7i.xlarge", "scaling": {"min": 2, "max": 3}}
#: The system pool with the scaling planning gives a system pool that sets none.
SYSTEM_DEFAULT_SCALING = {k: v for k, v in SYSTEM.items() if k != "scaling"}
P5 = {"name": "h100", "role": "training", "instanceType": "p5.48xlarge", "scaling": {"min": 0, "max": 4}}
A40 = {
    "name": "a40",
    "kind": "hybrid",
    "role": "inference",
    "gpuModel": "A40",
    "gpusPerNode": 4,
    "nodes": 4,
    "network": {"remoteNodeCidrs": ["192.168.100.0/24"], "remotePodCidrs": ["192.168.128.0/18"]},
}
THREE_ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
#: How a validated test stack's deployer reaches its private API (validation refuses a private-only endpoint that
#: admits nobody): a VPN network on TCP 443, reached through `SITE_CONNECTION`.
DEPLOYER_ACCESS = {"privateAccessCidrs": ["192.168.10.0/24"]}
#: The gateway a validated test stack's new VPC reaches the site through (validation refuses a new VPC that admits
#: a network outside it, or has hybrid pools, without one).
SITE_CONNECTION = {"transitGatewayId": "tgw-0f3a9c1e27d84b5a6"}

#: Resource type tokens the tests look registrations up by (pulumi-aws 7 / pulumi-kubernetes 4); the policy pack
#: names the ones its rules read (`policies.resources`), the rest are named here.
IAM_ROLE = "aws:iam/role:Role"
EKS_ADDON = "aws:eks/addon:Addon"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
BUCKET = "aws:s3/bucket:Bucket"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"

T = TypeVar("T")


def stack_config(
    *pools: dict[str, Any],
    name: str = "demo",
    cluster: dict[str, Any] | None = None,
    zones: Sequence[str] | None = TWO_ZONES,
    network: dict[str, Any] | None = None,
    region: str = REGION,
    validated: bool = False,
    **sections: Any,
) -> StackConfig:
    """A stack config with `pools` (camelCase dicts, as in a stack file) in `zones` (None: the network's default).

    `cluster` adds keys to `{name: ...}`, `network` adds keys to `{availabilityZones: zones}`, `sections` sets the
    other top-level sections (`storage=`, `addons=`). `validated` runs the cross-field rules the program runs
    (`components.validation.validate`); without it only the schema applies, so planning code can be handed configs
    validation would refuse. A validated stack's deployer reaches the API through `DEPLOYER_ACCESS` unless
    `cluster` sets `endpoint`, and its new VPC reaches the site through `SITE_CONNECTION` when it routes anything
    there and `network` sets no `siteConnection`. A validated stack with hybrid pools leaves Container Insights off
    unless `addons` says otherwise (it cannot monitor on-prem servers, so validation refuses it there).
    """
    raw: dict[str, Any] = {
        "cluster": {"name": name, **(cluster or {})},
        "network": {**({"availabilityZones": list(zones)} if zones is not None else {}), **(network or {})},
        "nodePools": list(pools),
        **sections,
    }
    if validated:
        raw["cluster"].setdefault("endpoint", DEPLOYER_ACCESS)
        if _routes_to_the_site(raw, region):
            raw["network"].setdefault("siteConnection", SITE_CONNECTION)
        if any(p.get("kind") == "hybrid" for p in pools):
            addons = dict(raw.get("addons") or {})
            addons["monitoring"] = {"containerInsights": False, **(addons.get("monitoring") or {})}
            raw["addons"] = addons
        return validate(raw, region)
    return StackConfig.model_validate({"region": region, **raw})


def _routes_to_the_site(raw: dict[str, Any], region: str) -> bool:
    """Whether the stack `raw` describes creates its VPC and routes some network to the site."""
    try:
        spec = StackConfig.model_validate({"region": region, **raw})
    except ValueError:
        return False
    if spec.network.existing_vpc is not None:
        return False
    return bool(site_cidrs(spec.network.vpc_cidr, spec.cluster.endpoint.private_access_cidrs, spec.hybrid_pools))


def once_per_config(build: Callable[[StackConfig], T]) -> Callable[[StackConfig], T]:
    """`build`, run once per distinct config: the tests that build the same config share its run (they only read
    it), so a module's dozen checks of one default stack cost one run under mocks. Errors are not kept."""
    runs: dict[str, T] = {}

    @wraps(build)
    def shared(config: StackConfig) -> T:
        key = config.model_dump_json()
        if key not in runs:
            runs[key] = build(config)
        return runs[key]

    return shared


def first_pool_plan(pool: dict[str, Any], name: str = "demo") -> PoolPlan:
    """The plan of `pool`, the only pool a stack called `name` lists."""
    return plan_pools(stack_config(pool, name=name))[0]


def run_with_context(spec: StackConfig, build: Callable[[ClusterContext], object]) -> ProgramRun:
    """Run `build(fake_context(spec))` under fresh mocks; return every registration, in order."""
    return run_mocked(lambda: build(fake_context(spec)))


# ------------------------------------------------------------------------------------------------ add-on stacks
# Pools as plain config dicts (as a stack file writes them), so each add-on test states the one thing it varies.
SYSTEM_POOL: dict[str, Any] = {
    "name": "system",
    "role": "system",
    "instanceType": "m7i.xlarge",
    "scaling": {"min": 2, "max": 3, "mode": "fixed"},
}
TRAINING_POOL: dict[str, Any] = {
    "name": "h100",
    "role": "training",
    "instanceType": "p5.48xlarge",
    "scaling": {"min": 0, "max": 4, "mode": "cluster-autoscaler"},
    "placement": {"availabilityZones": ["us-east-1a"]},
}
INFERENCE_POOL: dict[str, Any] = {
    "name": "l40s",
    "role": "inference",
    "instanceType": "g6e.12xlarge",
    "capacity": {"type": "spot"},
    "scaling": {"min": 1, "max": 8, "mode": "gpu-utilization"},
}
HYBRID_POOL: dict[str, Any] = {
    "name": "a40",
    "kind": "hybrid",
    "role": "inference",
    "gpuModel": "A40",
    "gpusPerNode": 4,
    "nodes": 2,
    "network": {"remoteNodeCidrs": ["192.168.100.0/24"], "remotePodCidrs": ["192.168.128.0/18"]},
}


def pool(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a pool dict with top-level keys replaced (camelCase, as in a stack file)."""
    return {**json.loads(json.dumps(base)), **changes}


def addon_stack(
    *pools: dict[str, Any], addons: dict[str, Any] | None = None, name: str = "gpu", kubernetes: str = "1.35"
) -> StackConfig:
    """A stack for the add-on tests: `pools` and the `addons` section, the rest as `stack_config` has it."""
    return stack_config(*pools, name=name, cluster={"kubernetesVersion": kubernetes}, addons=addons or {})


def asg_name(spec: StackConfig, pool_name: str) -> str:
    """The Auto Scaling group name the add-on tests hand over for a pool, in place of its node pool's."""
    return f"{spec.cluster.name}-{pool_name}-asg"


def run_addons(spec: StackConfig, asg_names: dict[str, str] | None = None) -> ProgramRun:
    """Register `Addons` for `spec` and return every registration. `asg_names` default to a faked name for every
    `aws` pool (`asg_name`), as node pools hand them over; with the default, one run per distinct config."""
    if asg_names is None:
        return _addons_with_every_asg(spec)
    return _register_addons(spec, asg_names)


@once_per_config
def _addons_with_every_asg(spec: StackConfig) -> ProgramRun:
    return _register_addons(spec, {p.name: asg_name(spec, p.name) for p in plan_pools(spec) if p.kind == "aws"})


def _register_addons(spec: StackConfig, asg_names: dict[str, str]) -> ProgramRun:
    stack_plan = planning.plan_stack(spec)
    return run_with_context(
        spec,
        lambda ctx: Addons(f"{spec.cluster.name}-addons", context=ctx, stack_plan=stack_plan, asg_names=asg_names),
    )


def policy_document(run: ProgramRun, role_name: str) -> dict[str, Any]:
    """The inline policy of a Pod Identity role registered by `tests.fakes.fake_pod_identity_role`."""
    role = run.one("aws:iam/role:Role", role_name)
    (inline,) = role.inputs["inlinePolicies"]
    document: dict[str, Any] = json.loads(inline["policy"])
    return document


def releases(run: ProgramRun) -> dict[str, dict[str, Any]]:
    """Helm releases by their release name (not the Pulumi resource name)."""
    return {r.inputs["name"]: r.inputs for r in run.of_type("kubernetes:helm.sh/v3:Release")}


# ----------------------------------------------------------------------------------------------- shipped stacks
#: A stack in `stacks/` through the real program under mocks (`blueprint.plan.plan.run_stack_under_mocks`): its
#: files, every registration, the resolved stack outputs and the offline plan, all from one run.
ShippedStack: TypeAlias = PlannedStack


@cache
def shipped_stack(stack: str) -> ShippedStack:
    """`stacks/Pulumi.<stack>.yaml` through `components.program.main`, as `pulumi up` runs it, and planned as
    `blueprint plan` plans it: one run per stack and session. Callers only read it."""
    return run_stack_under_mocks(stack)


def stack_variant(stack: str, variant: str, edit: Callable[[dict[str, Any]], None]) -> PlannedStack:
    """`stacks/Pulumi.<stack>.yaml` with its config edited in place by `edit`, planned once per content
    (`stack_run`). Callers only read it."""
    raw = parse_yaml(stack_file(stack).read_text())
    edit(raw["config"])
    path = Path(tempfile.mkdtemp(prefix="blueprint-")) / f"Pulumi.{stack}-{variant}.yaml"
    path.write_text(dump_yaml(raw))
    return stack_run(config_file=path)


def training_on_container_insights() -> PlannedStack:
    """The training stack moved to the Container Insights path (it ships on the Prometheus path): the CloudWatch side
    of a plan (dashboard, alarms, the health loop's publisher) on a stack with a training pool."""

    def edit(config: dict[str, Any]) -> None:
        config["gpu-clusters:addons"] = {"monitoring": {"containerInsights": True, "dcgmPrometheus": False}}

    return stack_variant("training", "container-insights", edit)


def inference_on_dra() -> PlannedStack:
    """The inference stack with its `l40s` pool allocating GPUs through NVIDIA's DRA driver (it ships on the device
    plugin, which Kueue's quotas count)."""

    def edit(config: dict[str, Any]) -> None:
        next(p for p in config["gpu-clusters:nodePools"] if p["name"] == "l40s")["gpuAllocation"] = "dra"

    return stack_variant("inference", "dra", edit)


class CliResult(NamedTuple):
    """What one `blueprint ...` invocation gave back (the `blueprint_cli` fixture in `tests/conftest.py`)."""

    returncode: int
    stdout: str
    stderr: str


def shipped_plan(stack: str) -> dict[str, Any]:
    """The offline plan of `stacks/Pulumi.<stack>.yaml` (what `blueprint plan --format json` prints), once per
    session (the plan of `shipped_stack`'s run). Callers only read it."""
    return shipped_stack(stack).plan


def file_plan(config_file: Path) -> dict[str, Any]:
    """The offline plan of a stack file, once per session and content (`stack_run`); a file that does not plan
    raises each time."""
    return stack_run(config_file=config_file).plan


#: The session's runs of `run_stack_under_mocks` by (project, stack name, merged config, policy config bytes).
_RUNS: dict[tuple[str, str, str, bytes | None], PlannedStack] = {}


def stack_run(
    stack: str | None = None, config_file: Path | None = None, policy_config: Path | None = None
) -> PlannedStack:
    """`run_stack_under_mocks`, run once per session for each stack name, config and policy config, by content: a
    run depends on nothing else (mock ids come from names, the clock is pinned), so `blueprint plan`, `check`,
    `deployer-policy` and `preflight` of the same stack in several tests share one run. A stack file that does not
    load, or a config that does not validate, raises each time, as the real run does. Callers only read it."""
    if config_file is None and policy_config is None and stack in list_stacks():
        return shipped_stack(stack)
    files = load_stack(stack, config_file)
    policy = policy_config.read_bytes() if policy_config is not None else None
    key = (files.project, files.stack, json.dumps(files.config, sort_keys=True, default=repr), policy)
    if key not in _RUNS:
        _RUNS[key] = run_stack_under_mocks(stack, config_file, policy_config)
    return dataclasses.replace(_RUNS[key], files=files)


@cache
def cli_parser() -> argparse.ArgumentParser:
    """The command line's parser with every subcommand's arguments, built once: building it takes longer than most
    in-process runs, and parsing leaves it as it was (each parse fills a new namespace)."""
    return cli._parser()
