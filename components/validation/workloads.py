"""Rules on the `workloads` section: each serving workload runs on a GPU inference pool that can hold it, reads its
weights from the NFS claim, and has what its autoscaler reads (the DCGM exporter on the Prometheus path); and it is
safe by default: no vLLM release inside a refused advisory, no unsafe server argument it has not accepted, no
world-wide client network (docs/security.md#the-serving-endpoint)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from pydantic.alias_generators import to_camel

from components.catalog.images import advisories_affecting, image
from components.config import GpuUtilizationScaling, NodePool, ServingWorkload
from components.errors import Problem
from components.validation.parse import Parsed

#: The GPU-utilization rule's settings, refused on a workload whose rule is `queue`.
GPU_UTILIZATION_SETTINGS = frozenset(GpuUtilizationScaling.model_fields)


def _serving(p: Parsed) -> Iterator[tuple[str, ServingWorkload]]:
    for index, workload in enumerate(p.workloads.serving if p.workloads is not None else []):
        yield f"workloads.serving[{index}]", workload


def _pool(p: Parsed, name: str) -> tuple[int, NodePool] | None:
    return next(((index, pool) for index, pool in p.pools if pool.name == name), None)


def _mixed_mig(p: Parsed, pool: NodePool) -> bool:
    """A `mixed` MIG pool advertises `nvidia.com/mig-<profile>` and no `nvidia.com/gpu` ([NVDP] README)."""
    strategy = p.addons.nvidia_device_plugin.mig_strategy if p.addons is not None else "none"
    return bool(pool.device_plugin.mig_devices) and strategy == "mixed"


def _gpus_per_node(p: Parsed, index: int, pool: NodePool) -> int | None:
    """`nvidia.com/gpu` a node of the pool advertises (MIG devices under `single` and time-slicing counted, as
    `planning.mig.advertised_resources` does), None when its type did not resolve."""
    if pool.kind == "hybrid":
        gpus = pool.gpus_per_node
    else:
        instance = p.instances.get(index)
        gpus = instance.gpu_count if instance is not None else None
    if gpus is None or _mixed_mig(p, pool):
        return None
    per_gpu = sum((pool.device_plugin.mig_devices or {}).values()) or 1
    return gpus * per_gpu * pool.device_plugin.time_slicing_replicas


def serving_workloads_have_unique_names(p: Parsed) -> Iterator[Problem]:
    """Workload names name a Deployment, Service, PodDisruptionBudget and ScaledObject in one namespace, where
    Kubernetes names are unique per kind."""
    seen: set[str] = set()
    for path, workload in _serving(p):
        if workload.name in seen:
            yield Problem(f"{path}.name", f"{workload.name} names more than one serving workload; give each its own")
        seen.add(workload.name)


def serving_workloads_run_on_gpu_inference_pools(p: Parsed) -> Iterator[Problem]:
    """A serving workload names a pool of the stack with `role: inference` and NVIDIA GPUs: its replicas request
    `nvidia.com/gpu` and select the pool by its `gpu-clusters/pool` label."""
    if not p.pools_complete:
        return
    for path, workload in _serving(p):
        found = _pool(p, workload.pool)
        if found is None:
            names = ", ".join(pool.name for _, pool in p.pools if pool.role == "inference") or "none"
            yield Problem(f"{path}.pool", f"no node pool {workload.pool}; inference pools: {names}")
            continue
        index, pool = found
        if pool.role != "inference":
            yield Problem(f"{path}.pool", f"{pool.name} is a {pool.role} pool; name an inference pool")
        elif _mixed_mig(p, pool):
            yield Problem(
                f"{path}.pool",
                f"{pool.name} partitions its GPUs under migStrategy mixed, which advertises nvidia.com/mig-<profile> "
                "and no nvidia.com/gpu, the resource the server requests; use migStrategy single or a pool without MIG",
            )
        elif _gpus_per_node(p, index, pool) == 0:
            yield Problem(f"{path}.pool", f"{pool.name} has no GPUs; the server needs an inference pool with GPUs")


def serving_replicas_fit_the_pool(p: Parsed) -> Iterator[Problem]:
    """A replica's GPUs divide a node's (replicas never straddle nodes, and "one node's worth of replicas" is a
    whole number), `replicas.min <= replicas.max`, and `replicas.max` fits the pool's nodes (pool `max`, or `nodes`
    for a hybrid pool)."""
    for path, workload in _serving(p):
        top, low = workload.replicas.max, workload.replicas.min
        ordered = top is None or low <= top
        if not ordered:
            yield Problem(f"{path}.replicas.min", f"min {low} is above max {top}")
        found = _pool(p, workload.pool)
        gpus = _gpus_per_node(p, *found) if found is not None else None
        if found is None or not gpus:
            continue
        index, pool = found
        sized_by = ("nodes", "gpusPerNode") if pool.kind == "hybrid" else ("scaling.max",)
        if p.damaged_at(*(f"nodePools[{index}].{key}" for key in sized_by)):
            continue  # the pool's size did not parse: its slots would be counted from a default
        if gpus % workload.gpus_per_replica:
            yield Problem(
                f"{path}.gpusPerReplica",
                f"{workload.gpus_per_replica} does not divide the {gpus} GPUs of a {pool.name} node; use a divisor",
            )
            continue
        slots = ((pool.nodes or 0) if pool.kind == "hybrid" else pool.scaling.max) * (gpus // workload.gpus_per_replica)
        if ordered and top is not None and top > slots:
            yield Problem(
                f"{path}.replicas.max",
                f"{top} replicas do not fit the {slots} replica slot(s) of {pool.name}'s nodes; set at most {slots} "
                "or grow the pool",
            )
        elif ordered and low > slots:
            yield Problem(f"{path}.replicas.min", f"{low} replicas do not fit {slots} slots of {pool.name}")


def serving_workloads_are_wired(p: Parsed) -> Iterator[Problem]:
    """A serving workload reads its weights from `storage.nfs`, mounted by its pool (`storage.nfs.pools`, default
    every inference pool; never a hybrid pool on EFS, which AWS does not support there), and its autoscaler reads
    Prometheus (`addons.monitoring.dcgmPrometheus`): vLLM's requests in flight, or the DCGM exporter's GPU
    utilization."""
    nfs = p.storage.nfs if p.storage is not None else None
    prometheus = p.addons.monitoring.dcgm_prometheus if p.addons is not None else True
    prometheus = prometheus or p.damaged_at("addons.monitoring.dcgmPrometheus")
    for path, workload in _serving(p):
        found = _pool(p, workload.pool)
        if p.storage is not None and nfs is None:
            yield Problem(f"{path}.model", "the weights come from storage.nfs, which the stack does not have; add it")
        elif nfs is not None and found is not None and found[1].role == "inference" and not p.damaged_at("storage.nfs"):
            pool = found[1]
            listed = workload.pool in nfs.pools if nfs.pools is not None else pool.role == "inference"
            if not listed or (nfs.kind == "efs" and pool.kind == "hybrid"):
                yield Problem(
                    f"{path}.pool",
                    f"{pool.name} does not mount storage.nfs ({nfs.name}); add it to storage.nfs.pools (EFS: cloud "
                    "pools only)",
                )
        if not prometheus:
            yield Problem(
                f"{path}.pool",
                "the autoscaler reads the workload's metrics (vLLM's requests in flight, or DCGM_FI_DEV_GPU_UTIL) "
                "from Prometheus; set addons.monitoring.dcgmPrometheus: true (and containerInsights: false)",
            )


def serving_rule_is_given_once(p: Parsed) -> Iterator[Problem]:
    """On a `gpu-utilization` pool the pool's `scaling.gpuUtilization` is the rule, so a workload there sets none;
    a workload's own settings belong to its rule (`queue` by default), none of the other's is set and ignored; a
    GPU-utilization rule keeps its scale-in threshold below its scale-out one (or replicas would flap)."""
    for path, workload in _serving(p):
        found = _pool(p, workload.pool)
        rule = workload.autoscaling
        if rule is None:
            continue
        if found is not None and found[1].kind == "aws" and found[1].scaling.mode == "gpu-utilization":
            yield Problem(
                f"{path}.autoscaling",
                f"pool {workload.pool} is in gpu-utilization mode, whose rule is nodePools[{found[0]}].scaling."
                "gpuUtilization; set it there and remove this",
            )
        elif rule.rule == "queue":
            for name in sorted(rule.model_fields_set & GPU_UTILIZATION_SETTINGS):
                yield Problem(
                    f"{path}.autoscaling.{to_camel(name)}",
                    "a setting of rule: gpu-utilization, and this workload's rule is queue (the default); remove it "
                    "or set rule: gpu-utilization",
                )
        elif "target_in_flight_per_replica" in rule.model_fields_set:
            yield Problem(
                f"{path}.autoscaling.targetInFlightPerReplica",
                "a setting of rule: queue, and this workload's rule is gpu-utilization; remove it or set rule: queue",
            )
        elif rule.scale_in_below_percent >= rule.scale_out_above_percent:
            yield Problem(
                f"{path}.autoscaling.scaleInBelowPercent",
                f"{rule.scale_in_below_percent:g}% must be below scaleOutAbovePercent "
                f"({rule.scale_out_above_percent:g}%) or the replicas would flap",
            )


def serving_drains_in_time(p: Parsed) -> Iterator[Problem]:
    """A replica's grace period fits the node termination handler's drain timeout (`drainTimeoutSeconds`), or an
    instance terminated by its Auto Scaling group would go before the replica finished its requests."""
    handler = p.addons.node_termination_handler if p.addons is not None else None
    if handler is None or handler.enabled == "off":
        return
    for path, workload in _serving(p):
        found = _pool(p, workload.pool)
        if (
            found is not None
            and found[1].kind == "aws"
            and workload.termination_grace_seconds > (handler.drain_timeout_seconds)
        ):
            yield Problem(
                f"{path}.terminationGraceSeconds",
                f"{workload.termination_grace_seconds} s is longer than the node termination handler's drain "
                f"timeout ({handler.drain_timeout_seconds} s); lower it or raise "
                "addons.nodeTerminationHandler.drainTimeoutSeconds",
            )


#: vLLM server flags that run code from the model or open unsafe inputs, each with why; a workload passes one only
#: when it lists it in `acceptUnsafeArgs`.
UNSAFE_ARGS = {
    "--trust-remote-code": "runs Python code shipped with the model's files ([VLLMARGS])",
    "--enable-prompt-embeds": "deserializes tensors clients send (CVE-2025-62164, CVE-2026-56340)",
    "--allowed-local-media-path": "lets API requests read files of the server ([VLLMARGS])",
    "--tool-server": "its built-in tools run model-written code without network isolation ([VLLMSEC])",
    "--enable-tokenizer-info-endpoint": "serves the chat template and tokenizer config without a key ([VLLMSEC])",
    "--trust-request-chat-template": "renders Jinja templates clients send (PYSEC-2026-4349)",
    "--profiler-config": "opens the profiler endpoints without a key, never for production ([VLLMSEC])",
}
#: A flag the stack refuses outright: a key in the arguments is plain text in the pod spec and the stack's state.
API_KEY_ARG = "--api-key"
#: Client networks wider than this many prefix bits are refused: a /7 is already two /8s of the world.
WIDEST_CLIENT_PREFIX = 8
#: The vLLM server image, from Docker Hub or a mirror that keeps its path (`registry.example/vllm/vllm-openai`).
_VLLM_REPOSITORY = "vllm/vllm-openai"


def _flag(arg: str) -> str:
    """`--trust-remote-code=true` -> `--trust-remote-code`; vLLM also spells flags with underscores."""
    return arg.split("=", 1)[0].replace("_", "-") if arg.startswith("--") else arg


def serving_image_is_past_the_advisories(p: Parsed) -> Iterator[Problem]:
    """A `vllm/vllm-openai` image (from Docker Hub or a mirror keeping that path) whose tag names a release inside a
    refused advisory's range (catalog `images.yaml`) is refused, with the advisories and the release that fixes them
    all."""
    default = image("vllm-openai")
    for path, workload in _serving(p):
        if workload.image is None:
            continue
        name = workload.image.split("@", 1)[0]
        repository, _, tag = name.rpartition(":")
        if not (repository == _VLLM_REPOSITORY or repository.endswith(f"/{_VLLM_REPOSITORY}")) or "/" in tag:
            continue
        found = advisories_affecting(tag)
        if found:
            listed = "; ".join(
                f"{a.id} ({a.severity}, {a.introduced_version} to before {a.fixed_version})" for a in found
            )
            fixed = max(found, key=lambda a: a.fixed).fixed_version
            yield Problem(
                f"{path}.image",
                f"{workload.image} is inside {listed}; use {fixed} or later, e.g. the default {default.reference} "
                "(remove `image`)",
            )


def serving_args_are_safe(p: Parsed) -> Iterator[Problem]:
    """`extraArgs` passes no security-sensitive flag the workload has not accepted in `acceptUnsafeArgs`, never
    `--api-key` (use `apiKey`); `acceptUnsafeArgs` names only flags of that list that `extraArgs` passes."""
    for path, workload in _serving(p):
        accepted = set(workload.accept_unsafe_args)
        passed = {_flag(arg) for arg in workload.extra_args}
        for index, arg in enumerate(workload.extra_args):
            flag = _flag(arg)
            if flag == API_KEY_ARG:
                yield Problem(
                    f"{path}.extraArgs[{index}]",
                    "--api-key puts the key in the pod spec and the stack's state; set apiKey.secretName (and "
                    "apiKey.key) to read it from a Kubernetes Secret",
                )
            elif flag in UNSAFE_ARGS and flag not in accepted:
                yield Problem(
                    f"{path}.extraArgs[{index}]",
                    f"{flag} {UNSAFE_ARGS[flag]}; remove it, or accept it with acceptUnsafeArgs: [{flag}]",
                )
        for index, flag in enumerate(workload.accept_unsafe_args):
            if flag not in UNSAFE_ARGS:
                yield Problem(
                    f"{path}.acceptUnsafeArgs[{index}]",
                    f"{flag} is not a flag that needs accepting; known: {', '.join(sorted(UNSAFE_ARGS))}",
                )
            elif flag not in passed:
                yield Problem(f"{path}.acceptUnsafeArgs[{index}]", f"extraArgs does not pass {flag}; remove it")


def client_network_problems(where: str, cidr: str) -> Iterator[Problem]:
    """A client network a NetworkPolicy admits: an IPv4 network, host bits zero, no wider than a /8."""
    try:
        network = ipaddress.ip_network(cidr, strict=True)
    except ValueError:
        yield Problem(where, f"{cidr!r} is not a CIDR network with its host bits zero, e.g. 10.20.0.0/24")
        return
    if network.version != 4:
        yield Problem(where, f"{cidr} is not IPv4; the stack's pod network is IPv4")
    elif network.prefixlen < WIDEST_CLIENT_PREFIX:
        yield Problem(where, f"{cidr} admits more than a /{WIDEST_CLIENT_PREFIX}; name the client networks themselves")


def serving_clients_are_bounded(p: Parsed) -> Iterator[Problem]:
    """`allowFrom.cidrs` are IPv4 networks no wider than a /8: the serving NetworkPolicy admits named clients, never
    the world (and, on the hybrid stack, never the whole site by accident)."""
    for path, workload in _serving(p):
        for index, cidr in enumerate(workload.allow_from.cidrs):
            yield from client_network_problems(f"{path}.allowFrom.cidrs[{index}]", cidr)


RULES = (
    serving_workloads_have_unique_names,
    serving_workloads_run_on_gpu_inference_pools,
    serving_replicas_fit_the_pool,
    serving_workloads_are_wired,
    serving_rule_is_given_once,
    serving_drains_in_time,
    serving_image_is_past_the_advisories,
    serving_args_are_safe,
    serving_clients_are_bounded,
)
