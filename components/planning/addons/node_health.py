"""The health loop add-on (pure, no Pulumi): a one-replica Deployment on the system pool running
`programs.node_health` from a ConfigMap of its source on AWS's public Python image, its settings, its service
account and the RBAC it needs, nothing more. docs/operations.md, "The health loop"; the permissions' reasons:
docs/security.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.catalog.images import image
from components.config import NodeHealth
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.health_checks import check_pod_templates
from components.planning.node_health import LOOP_POD_LABELS, METRICS_PORT, NODE_HEALTH_NAMESPACE, SERVICE_ACCOUNT

__all__ = ["LOOP_POD_LABELS"]
from components.planning.pools import PoolPlan

NAME = SERVICE_ACCOUNT
NAMESPACE = NODE_HEALTH_NAMESPACE
#: AWS's Python image with boto3 (catalog `images.yaml`, pinned by tag).
IMAGE = image("node-health-loop").reference
#: The ConfigMap of the program's source and the one of its settings.
PROGRAM_CONFIG_MAP = "node-health-program"
SETTINGS_CONFIG_MAP = "node-health-settings"
#: Where the pod mounts them: the program as the package tree `programs/node_health/` under `PROGRAM_DIR`.
PROGRAM_DIR = "/opt/node-health"
SETTINGS_DIR = "/etc/node-health"
#: The image's runtime keeps boto3 in its runtime directory, outside the interpreter's default path.
PYTHON_PATH = f"{PROGRAM_DIR}:/var/runtime"
#: Seconds between the loop's passes.
POLL_SECONDS = 30
#: The unprivileged user the loop runs as (its image's files are world-readable; it writes nothing to disk).
RUN_AS = 65532
PROGRAMS_ROOT = Path(__file__).resolve().parents[3] / "programs"


def _sources() -> list[Path]:
    return [PROGRAMS_ROOT / "__init__.py", *sorted((PROGRAMS_ROOT / "node_health").glob("*.py"))]


def _key(path: Path) -> str:
    """A ConfigMap key for a source file: its path under the project with `/` as `.` (`programs.node_health.kube.py`;
    keys allow letters, digits, `-`, `_` and `.` only)."""
    return path.relative_to(PROGRAMS_ROOT.parent).as_posix().replace("/", ".")


def program_files() -> dict[str, str]:
    """The program's source by ConfigMap key: the package's modules and the parent package's `__init__.py`, read
    from the project so the cluster runs exactly what the tests ran."""
    return {_key(path): path.read_text() for path in _sources()}


def program_items() -> list[dict[str, str]]:
    """The ConfigMap volume's `items`: each key at its path in the package tree."""
    return [{"key": _key(path), "path": path.relative_to(PROGRAMS_ROOT.parent).as_posix()} for path in _sources()]


def settings(config: NodeHealth, plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """The loop's `config.json` (programs.node_health.checks.Settings): the gated pools' check pods and the
    timings of `addons.nodeHealth`."""
    idle = config.idle_check_minutes
    return {
        "pools": check_pod_templates(list(plans), config.check_timeout_seconds),
        "idleCheckSeconds": idle * 60 if idle is not None else None,
        "maxConcurrentChecks": config.max_concurrent_checks,
        "checkTimeoutSeconds": config.check_timeout_seconds,
        "scheduleTimeoutSeconds": config.schedule_timeout_seconds,
        "pollSeconds": POLL_SECONDS,
        "metricsPort": METRICS_PORT,
    }


def settings_file(config: NodeHealth, plans: Sequence[PoolPlan]) -> str:
    return json.dumps(settings(config, plans), indent=1, sort_keys=True)


#: Least privilege, by what the loop does: read nodes and patch them (state label, annotations, the startup taint,
#: cordon); see every pod (is a node running GPU work; the repair path drains); evict pods (the drain honours
#: PodDisruptionBudgets); in its own namespace create and delete its check pods and keep the repair path's state
#: ConfigMap.
CLUSTER_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
)
NAMESPACE_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "list"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]},
)


def deployment_spec(plans: Sequence[PoolPlan], region: str) -> dict[str, Any]:
    """One replica (`Recreate`: never two loops at once, each would start checks), on the system pool, restricted.
    `AWS_REGION` for the repair path's AWS calls (Pod Identity gives credentials, not a region)."""
    labels = dict(LOOP_POD_LABELS)
    return {
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": SERVICE_ACCOUNT,
                "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
                "tolerations": tolerations_for(system_plans(plans)),
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": RUN_AS,
                    "runAsGroup": RUN_AS,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "loop",
                        "image": IMAGE,
                        "command": ["python3", "-m", "programs.node_health.loop"],
                        "env": [
                            {"name": "PYTHONPATH", "value": PYTHON_PATH},
                            {"name": "PYTHONUNBUFFERED", "value": "1"},
                            {"name": "AWS_REGION", "value": region},
                            {"name": "NODE_HEALTH_CONFIG", "value": f"{SETTINGS_DIR}/config.json"},
                        ],
                        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "128Mi"},
                            "limits": {"memory": "256Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [
                            {"name": "program", "mountPath": PROGRAM_DIR, "readOnly": True},
                            {"name": "settings", "mountPath": SETTINGS_DIR, "readOnly": True},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "program", "configMap": {"name": PROGRAM_CONFIG_MAP, "items": program_items()}},
                    {"name": "settings", "configMap": {"name": SETTINGS_CONFIG_MAP}},
                ],
            },
        },
    }
