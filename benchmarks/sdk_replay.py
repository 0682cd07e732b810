"""Benchmark helper: the Pulumi SDK's own cost of registering a plan's resources, without this project's code.

Why: most of a large plan's time is the SDK registering resources under mocks, work no change here can remove.
Replaying the plan's recorded registrations (same types, names, inputs and resource options: parent, dependsOn,
protect, retainOnDelete, ignoreChanges, aliases, and each input's property dependencies as an output of the
resources it depends on) through the SDK the way a plan runs it (`runner.run_offline`: `PlanMocks`, the offline
monitor without its recording, called in place) measures that floor. Each resource is a generic `CustomResource` (a
`ProviderResource` or a `ComponentResource` where the plan has one) that also declares the output properties of the
provider's class for its type, when the class is found, so the SDK resolves as many outputs as the typed class would.

Not counted, so they stay in the project's share: the typed classes' own argument handling, and the outputs the
components chain with `apply`. Run by `benchmarks.plan_speed`:
`python -m benchmarks.sdk_replay PLAN.json TIMES.jsonl` appends `{"wall": s, "cpu": s, "resources": n, "grown_kib": k}`
to TIMES.jsonl, `grown_kib` being how much the registrations raised the process's peak memory (a lower bound
of what they added).
"""

from __future__ import annotations

import gc
import importlib
import json
import resource
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pulumi  # noqa: E402

from blueprint.plan.mocks import PlanMocks  # noqa: E402
from blueprint.plan.monitor import OfflineMonitor  # noqa: E402
from blueprint.plan.runner import run_offline  # noqa: E402

Record = Mapping[str, Any]
#: Python packages of the providers, by the first part of a type token.
PACKAGES = {"aws": "pulumi_aws", "kubernetes": "pulumi_kubernetes"}


def provider_class(type_token: str) -> type | None:
    """The provider's Python class for a type token (`aws:ec2/launchTemplate:LaunchTemplate` is
    `pulumi_aws.ec2.LaunchTemplate`, `kubernetes:apps/v1:Deployment` is `pulumi_kubernetes.apps.v1.Deployment`);
    None when there is none (a Kubernetes custom resource, a component)."""
    package, module, name = type_token.split(":")
    if package not in PACKAGES:
        return None
    group, _, rest = module.partition("/")
    # aws: the module's first part (`ec2`); kubernetes: the API group's first label and the version (`apps.v1`)
    path = [group] if package == "aws" else [group.split(".")[0], rest]
    try:
        found = getattr(importlib.import_module(".".join([PACKAGES[package], *path])), name, None)
    except ImportError:
        return None
    return found if isinstance(found, type) and issubclass(found, pulumi.CustomResource) else None


def output_names(cls: type | None) -> list[str]:
    """The engine names of the output properties a provider class declares (its `@pulumi.getter` properties)."""
    if cls is None:
        return []
    names = []
    for member in vars(cls).values():
        if isinstance(member, property) and member.fget is not None:
            name = getattr(member.fget, "_pulumi_name", None)
            if isinstance(name, str):
                names.append(name)
    return names


def creation_order(records: Sequence[Record]) -> Iterator[Record]:
    """Records with every resource each one refers to (parent, dependsOn, property dependencies) before it."""
    by_urn = {r["urn"]: r for r in records}
    done: set[str] = set()
    for record in records:
        stack = [(record, False)]
        while stack:
            current, expanded = stack.pop()
            if current["urn"] in done:
                continue
            if expanded:
                done.add(current["urn"])
                yield current
                continue
            stack.append((current, True))
            for urn in references(current):
                if urn in by_urn and urn not in done:
                    stack.append((by_urn[urn], False))


def references(record: Record) -> list[str]:
    deps = [u for urns in (record.get("propertyDependencies") or {}).values() for u in urns]
    return [*([record["parent"]] if record.get("parent") else []), *record["options"]["dependsOn"], *deps]


def declared_outputs(records: Sequence[Record]) -> dict[str, list[str]]:
    """Per custom resource type of the records, the outputs its provider class declares (`output_names`)."""
    return {t: output_names(provider_class(t)) for t in sorted({r["type"] for r in records if r["custom"]})}


def replay(records: Sequence[Record], declared: Mapping[str, Sequence[str]]) -> None:
    """Register every record, in an order where what each one refers to exists, with its type's declared outputs."""
    built: dict[str, pulumi.Resource] = {}
    for record in creation_order(records):
        options = record["options"]
        opts = pulumi.ResourceOptions(
            parent=built.get(record["parent"] or ""),
            depends_on=[built[u] for u in options["dependsOn"] if u in built],
            protect=options["protect"],
            retain_on_delete=options["retainOnDelete"],
            ignore_changes=options["ignoreChanges"] or None,
            aliases=[pulumi.Alias(name=a[len("name=") :]) if a.startswith("name=") else a for a in options["aliases"]]
            or None,
            additional_secret_outputs=options["additionalSecretOutputs"] or None,
        )
        props: dict[str, Any] = dict.fromkeys(declared.get(record["type"], ()))
        for key, value in record["inputs"].items():
            urns = [u for u in (record.get("propertyDependencies") or {}).get(key, ()) if u in built]
            props[key] = after(value, [built[u] for u in urns]) if urns else value
        if record["type"].startswith("pulumi:providers:"):
            resource: pulumi.Resource = pulumi.ProviderResource(
                record["type"].split(":")[2], record["name"], props, opts
            )
        elif record["custom"]:
            resource = pulumi.CustomResource(record["type"], record["name"], props, opts)
        else:
            # a component with inputs is a provider's (remote) component, such as `kubernetes:yaml/v2:ConfigFile`
            remote = bool(props)
            resource = pulumi.ComponentResource(record["type"], record["name"], props or None, opts, remote=remote)
        built[record["urn"]] = resource


def after(value: Any, resources: Sequence[pulumi.Resource]) -> pulumi.Output[Any]:
    """`value` as an output of `resources`, as a component passes one resource's output to another."""
    return pulumi.Output.all(*(r.urn for r in resources)).apply(lambda _: value)


def main(argv: list[str] | None = None) -> int:
    plan_file, times_file = argv if argv is not None else sys.argv[1:]
    plan = json.loads(Path(plan_file).read_text())
    records = plan["resources"]
    mocks = PlanMocks(plan["summary"]["region"])
    declared = declared_outputs(records)  # imports the provider modules: before the clock starts
    gc.disable()  # as `blueprint plan` runs the program
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start, cpu = time.perf_counter(), time.process_time()
    run_offline(lambda: replay(records, declared), OfflineMonitor(mocks), plan["project"], plan["stack"], {})
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    # no more than what the registrations added to the process's memory (the peak before them is at or above what
    # the process held when they started): a lower bound
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    with open(times_file, "a") as out:
        out.write(json.dumps({"wall": wall, "cpu": cpu, "resources": len(records), "grown_kib": grown}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
