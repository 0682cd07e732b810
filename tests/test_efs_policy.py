"""The EFS file system policy (components/planning/efs_policy.py), without mocks: who may do what, judged per
request the way IAM evaluates a resource policy (an explicit deny wins; otherwise an allow must match)."""

from __future__ import annotations

import fnmatch

import pytest

from components.planning.efs_policy import efs_file_system_policy

ARN = "arn:aws:elasticfilesystem:us-east-1:123456789012:file-system/fs-0123456789abcdef0"


def allowed(action: str, context: dict[str, str]) -> bool:
    """Whether the policy admits `action` for a request with these condition values (only `Bool` is used)."""
    verdict = False
    for statement in efs_file_system_policy(ARN)["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if not any(fnmatch.fnmatchcase(action, pattern) for pattern in actions):
            continue
        conditions = statement.get("Condition", {}).get("Bool", {})
        if all(context.get(key) == value for key, value in conditions.items()):
            if statement["Effect"] == "Deny":
                return False
            verdict = True
    return verdict


TLS_THROUGH_MOUNT_TARGET = {"aws:SecureTransport": "true", "elasticfilesystem:AccessedViaMountTarget": "true"}


@pytest.mark.parametrize("action", ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"])
def test_a_tls_mount_through_a_mount_target_may_mount_and_write(action: str) -> None:
    assert allowed(action, TLS_THROUGH_MOUNT_TARGET)


def test_no_client_is_root() -> None:
    assert not allowed("elasticfilesystem:ClientRootAccess", TLS_THROUGH_MOUNT_TARGET)


def test_plain_nfs_is_refused_even_through_a_mount_target() -> None:
    plain = {**TLS_THROUGH_MOUNT_TARGET, "aws:SecureTransport": "false"}
    assert not allowed("elasticfilesystem:ClientMount", plain)


def test_a_mount_not_through_a_mount_target_is_refused() -> None:
    elsewhere = {**TLS_THROUGH_MOUNT_TARGET, "elasticfilesystem:AccessedViaMountTarget": "false"}
    assert not allowed("elasticfilesystem:ClientMount", elsewhere)


def test_every_statement_is_on_this_file_system_and_every_allow_has_a_condition() -> None:
    statements = efs_file_system_policy(ARN)["Statement"]
    assert {s["Resource"] for s in statements} == {ARN}
    assert all(s.get("Condition") for s in statements if s["Effect"] == "Allow")
