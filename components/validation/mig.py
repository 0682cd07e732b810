"""Rules on Multi-Instance GPU: `nodePools[].devicePlugin.migDevices` and `addons.nvidiaDevicePlugin.migStrategy`.

The GPU facts come from the catalog (components/catalog/gpus.yaml `mig:`, NVIDIA MIG user guide "Supported MIG
Profiles" and mig-parted's default config); docs/gpu-sharing.md explains the design.
"""

from __future__ import annotations

from collections.abc import Iterator

from components import catalog
from components.catalog import MIG_COMPUTE_SLICES, MIG_MEMORY_SLICES
from components.config import NodePool
from components.errors import Problem
from components.validation.parse import Parsed, shown_text

STRATEGY = "addons.nvidiaDevicePlugin.migStrategy"


def _mig_pools(p: Parsed) -> Iterator[tuple[str, NodePool, str]]:
    """(key path of `migDevices`, pool, catalog GPU model) of every GPU pool that asks for MIG devices."""
    for index, pool in p.pools:
        if not pool.device_plugin.mig_devices:
            continue
        instance = p.instances.get(index)
        if pool.kind == "aws" and instance is None:
            continue  # an instance type or GPU model that does not resolve: the pool rules say so
        model = instance.gpu_model if instance is not None else pool.gpu_model
        if model is None or model not in catalog.gpu_models():
            continue  # no GPU (the pool rules refuse its devicePlugin) or an unknown model (the hybrid rules)
        yield f"nodePools[{index}].devicePlugin.migDevices", pool, model


def mig_devices_are_profiles_of_the_gpu(p: Parsed) -> Iterator[Problem]:
    """MIG devices need a GPU with MIG (A100, H100, H200, B200, B300; not A40, L40S, L4, A10G or T4) and profiles
    that GPU has (NVIDIA MIG user guide, "Supported GPUs" and "Supported MIG Profiles"; catalog gpus.yaml `mig:`)."""
    with_mig = sorted(name for name, gpu in catalog.gpu_models().items() if gpu.mig is not None)
    for path, _pool, model in _mig_pools(p):
        gpu = catalog.gpu_model(model)
        if gpu.mig is None:
            yield Problem(
                path,
                f"{model} has no MIG (GPUs with MIG: {', '.join(with_mig)}); remove migDevices and "
                "share its GPUs with timeSlicingReplicas",
            )
            continue
        unknown = sorted(set(_pool.device_plugin.mig_devices or {}) - set(gpu.mig.profiles))
        for profile in unknown:
            yield Problem(
                f"{path}.{shown_text(profile)}",
                f"{model} has no MIG profile {profile}; its profiles: {', '.join(gpu.mig.profiles)}",
            )


def mig_devices_fit_one_gpu(p: Parsed) -> Iterator[Problem]:
    """The MIG devices of one GPU fit it: each profile at most its documented instance count, at most one `+me`
    instance, and together at most 7 compute slices and 8 memory slices (MIG user guide, "Supported MIG Profiles":
    fractions of SMs in sevenths, of memory in eighths, "Number of Instances Available"). Placement beyond these sums
    is checked by mig-parted when it applies the config."""
    for path, pool, model in _mig_pools(p):
        gpu = catalog.gpu_model(model)
        devices = pool.device_plugin.mig_devices or {}
        if gpu.mig is None or not set(devices) <= set(gpu.mig.profiles):
            continue  # mig_devices_are_profiles_of_the_gpu says why
        profiles = gpu.mig.profiles
        over = [(name, count) for name, count in devices.items() if count > profiles[name].max_instances]
        for name, count in over:
            yield Problem(
                f"{path}.{name}", f"one {model} holds at most {profiles[name].max_instances} {name}, not {count}"
            )
        if over:
            continue  # the sums below would only repeat it
        compute = sum(profiles[n].compute_slices * c for n, c in devices.items())
        memory = sum(profiles[n].memory_slices * c for n, c in devices.items())
        media = sum(c for n, c in devices.items() if profiles[n].media_extensions)
        if compute > MIG_COMPUTE_SLICES or memory > MIG_MEMORY_SLICES or media > 1:
            yield Problem(
                path,
                f"these devices take {compute} compute and {memory} memory slices ({media} with media engines) of one "
                f"{model}, which has {MIG_COMPUTE_SLICES} and {MIG_MEMORY_SLICES} (and one set of media engines); "
                "use fewer or smaller profiles",
            )


