"""`cluster.encryption.keyPerDomain`: one KMS key per data domain, each key's policy naming only its domain's
services, each consumer encrypting with its domain's key; off, the one cluster key of before."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from blueprint.plan.runner import ProgramRun, run_mocked
from components.config import StackConfig
from components.gpu_cluster import GpuCluster
from components.planning.cost import stack_cost
from components.planning.key_domains import KEY_DOMAINS, key_domains, key_of, served_domains
from components.planning.key_policy import cluster_key_policy, domain_key_policy
from components.planning.stack_plan import plan_stack
from components.validation import ConfigError
from tests.builders import (
    BUCKET,
    EFS,
    EKS_CLUSTER,
    INFERENCE_POOL,
    KMS_KEY,
    LAUNCH_TEMPLATE,
    LOG_GROUP,
    LUSTRE,
    ROLE_POLICY,
    SYSTEM_POOL,
    TRAINING_POOL,
    once_per_config,
    stack_config,
)

TODAY = dt.date(2026, 11, 26)
ACCOUNT, PARTITION, REGION, CLUSTER = "123456789012", "aws", "us-east-1", "demo"
AUTOSCALING = f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling_x"
ALIAS = "aws:kms/alias:Alias"
GRANT = "aws:kms/grant:Grant"
ROOT_ONLY = ["AccountAdministersKeyThroughIam"]
AUTOSCALING_SIDS = ["AutoScalingUsesKeyForEncryptedVolumes", "AutoScalingGrantsForAttachedVolumes"]
LOGS_SID = "CloudWatchLogsEncryptsTheClustersLogGroups"
LUSTRE_STORAGE = {"lustre": {"dataRepositories": [{"fileSystemPath": "/datasets", "prefix": "datasets"}]}}
STORAGE = {**LUSTRE_STORAGE, "nfs": {"kind": "efs"}}


def sids(policy: dict[str, Any]) -> list[str]:
    return [s["Sid"] for s in policy["Statement"]]


def policy_of(serves: frozenset[Any]) -> dict[str, Any]:
    return domain_key_policy(serves, ACCOUNT, PARTITION, REGION, CLUSTER, AUTOSCALING)


# ------------------------------------------------------------------------------------------------ pure planning
def test_one_key_unless_the_stack_asks_for_one_per_domain() -> None:
    assert key_domains(False, has_lustre=True, has_efs=True) == ("cluster",)
    assert key_domains(True, has_lustre=True, has_efs=True) == KEY_DOMAINS
    # No key for data the stack does not have.
    assert key_domains(True, has_lustre=False, has_efs=False) == ("cluster", "logs")
    assert key_domains(True, has_lustre=False, has_efs=True) == ("cluster", "logs", "inference-data")


def test_a_domain_without_its_own_key_uses_the_cluster_key() -> None:
    domains = key_domains(True, has_lustre=True, has_efs=False)
    assert key_of("training-data", domains) == "training-data"
    assert key_of("inference-data", domains) == "cluster"
    assert served_domains("cluster", domains) == {"cluster", "inference-data"}
    assert served_domains("cluster", ("cluster",)) == set(KEY_DOMAINS)


def test_the_one_cluster_key_keeps_every_statement_of_before() -> None:
    one = cluster_key_policy(ACCOUNT, PARTITION, REGION, CLUSTER, AUTOSCALING)
    assert sids(one) == [*ROOT_ONLY, *AUTOSCALING_SIDS, LOGS_SID]
    assert one == policy_of(frozenset(KEY_DOMAINS))


def test_only_the_cluster_key_names_the_auto_scaling_role() -> None:
    cluster = policy_of(frozenset({"cluster"}))
    assert sids(cluster) == [*ROOT_ONLY, *AUTOSCALING_SIDS]
    assert {s["Principal"]["AWS"] for s in cluster["Statement"][1:]} == {AUTOSCALING}
    assert cluster["Statement"][2]["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": True}}


def test_only_the_logs_key_lets_cloudwatch_logs_in_and_only_for_this_clusters_groups() -> None:
    logs = policy_of(frozenset({"logs"}))
    assert sids(logs) == [*ROOT_ONLY, LOGS_SID]
    statement = logs["Statement"][1]
    assert statement["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    assert statement["Condition"] == {
        "ArnEquals": {
            "kms:EncryptionContext:aws:logs:arn": [
                f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/eks/demo/cluster",
                f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/vpc/demo/flow-logs",
            ]
        }
    }


@pytest.mark.parametrize("domain", ["training-data", "inference-data"])
def test_the_data_keys_name_no_service_principal(domain: str) -> None:
    """FSx, EFS and S3 use the key as the principal that calls them, through the account's IAM statement."""
    policy = policy_of(frozenset({domain}))
    assert sids(policy) == ROOT_ONLY
    assert policy["Statement"][0]["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}


# ------------------------------------------------------------------------------------------ registered resources
def spec(key_per_domain: bool, storage: dict[str, Any] = STORAGE) -> StackConfig:
    return stack_config(
        SYSTEM_POOL,
        TRAINING_POOL,
        INFERENCE_POOL,
        cluster={"encryption": {"keyPerDomain": key_per_domain}},
        storage=storage,
    )


@once_per_config
def build(config: StackConfig) -> ProgramRun:
    return run_mocked(lambda: GpuCluster("demo", stack_plan=plan_stack(config), stack="test"))


def key_arns(run: ProgramRun) -> dict[str, str]:
    """Each registered key's ARN by its alias (`alias/demo-<domain>`), as the mocks shape it."""
    ids = {key.id: key.name for key in run.of_type(KMS_KEY)}
    by_name = {
        ids[alias.inputs["targetKeyId"]]: alias.inputs["name"]
        for alias in run.of_type(ALIAS)
        if alias.inputs.get("targetKeyId") in ids
    }
    return {
        by_name[key.name].removeprefix("alias/demo-"): f"arn:aws:kms:us-east-1:{ACCOUNT}:key/{key.id}"
        for key in run.of_type(KMS_KEY)
        if key.name in by_name
    }


def key_policy(run: ProgramRun, name: str) -> dict[str, Any]:
    return json.loads(run.one(KMS_KEY, name).inputs["policy"])


@pytest.mark.program
def test_per_domain_registers_one_protected_rotating_key_per_domain() -> None:
    run = build(spec(True))
    keys = {k.name: k for k in run.of_type(KMS_KEY) if k.name != "demo-alerts"}
    assert sorted(keys) == ["demo-eks", "demo-inference-data-key", "demo-logs-key", "demo-training-data-key"]
    for key in keys.values():
        assert key.inputs["enableKeyRotation"] is True
        assert key.inputs["deletionWindowInDays"] == 30
        assert key.protect is True
        assert key.retain_on_delete is True
    assert sorted(key_arns(run)) == ["eks", "inference-data", "logs", "training-data"]


@pytest.mark.program
def test_unprotected_stacks_may_delete_every_domain_key() -> None:
    config = stack_config(SYSTEM_POOL, cluster={"encryption": {"keyPerDomain": True}, "protectStateful": False})
    for key in build(config).of_type(KMS_KEY):
        assert (key.protect, key.retain_on_delete) == (False, False)


@pytest.mark.program
def test_each_registered_key_policy_names_only_its_domains_services() -> None:
    run = build(spec(True))
    assert sids(key_policy(run, "demo-eks")) == [*ROOT_ONLY, *AUTOSCALING_SIDS]
    assert sids(key_policy(run, "demo-logs-key")) == [*ROOT_ONLY, LOGS_SID]
    assert sids(key_policy(run, "demo-training-data-key")) == ROOT_ONLY
    assert sids(key_policy(run, "demo-inference-data-key")) == ROOT_ONLY


@pytest.mark.program
def test_each_consumer_encrypts_with_its_domains_key() -> None:
    run = build(spec(True))
    arns = key_arns(run)
    cluster, logs, training, inference = arns["eks"], arns["logs"], arns["training-data"], arns["inference-data"]
    assert run.one(EKS_CLUSTER).inputs["encryptionConfig"]["provider"]["keyArn"] == cluster
    for template in run.of_type(LAUNCH_TEMPLATE):
        for mapping in template.inputs["blockDeviceMappings"]:
            assert mapping["ebs"]["kmsKeyId"] == cluster
    ebs_csi = [p for p in run.of_type(ROLE_POLICY) if "ebs-csi" in p.name]
    assert ebs_csi and all(
        s["Resource"] == cluster for p in ebs_csi for s in json.loads(p.inputs["policy"])["Statement"]
    )
    assert {g.inputs["name"]: g.inputs["kmsKeyId"] for g in run.of_type(LOG_GROUP) if "demo" in g.inputs["name"]} == {
        "/aws/eks/demo/cluster": logs,
        "/aws/vpc/demo/flow-logs": logs,
    }
    assert run.one(LUSTRE).inputs["kmsKeyId"] == training
    sse = run.one("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] == training
    assert run.one(GRANT).inputs["keyId"] == training
    assert run.one(EFS).inputs["kmsKeyId"] == inference
    assert run.of_type(BUCKET)  # the data bucket exists, encrypted above


@pytest.mark.program
def test_one_key_encrypts_every_domain_when_the_option_is_off() -> None:
    run = build(spec(False))
    (key,) = [k for k in run.of_type(KMS_KEY) if k.name != "demo-alerts"]
    assert key.name == "demo-eks"
    arn = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/{key.id}"
    assert sids(json.loads(key.inputs["policy"])) == [*ROOT_ONLY, *AUTOSCALING_SIDS, LOGS_SID]
    assert run.one(LUSTRE).inputs["kmsKeyId"] == arn
    assert run.one(EFS).inputs["kmsKeyId"] == arn
    assert run.one(LOG_GROUP, "demo-control-plane").inputs["kmsKeyId"] == arn


def kms_keys(config: StackConfig) -> str:
    (item,) = [i for i in stack_cost(plan_stack(config), TODAY).items if i.kind == "kms-keys"]
    return item.detail


def test_the_cost_counts_every_key_at_the_catalogs_price() -> None:
    """$1/month a key ([KMSPRICE]); the alerts topic's key is not configured here."""
    assert kms_keys(spec(False)).startswith("1 x KMS key at $1/month")
    assert kms_keys(spec(True)).startswith("4 x KMS key at $1/month")
    assert kms_keys(spec(True, storage=LUSTRE_STORAGE)).startswith("3 x KMS key at $1/month")


# ------------------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("encryption", "path"),
    [
        ({"keyPerDomain": "yes"}, "cluster.encryption.keyPerDomain"),
        ({"keyPerDomain": 1}, "cluster.encryption.keyPerDomain"),
        ({"keysPerDomain": True}, "cluster.encryption.keysPerDomain"),
    ],
)
def test_a_bad_value_is_refused_with_its_key_path(encryption: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        stack_config(SYSTEM_POOL, cluster={"encryption": encryption}, validated=True)
    assert path in str(caught.value)
