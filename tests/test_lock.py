"""The locks pin every dependency `pyproject.toml` asks for, inside its range, with hashes and no index address; the
virtualenv under test is the one the dev lock describes (README "Set-up and tests")."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RUNTIME_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"
TRAIN_LOCK = ROOT / "requirements-train.lock"
#: Where CI runs the training tests and where the CPU wheel of torch exists: CPython 3.11 on Linux x86_64.
CI_PLATFORM = {
    "python_version": "3.11",
    "python_full_version": "3.11.7",
    "platform_machine": "x86_64",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_python_implementation": "CPython",
    "implementation_name": "cpython",
    "os_name": "posix",
}
_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)(?:\s*;\s*(?P<marker>[^\\]+?))?\s*\\?$"
)


@dataclass
class Pin:
    version: str
    marker: str | None
    hashes: int = 0

    def applies(self, environment: dict[str, str] | None = None) -> bool:
        """Whether this pin is the one for this interpreter and platform, or for `environment` (universal locks
        split by marker)."""
        marker = Requirement(f"x; {self.marker}").marker if self.marker else None
        return marker is None or marker.evaluate(environment)


def pins(lock: Path) -> dict[str, list[Pin]]:
    """name -> its pins (one per marker), from a lock's `name==version [; marker] \\` blocks and their hashes."""
    found: dict[str, list[Pin]] = {}
    current: Pin | None = None
    for line in lock.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            current = Pin(match["version"], match["marker"])
            found.setdefault(canonicalize_name(match["name"]), []).append(current)
        elif line.strip().startswith("--hash=sha256:") and current is not None:
            current.hashes += 1
    return found


def requirements(*groups: list[str]) -> list[Requirement]:
    return [Requirement(text) for group in groups for text in group]


RUNTIME = requirements(PYPROJECT["project"]["dependencies"], PYPROJECT["build-system"]["requires"])
DEV = RUNTIME + requirements(PYPROJECT["project"]["optional-dependencies"]["dev"])
TRAIN = requirements(PYPROJECT["project"]["optional-dependencies"]["train"])


@pytest.mark.parametrize(
    ("lock", "wanted"), [(RUNTIME_LOCK, RUNTIME), (DEV_LOCK, DEV), (TRAIN_LOCK, TRAIN)], ids=["runtime", "dev", "train"]
)
def test_every_requirement_is_pinned_inside_its_range(lock: Path, wanted: list[Requirement]) -> None:
    pinned = pins(lock)
    problems = []
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        if name not in pinned:
            problems.append(f"{requirement} is not in {lock.name}")
        else:
            problems += [
                f"{lock.name} pins {name}=={pin.version}, outside {requirement}"
                for pin in pinned[name]
                if not requirement.specifier.contains(pin.version, prereleases=True)
            ]
    assert not problems, "\n".join(problems) + "\nrun .ci/lock to regenerate the locks from pyproject.toml"


@pytest.mark.parametrize("lock", [RUNTIME_LOCK, DEV_LOCK, TRAIN_LOCK], ids=["runtime", "dev", "train"])
def test_every_pin_carries_hashes_and_no_index_address(lock: Path) -> None:
    text = lock.read_text()
    assert all(pin.hashes > 0 for found in pins(lock).values() for pin in found)
    assert not re.search(r"://|--(extra-)?index-url|--find-links|--trusted-host", text)


def test_the_dev_lock_runs_on_the_runtime_lock_s_versions() -> None:
    runtime, dev = pins(RUNTIME_LOCK), pins(DEV_LOCK)
    assert {name: dev[name] for name in runtime} == runtime


def test_the_train_lock_runs_on_the_dev_lock_s_versions() -> None:
    dev, train = pins(DEV_LOCK), pins(TRAIN_LOCK)
    assert {name: train[name] for name in dev if name in train} == {name: dev[name] for name in train if name in dev}


def test_ci_installs_torch_s_cpu_build_alone() -> None:
    """On CI's platform the train lock pins torch's CPU build (a wheel of some 190 MB), not the index's CUDA build
    with its GBs of nvidia-* and triton wheels; elsewhere it keeps the index's builds (uv's universal resolution)."""
    applying = {
        name: pin.version for name, found in pins(TRAIN_LOCK).items() for pin in found if pin.applies(CI_PLATFORM)
    }
    assert applying["torch"].endswith("+cpu")
    assert not [name for name in applying if name.startswith("nvidia-") or name in ("triton", "cuda-toolkit")]


def installed_differences(lock: Path) -> list[str]:
    differ = []
    for name, found in pins(lock).items():
        for pin in filter(Pin.applies, found):
            try:
                installed = metadata.version(name)
            except metadata.PackageNotFoundError:
                installed = "not installed"
            if installed != pin.version:
                differ.append(f"{name}: lock {pin.version}, installed {installed}")
    return differ


def test_the_virtualenv_is_the_dev_lock() -> None:
    """What runs these tests is what the README's set-up installs; reinstall (README) when this fails."""
    differ = installed_differences(DEV_LOCK)
    assert not differ, "\n".join(differ)


@pytest.mark.training  # CI's `training` step, where torch is required: the README's set-up installs the train lock
def test_the_virtualenv_has_the_train_lock() -> None:
    differ = installed_differences(TRAIN_LOCK)
    assert not differ, "\n".join(differ)


def test_the_program_and_the_policy_pack_install_the_runtime_lock() -> None:
    """`pulumi install` reads requirements.txt for the program (Pulumi.yaml: toolchain pip) and the pack."""
    installs = [("requirements.txt", "requirements.lock"), ("policies/requirements.txt", "../requirements.lock")]
    for requirements_txt, lock in installs:
        lines = [line.strip() for line in (ROOT / requirements_txt).read_text().splitlines()]
        assert [line for line in lines if line and not line.startswith("#")] == [f"-r {lock}"], requirements_txt
    assert "pulumi-policy" in pins(RUNTIME_LOCK)
