"""Running the kubernetes-sigs/ai-conformance suite against a stack's cluster: the `go test` command the plan asks
for, the same run as a Kubernetes Job for a machine without Go, and the run itself with its evidence collected.

The suite is the catalog's pin for the stack's Kubernetes minor ([AISUITE]); the autoscaling test's pool label and
allocation mode come from the plan (components.planning.conformance.autoscaling_target), and are passed only where
the pinned suite defines those flags ([AISUITECA]): a flag the test binary does not define fails the whole run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.catalog.versions import ConformanceSuitePin
from components.planning.conformance import ACCELERATOR_TYPE, AutoscalingTarget

#: `go test` stops a test binary after 10 minutes by default ([GOTEST]); the autoscaling test waits for a node to
#: be added and removed (cluster-autoscaler's scale-down alone waits 10 minutes of idleness), so the run gets 2 h.
GO_TEST_TIMEOUT = "2h"
#: The Job's namespace and names; the tests create namespaces of their own for their pods.
JOB_NAMESPACE = "ai-conformance"
JOB_NAME = "ai-conformance"
#: Where the Job's container checks the suite out and keeps Go's caches (its root filesystem is the image's).
_WORKDIR = "/tmp/ai-conformance"

#: A process runner: argv, working directory, a callback per output line; returns the exit code. Raises OSError
#: when the program cannot be started.
ProcessRunner = Callable[[Sequence[str], Path | None, Callable[[str], None]], int]


def suite_flags(pin: ConformanceSuitePin, target: AutoscalingTarget | None, kubeconfig: str | None) -> list[str]:
    """The test binary's flags: the kubeconfig (when given), the accelerator type, and the autoscaling test's pool
    label and allocation mode where the pinned suite defines them and the plan has an autoscaled GPU pool."""
    flags = [f"-kubeconfig={kubeconfig}"] if kubeconfig else []
    flags.append(f"-accelerator-type={ACCELERATOR_TYPE}")
    if target is not None and "autoscaler-node-pool-label" in pin.flags:
        flags.append(f"-autoscaler-node-pool-label={target.label}")
        if "autoscaler-allocation-mode" in pin.flags:
            flags.append(f"-autoscaler-allocation-mode={target.allocation_mode}")
    return flags


def go_test_command(pin: ConformanceSuitePin, target: AutoscalingTarget | None, kubeconfig: str | None) -> list[str]:
    """`go test` over the suite's package, as JSON events, never from the test cache ([GOTEST])."""
    return [
        "go",
        "test",
        "-v",
        "-json",
        "-count=1",
        f"-timeout={GO_TEST_TIMEOUT}",
        "./test",
        "-args",
        *suite_flags(pin, target, kubeconfig),
    ]


def skipped_autoscaling(pin: ConformanceSuitePin, target: AutoscalingTarget | None) -> str | None:
    """Why the autoscaling test will not run, or None when it will."""
    if "autoscaler-node-pool-label" not in pin.flags:
        return f"the pinned suite ({pin.ref[:12]}) has no cluster autoscaling test"
    if target is None:
        return "the stack has no GPU pool cluster-autoscaler resizes"
    if target.min_nodes < 1:
        return (
            f"pool {target.pool} has scaling.min {target.min_nodes}; the test needs at least 1 node "
            "(raise scaling.min for the run)"
        )
    return None


def job_manifests(pin: ConformanceSuitePin, target: AutoscalingTarget | None) -> list[dict[str, Any]]:
    """A namespace, a ServiceAccount bound to cluster-admin (the suite's stated requirement, [AISUITE]) and a Job
    that checks the pinned suite out and runs it in-cluster, without -kubeconfig, so the suite's client takes the
    pod's ServiceAccount ([CLIENTGOICC]); its log is the run's results.json. Delete the namespace and the
    ClusterRoleBinding after collecting."""
    shell = " ".join(
        [
            f"git clone --quiet {pin.repository} {_WORKDIR}",
            f"&& cd {_WORKDIR}",
            f"&& git checkout --quiet {pin.ref}",
            "&& exec " + " ".join(go_test_command(pin, target, kubeconfig=None)),
        ]
    )
    labels = {"app.kubernetes.io/name": JOB_NAME}
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": JOB_NAMESPACE,
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/warn": "restricted",
                },
            },
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": JOB_NAME, "namespace": JOB_NAMESPACE}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": JOB_NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": JOB_NAME, "namespace": JOB_NAMESPACE}],
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": JOB_NAME, "namespace": JOB_NAMESPACE, "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": JOB_NAME,
                        "restartPolicy": "Never",
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "suite",
                                "image": pin.go_image,
                                "command": ["sh", "-c", shell],
                                "env": [
                                    {"name": "HOME", "value": "/tmp"},
                                    {"name": "GOPATH", "value": "/tmp/go"},
                                    {"name": "GOCACHE", "value": "/tmp/go-cache"},
                                ],
                                "resources": {
                                    "requests": {"cpu": "1", "memory": "2Gi"},
                                    "limits": {"memory": "4Gi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                            }
                        ],
                    },
                },
            },
        },
    ]


def stream_process(argv: Sequence[str], cwd: Path | None, on_line: Callable[[str], None]) -> int:
    """Run a program, handing each line of its combined output to `on_line` as it comes; its exit code."""
    with subprocess.Popen(
        list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            on_line(line)
        return process.wait()


@dataclass(frozen=True)
class SuiteCheckout:
    """How the suite's source gets to `directory` at the pinned commit: the commands, in order."""

    directory: Path
    commands: tuple[tuple[str, ...], ...]


def checkout(pin: ConformanceSuitePin, directory: Path) -> SuiteCheckout:
    """Clone the repository unless `directory` already holds a clone, then check the pinned commit out."""
    clone = () if (directory / ".git").exists() else (("git", "clone", "--quiet", pin.repository, str(directory)),)
    return SuiteCheckout(directory, (*clone, ("git", "-C", str(directory), "checkout", "--quiet", pin.ref)))
