"""`blueprint verify`: arguments to expectations, kubeconfig, checks; the table or JSON; the exit code."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from blueprint import terminal
from blueprint.exit_codes import CONFIG, FAILED, INTERRUPTED, IO, OK, USAGE
from blueprint.verify import render
from blueprint.verify.context import Options
from blueprint.verify.expectations import expectations, load_spec
from blueprint.verify.kube import KubeApi, KubeconfigSource, KubeError, KubernetesApi, kubeconfig_source
from blueprint.verify.model import CHECKS
from blueprint.verify.pods import PodSession
from blueprint.verify.runner import new_run_id, run_checks, selected
from components.errors import ConfigError

#: How the command gets its API client from a kubeconfig file; tests replace it with a fake.
connect: Callable[[Path], KubeApi] = KubernetesApi.from_kubeconfig


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM (a cancelled CI job, `kill`) becomes a KeyboardInterrupt, so the runner's clean-up runs."""
    raise KeyboardInterrupt


def _names(values: list[str], flag: str) -> list[str]:
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"{flag}: unknown check {', '.join(unknown)}; checks: {', '.join(CHECKS)}")
    return names


def _options(args: argparse.Namespace) -> Options:
    for flag, seconds in (("--timeout", args.timeout), ("--pull-timeout", args.pull_timeout)):
        if seconds is not None and seconds <= 0:
            raise ValueError(f"{flag}: give a positive number of seconds")
    for flag, value in (
        ("--min-busbw-fraction", args.min_busbw_fraction),
        ("--min-storage-fraction", args.min_storage_fraction),
    ):
        if not 0 < value <= 2:
            raise ValueError(f"{flag}: give a fraction above 0 and at most 2 (got {value})")
    return Options(
        dcgm_level=args.dcgm_level,
        cordon_failed=args.cordon_failed,
        min_busbw_fraction=args.min_busbw_fraction,
        min_storage_fraction=args.min_storage_fraction,
        timeout_seconds=args.timeout,
        pull_timeout_seconds=args.pull_timeout,
        nccl_image=args.nccl_image,
        dcgm_image=args.dcgm_image,
        cuda_image=args.cuda_image,
    )


def verify(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        checks = selected(_names(args.only, "--only"), _names(args.skip, "--skip"))
        options = _options(args)
    except ValueError as error:
        terminal.error(str(error))
        return USAGE
    if not checks:
        terminal.error("--only and --skip leave no check to run")
        return USAGE
    source: KubeconfigSource | None = None
    try:
        expect = expectations(load_spec(args.stack, args.config))
        source = kubeconfig_source(args.kubeconfig, args.stack)
        api = connect(source.path)
        api.list_nodes()  # reachable and authorized, or stop before anything runs
    except ConfigError as error:
        terminal.error(str(error))
        return CONFIG
    except OSError as error:
        terminal.error(terminal.os_error(error))
        return IO
    except KubeError as error:
        terminal.error(str(error))
        return IO
    finally:
        if source is not None and source.temporary:
            source.path.unlink(missing_ok=True)
    err.print(f"verifying cluster {expect.cluster} with the kubeconfig from {source.origin}")
    session = PodSession(api, new_run_id(), args.namespace)
    # a cancelled CI job cleans up like Ctrl-C (handlers can only be set from the main thread)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    try:
        results = run_checks(api, expect, checks, options, err.print, args.namespace, session)
    except KeyboardInterrupt:
        err.print(f"interrupted: the test pods of run {session.run_id} were deleted")
        return INTERRUPTED
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    if args.format == "json":
        doc = render.document(args.stack or str(args.config), expect.cluster, session.run_id, checks, results)
        print(json.dumps(doc, indent=2))
    else:
        render.table(results, terminal.console())
    return OK if render.passed(results) else FAILED