def mig_strategy_matches_the_pools(p: Parsed) -> Iterator[Problem]:
    """The device plugin's MIG strategy and the pools agree: a pool with MIG devices needs `single` or `mixed`;
    `single` advertises every MIG device as `nvidia.com/gpu`, so each MIG pool has one profile; a strategy without
    any MIG pool partitions nothing ([NVDP] README, "MIG strategies")."""
    if p.addons is None or not p.pools_complete or not p.addons.nvidia_device_plugin.enabled:
        return  # with the plugin off, mig_pools_run_the_mig_manager and the switched-off rule say what is wrong
    strategy = p.addons.nvidia_device_plugin.mig_strategy
    pools = list(_mig_pools(p))
    if strategy != "none" and not any(pool.device_plugin.mig_devices for _, pool in p.pools):
        yield Problem(
            STRATEGY,
            f"{strategy} but no pool sets devicePlugin.migDevices, so no GPU is partitioned; set migStrategy: none or "
            'give a pool with MIG GPUs devicePlugin.migDevices (e.g. {"1g.10gb": 7} on H100)',
        )
    for path, pool, _model in pools:
        profiles = sorted(pool.device_plugin.mig_devices or {})
        if strategy == "none":
            yield Problem(path, f"MIG devices need {STRATEGY} single (one profile per pool) or mixed; it is none")
        elif strategy == "single" and len(profiles) > 1:
            yield Problem(
                path,
                f"{STRATEGY} single advertises every MIG device as nvidia.com/gpu, so a pool has one profile, not "
                f"{', '.join(profiles)}; keep one or use migStrategy: mixed",
            )


def mixed_mig_pools_are_not_scaled_from_pending_pods(p: Parsed) -> Iterator[Problem]:
    """cluster-autoscaler counts GPUs only as `nvidia.com/gpu`: a node with the GPU label that advertises
    `nvidia.com/mig-*` under the `mixed` strategy looks like a GPU node whose GPUs never got ready, and blocks
    scale-up ([CAMIG] kubernetes/autoscaler#8095; fix proposed in kubernetes-sigs/cluster-autoscaler#92, unreleased)."""
    if p.addons is None or p.addons.nvidia_device_plugin.mig_strategy != "mixed":
        return
    for path, pool, _model in _mig_pools(p):
        if pool.kind == "aws" and pool.scaling.mode == "cluster-autoscaler":
            yield Problem(
                path,
                "mixed-strategy MIG devices are not GPUs to cluster-autoscaler (kubernetes/autoscaler#8095), so it "
                "cannot scale this pool; use migStrategy: single or scaling.mode: fixed",
            )


def mig_pools_run_the_mig_manager(p: Parsed) -> Iterator[Problem]:
    """The mig-manager partitions GPUs on AL2023 nodes and on hybrid servers whose default runtime is NVIDIA's: it
    needs the NVIDIA runtime to reach the GPUs ([MIGPARTED] image sets NVIDIA_VISIBLE_DEVICES=all), and the device
    plugin (which advertises the MIG devices) to be deployed. Bottlerocket partitions GPUs itself, at boot, with its
    own device plugin (`settings.kubelet-device-plugins.nvidia.mig.profile`, [BRMIG]),
    which this stack does not drive."""
    plugin_on = p.addons is None or p.addons.nvidia_device_plugin.enabled
    for path, pool, _model in _mig_pools(p):
        if pool.kind == "aws" and pool.ami_family == "bottlerocket":
            yield Problem(
                path,
                "Bottlerocket partitions GPUs with its own settings and device plugin, not NVIDIA's mig-manager; "
                "use amiFamily: al2023 for a MIG pool",
            )
        if pool.kind == "hybrid" and pool.gpu_runtime == "runtime-class":
            yield Problem(
                path,
                "the mig-manager reaches the GPUs through containerd's default runtime, which is runc with gpuRuntime: "
                "runtime-class; use gpuRuntime: default-runtime on a MIG pool",
            )
        if not plugin_on:
            yield Problem(
                path, "addons.nvidiaDevicePlugin.enabled is false, so no MIG device would be advertised; turn it on"
            )


RULES = (
    mig_devices_are_profiles_of_the_gpu,
    mig_devices_fit_one_gpu,
    mig_strategy_matches_the_pools,
    mixed_mig_pools_are_not_scaled_from_pending_pods,
    mig_pools_run_the_mig_manager,
)
