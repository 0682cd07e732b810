"""The workload directory on Lustre: configured on `storage.lustre.workloadDirectories`, made at boot by every
Lustre client node (components.planning.lustre_directories) before its kubelet starts."""

from __future__ import annotations

import base64
import email
import email.message
import os
import stat
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components.config import LustreConfig
from components.errors import ConfigError
from components.planning.lustre_directories import (
    BOOT_MOUNT_POINT,
    WorkloadDirectory,
    workload_directories,
    workload_directory_script,
)
from components.planning.nodeadm import pool_user_data
from tests.builders import TRAINING_POOL, first_pool_plan, shipped_plan, stack_config

DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
TRAINING = WorkloadDirectory("training", 1000, 1000, "2770")


def user_data_parts(plan: dict[str, Any]) -> dict[str, list[str]]:
    """Each launch template's user data, split into its MIME parts, by resource name."""
    out = {}
    for r in plan["resources"]:
        if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate":
            message = email.message_from_string(base64.b64decode(r["inputs"]["userData"]).decode())
            parts = message.get_payload()
            assert isinstance(parts, list)
            out[r["name"]] = [str(part.get_payload()) for part in parts if isinstance(part, email.message.Message)]
    return out


# ------------------------------------------------------------------------------------------------------ config
def test_the_directory_defaults_to_uid_and_gid_1000_and_a_shared_group_mode() -> None:
    config = LustreConfig.model_validate({"kubernetes": {"namespace": "team-a"}})
    assert workload_directories(config) == [WorkloadDirectory("team-a", 1000, 1000, "2770")]
    assert workload_directories(config)[0].path == "/team-a"
    assert workload_directories(LustreConfig.model_validate({"workloadDirectories": {"enabled": False}})) == []


@pytest.mark.parametrize(
    ("directories", "problem"),
    [
        ({"uid": 0}, "storage.lustre.workloadDirectories.uid"),
        ({"gid": 0}, "storage.lustre.workloadDirectories.gid"),
        ({"mode": "rwx"}, "storage.lustre.workloadDirectories.mode"),
        ({"mode": "27700"}, "storage.lustre.workloadDirectories.mode"),
    ],
)
def test_root_ownership_and_modes_that_are_not_octal_are_refused(directories: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        stack_config(TRAINING_POOL, storage={"lustre": {"workloadDirectories": directories}}, validated=True)
    assert problem in str(raised.value)


# ------------------------------------------------------------------------------------------------ the script
def test_the_script_mounts_as_the_fsx_guide_does_and_unmounts() -> None:
    script = workload_directory_script(DNS, "abcdefgh", [TRAINING])
    assert f'mount -t lustre -o relatime,flock {DNS}@tcp:/abcdefgh "$mnt"' in script
    assert f"mnt={BOOT_MOUNT_POINT}" in script
    assert script.rstrip().endswith('umount "$mnt"\nexit $status')
    assert "chown -R" not in script and "chmod -R" not in script


def run_script(tmp_path: Path, chown_status: int = 0) -> subprocess.CompletedProcess[str]:
    """Run the script with `mount`, `umount`, `timeout` and `chown` stubbed (the "file system" is a directory)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls"
    stubs = {
        "mount": "exit 0",
        "umount": "exit 0",
        "mount.lustre": "exit 0",
        "timeout": 'shift; exec "$@"',
        "chown": f'echo "chown $*" >> {log}; exit {chown_status}',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    root = tmp_path / "fs"
    root.mkdir(exist_ok=True)
    script = workload_directory_script(DNS, "abcdefgh", [TRAINING], mount_point=str(root))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)


def test_the_script_makes_the_directory_with_its_owner_and_mode_once(tmp_path: Path) -> None:
    first = run_script(tmp_path)
    assert first.returncode == 0, first.stderr
    made = tmp_path / "fs" / "training"
    assert stat.S_IMODE(made.stat().st_mode) == 0o2770
    assert (tmp_path / "calls").read_text().split()[:2] == ["chown", "1000:1000"]
    assert sorted(p.name for p in (tmp_path / "fs").iterdir()) == ["training"]  # no temporary left

    (made / "checkpoint").write_text("x")
    made.chmod(0o755)
    (tmp_path / "calls").unlink()
    again = run_script(tmp_path)
    assert again.returncode == 0, again.stderr
    assert not (tmp_path / "calls").exists()  # an existing directory is never changed
    assert stat.S_IMODE(made.stat().st_mode) == 0o755
    assert (made / "checkpoint").read_text() == "x"


def test_a_squashed_root_leaves_no_half_made_directory_and_says_why(tmp_path: Path) -> None:
    result = run_script(tmp_path, chown_status=1)
    assert result.returncode == 1
    assert "cannot create /training (root squash?)" in result.stderr
    assert list((tmp_path / "fs").iterdir()) == []


# ----------------------------------------------------------------------------------------------- user data
def test_only_lustre_clients_run_the_script_after_their_other_parts() -> None:
    script = workload_directory_script(DNS, "abcdefgh", [TRAINING])
    client = first_pool_plan(TRAINING_POOL)
    parts = pool_user_data({"kind": "NodeConfig"}, replace(client, lustre_client="tcp"), script)
    assert parts.rstrip().count("Workload directories on FSx for Lustre") == 1
    assert "Workload directories" not in pool_user_data({"kind": "NodeConfig"}, client, script)
    assert pool_user_data({"kind": "NodeConfig"}, replace(client, lustre_client="tcp"), "") == pool_user_data(
        {"kind": "NodeConfig"}, replace(client, lustre_client="tcp")
    )


@pytest.mark.program
def test_the_shipped_training_stack_makes_the_training_directory_on_its_lustre_clients() -> None:
    plan = shipped_plan("training")
    parts = user_data_parts(plan)
    with_script = {name for name, p in parts.items() if any("Workload directories" in part for part in p)}
    clients = {
        r["name"]
        for r in plan["resources"]
        if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate" and "gpu-clusters/pool" in str(r["inputs"])
    }
    assert with_script and with_script < clients  # the system pool does not mount Lustre
    fs = next(r for r in plan["resources"] if r["type"] == "aws:fsx/lustreFileSystem:LustreFileSystem")
    for name in with_script:
        script = next(part for part in parts[name] if "Workload directories" in part)
        assert '[ ! -e "$mnt/training" ]' in script
        assert "chown 1000:1000" in script and "chmod 2770" in script
        template = next(
            r for r in plan["resources"] if r["name"] == name and r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"
        )
        assert fs["urn"] in template["propertyDependencies"]["userData"]
