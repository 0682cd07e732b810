"""The security rules: each passes its compliant fixture (from `tests.policies.stacks`) and reports its failing one
with the exact message; exceptions by tag; and the three shipped stacks break none of them."""

from __future__ import annotations

import base64
import copy
import gzip
import json
from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from blueprint.plan.check import check as check_plan
from tests.builders import (
    EKS_CLUSTER,
    IAM_ROLE,
    KMS_KEY,
    LAUNCH_TEMPLATE,
    LOG_GROUP,
    ROLE_POLICY,
    ROLE_POLICY_ATTACHMENT,
    SECURITY_GROUP,
    SG_INGRESS_RULE,
)
from tests.policies import resource_args, validate, validate_stack
from tests.policies.stacks import ACCOUNT, Record, find, good_stack, policy_json, record, user_data, without

LT = LAUNCH_TEMPLATE
ROLE = IAM_ROLE
SG = SECURITY_GROUP
INGRESS = SG_INGRESS_RULE
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
KEY = KMS_KEY
QUEUE = "aws:sqs/queue:Queue"
TOPIC = "aws:sns/topic:Topic"

#: Every policy this family adds; the shipped stacks must report none of them.
SECURITY_POLICIES = [
    "iam-no-unscoped-create-delete",
    "iam-trust-source-conditions",
    "vpc-flow-logs",
    "default-security-group-closed",
    "imds-hop-limit-justified",
    "kms-key-rotation",
    "sqs-queue-encrypted",
    "sns-topic-encrypted",
    "log-group-encrypted",
    "log-group-retention",
    "eks-log-group-declared",
    "eks-endpoint-private",
    "no-world-admin-ports",
    "no-secrets-in-user-data",
    "policy-exceptions",
    "no-public-ingress-combined",
    "iam-no-escalation-on-any-resource",
    "iam-cross-account-external-id",
    "resource-policy-no-open-principal",
    "s3-tls-only",
    "k8s-service-exposure",
    "k8s-pod-host-access",
    "k8s-namespace-pod-security",
]


def inputs(name: str) -> dict[str, Any]:
    return copy.deepcopy(find(good_stack(), name)["inputs"])


def check(policy: str, type_: str, props: dict[str, Any], **kw: Any) -> list[str]:
    return validate(policy, resource_args(type_, props, name=kw.pop("name", "r"), **kw))


def changed(change: Any) -> list[Record]:
    records = good_stack()
    change(records)
    return records


# -------------------------------------------------------------------------------------------------- IAM scope
def test_unscoped_create_delete_is_reported_on_the_role() -> None:
    assert validate_stack("iam-no-unscoped-create-delete", good_stack()) == []

    def unscoped(records: list[Record]) -> None:
        policy = next(r for r in records if r["type"] == ROLE_POLICY)
        policy["inputs"]["policy"] = policy_json(
            {
                "Effect": "Allow",
                "Action": ["ec2:DescribeInstances", "ec2:CreateVolume", "ec2:*Instances"],
                "Resource": "*",
            }
        )

    assert validate_stack("iam-no-unscoped-create-delete", changed(unscoped)) == [
        (
            "good-cluster-autoscaler",
            "role 'good-cluster-autoscaler' (inline policy 'good-cluster-autoscaler') allows ec2:CreateVolume, "
            'ec2:*Instances on every resource ("*") with no condition that scopes it: name the resources\' ARNs or '
            "add an aws:ResourceTag/aws:RequestTag condition for the cluster's tag",
        )
    ]


@pytest.mark.parametrize(
    "statement, grant",
    [
        ({"Effect": "Allow", "Action": "*", "Resource": "*"}, 'every action ("*", full administrator)'),
        ({"Effect": "Allow", "Action": "s3:*", "Resource": ["*"]}, "s3:*"),
        ({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}, "every action except iam:*"),
        ({"Effect": "Allow", "Action": "ec2:TerminateInstances", "NotResource": "arn:aws:ec2:*:*:vpc/*"}, None),
    ],
)
def test_managed_policies_and_full_admin_are_judged_too(statement: dict[str, Any], grant: str | None) -> None:
    def add(records: list[Record]) -> None:
        records.append(record("aws:iam/policy:Policy", "good-extra", {"policy": policy_json(statement)}))

    found = validate_stack("iam-no-unscoped-create-delete", changed(add))
    expected = grant or "ec2:TerminateInstances"
    assert [(name, message.split(" on every resource")[0]) for name, message in found] == [
        ("good-extra", f"managed policy 'good-extra' allows {expected}")
    ]


@pytest.mark.parametrize(
    "condition",
    [
        {"StringEquals": {"aws:RequestTag/gpu-clusters/cluster": "good"}},
        {"StringEquals": {"ec2:ResourceTag/gpu-clusters/cluster": "good"}},
        {"StringEquals": {"ssm:resourceTag/EKSClusterARN": "arn"}},
        {"StringEquals": {"ec2:CreateAction": ["CreateVolume"]}},
    ],
)
def test_tag_and_service_scoping_conditions_make_create_delete_acceptable(condition: dict[str, Any]) -> None:
    statement = {"Effect": "Allow", "Action": ["ec2:CreateTags", "ec2:DeleteVolume"], "Resource": "*"}

    def add(records: list[Record]) -> None:
        records.append(
            record(
                "aws:iam/policy:Policy", "good-extra", {"policy": policy_json({**statement, "Condition": condition})}
            )
        )

    assert validate_stack("iam-no-unscoped-create-delete", changed(add)) == []
    unrelated = {"Bool": {"aws:SecureTransport": "true"}}

    def add_unscoped(records: list[Record]) -> None:
        records.append(
            record(
                "aws:iam/policy:Policy", "good-extra", {"policy": policy_json({**statement, "Condition": unrelated})}
            )
        )

    assert len(validate_stack("iam-no-unscoped-create-delete", changed(add_unscoped))) == 1


def test_role_inline_policies_are_judged_and_unknown_documents_end_in_a_preview_note() -> None:
    def inline_and_unknown(records: list[Record]) -> None:
        statement = {"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "*"}
        node_role = next(r for r in records if r["type"] == ROLE and r["name"] == "good-node")
        node_role["inputs"]["inlinePolicies"] = [{"name": "launch", "policy": policy_json(statement)}]
        records.append(record("aws:iam/policy:Policy", "good-later", {"policy": UNKNOWN_STRING_VALUE}))

    found = [v for v in check_plan(changed(inline_and_unknown)) if v["policy"] == "iam-no-unscoped-create-delete"]
    assert [(v["level"], v["resource"]) for v in found] == [("mandatory", "good-node"), ("advisory", "")]
    assert found[0]["message"].startswith("role 'good-node' (inline policies) allows ec2:RunInstances on every")
    assert found[1]["message"].startswith("can't run policy 'iam-no-unscoped-create-delete' during preview")


def test_broad_aws_managed_policies_are_reported_on_their_role() -> None:
    def attach(arn: str) -> list[Record]:
        def change(records: list[Record]) -> None:
            role = find(records, "good-cluster-autoscaler")
            inputs = {"role": "good-cluster-autoscaler", "policyArn": arn}
            attachment = ROLE_POLICY_ATTACHMENT
            records.append(record(attachment, "good-ca-attach", inputs, refs={"role": [role]}))

        return changed(change)

    assert validate_stack("iam-no-unscoped-create-delete", attach("arn:aws:iam::aws:policy/AmazonFSxFullAccess")) == [
        (
            "good-cluster-autoscaler",
            "role 'good-cluster-autoscaler' has the AWS-managed policy AmazonFSxFullAccess attached, which allows "
            "create/delete on every resource it covers: attach a policy of the stack scoped by ARN or tag instead",
        )
    ]
    admin = attach("arn:aws:iam::aws:policy/AdministratorAccess")
    assert [name for name, _ in validate_stack("iam-no-unscoped-create-delete", admin)] == ["good-cluster-autoscaler"]
    scoped = attach("arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy")
    assert validate_stack("iam-no-unscoped-create-delete", scoped) == []


def test_read_only_actions_and_named_resources_pass() -> None:
    document = policy_json(
        {"Effect": "Allow", "Action": ["ec2:Describe*", "autoscaling:DescribeTags"], "Resource": "*"},
        {"Effect": "Allow", "Action": "sqs:DeleteMessage", "Resource": "arn:aws:sqs:us-east-1:1:q"},
        {"Effect": "Deny", "Action": "*", "Resource": "*"},
    )

    def add(records: list[Record]) -> None:
        records.append(record("aws:iam/policy:Policy", "good-extra", {"policy": document}))

    assert validate_stack("iam-no-unscoped-create-delete", changed(add)) == []


# ------------------------------------------------------------------------------------------------ IAM trust
def test_trust_policies_with_source_conditions_and_exempt_services_pass() -> None:
    assert check("iam-trust-source-conditions", ROLE, inputs("good-cluster-autoscaler")) == []
    node_role = next(r for r in good_stack() if r["type"] == ROLE and r["name"] == "good-node")
    assert check("iam-trust-source-conditions", ROLE, node_role["inputs"]) == []  # ec2.amazonaws.com
    ssm = policy_json(
        {
            "Effect": "Allow",
            "Principal": {"Service": "ssm.amazonaws.com"},
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": ACCOUNT}},
        }
    )
    assert check("iam-trust-source-conditions", ROLE, {"assumeRolePolicy": ssm}) == []


def test_service_trust_without_source_condition_is_reported() -> None:
    bare = policy_json(
        {
            "Effect": "Allow",
            "Principal": {"Service": ["ssm.amazonaws.com", "eks.amazonaws.com"]},
            "Action": "sts:AssumeRole",
        }
    )
    assert check("iam-trust-source-conditions", ROLE, {"assumeRolePolicy": bare}, name="hybrid") == [
        "role 'hybrid' trusts ssm.amazonaws.com without a source condition: add aws:SourceAccount (this account) "
        "and aws:SourceArn (the resources of this service that may assume it)"
    ]
    pods = json.loads(inputs("good-cluster-autoscaler")["assumeRolePolicy"])
    pods["Statement"][0]["Condition"] = {
        "StringEquals": {"aws:RequestTag/kubernetes-namespace": "kube-system"}  # no cluster, no account
    }
    [message] = check("iam-trust-source-conditions", ROLE, {"assumeRolePolicy": json.dumps(pods)}, name="ca")
    assert message.startswith("role 'ca' trusts pods.eks.amazonaws.com without a source condition")


def test_web_identity_and_world_trust_need_their_conditions() -> None:
    provider = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC"
    statement = {"Effect": "Allow", "Principal": {"Federated": provider}, "Action": "sts:AssumeRoleWithWebIdentity"}
    only_aud = {**statement, "Condition": {"StringEquals": {"oidc.eks.us-east-1.amazonaws.com/id/ABC:aud": "sts"}}}
    assert check("iam-trust-source-conditions", ROLE, {"assumeRolePolicy": policy_json(only_aud)}, name="w") == [
        f"role 'w' trusts web identities of {provider} without conditions on their :sub claims (the audience and "
        "the subject, e.g. the service account)"
    ]
    both = {
        **statement,
        "Condition": {
            "StringEquals": {
                "oidc.eks.us-east-1.amazonaws.com/id/ABC:aud": "sts.amazonaws.com",
                "oidc.eks.us-east-1.amazonaws.com/id/ABC:sub": "system:serviceaccount:kube-system:x",
            }
        },
    }
    assert check("iam-trust-source-conditions", ROLE, {"assumeRolePolicy": policy_json(both)}) == []
    world = policy_json({"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"})
    assert check("iam-trust-source-conditions", ROLE, {"assumeRolePolicy": world}, name="w") == [
        "role 'w' trusts every AWS principal (\"*\") without an aws:PrincipalOrgID or aws:PrincipalAccount condition"
    ]


# ------------------------------------------------------------------------------------- flow logs, default SG
def test_vpc_flow_logs() -> None:
    assert validate_stack("vpc-flow-logs", good_stack()) == []
    assert validate_stack("vpc-flow-logs", without(good_stack(), "good-vpc-flow-log")) == [
        (
            "good-vpc",
            "VPC 'good-vpc' has no flow log: add an aws.ec2.FlowLog with vpc_id and traffic_type ALL (FSBP EC2.6)",
        )
    ]

    def accepted_only(records: list[Record]) -> None:
        find(records, "good-vpc-flow-log")["inputs"]["trafficType"] = "ACCEPT"

    assert validate_stack("vpc-flow-logs", changed(accepted_only)) == [
        ("good-vpc", "VPC 'good-vpc' has flow logs of ACCEPT traffic only: record ALL or REJECT (FSBP EC2.6)")
    ]


def test_default_security_group_closed() -> None:
    assert validate_stack("default-security-group-closed", good_stack()) == []
    assert validate_stack("default-security-group-closed", without(good_stack(), "good-default")) == [
        (
            "good-vpc",
            "VPC 'good-vpc' leaves its default security group's allow rules in place: adopt it with "
            "aws.ec2.DefaultSecurityGroup(vpc_id=...) and no ingress or egress (FSBP EC2.2)",
        )
    ]

    def with_rules(records: list[Record]) -> None:
        find(records, "good-default")["inputs"]["egress"] = [
            {"protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": ["0.0.0.0/0"]}
        ]

    assert validate_stack("default-security-group-closed", changed(with_rules)) == [
        ("good-default", "default security group 'good-default' has egress rules: declare none (FSBP EC2.2)")
    ]

    def separate_rule(records: list[Record]) -> None:
        group = find(records, "good-default")
        records.append(
            record(INGRESS, "good-default-in", {"securityGroupId": "sg-0default"}, refs={"securityGroupId": [group]})
        )

    assert validate_stack("default-security-group-closed", changed(separate_rule)) == [
        ("good-default-in", "rule 'good-default-in' adds a rule to default security group 'good-default' (FSBP EC2.2)")
    ]


# ------------------------------------------------------------------------------------------- admin ports
@pytest.mark.parametrize(
    "type_, props, expected",
    [
        (
            SG,
            {"ingress": [{"protocol": "tcp", "fromPort": 0, "toPort": 65535, "cidrBlocks": ["0.0.0.0/0"]}]},
            ["'g' admits port 22 from 0.0.0.0/0 (tcp 0-65535)", "'g' admits port 3389 from 0.0.0.0/0 (tcp 0-65535)"],
        ),
        (
            INGRESS,
            {"ipProtocol": "tcp", "fromPort": 3389, "toPort": 3389, "cidrIpv6": "::/0"},
            ["'g' admits port 3389 from ::/0 (tcp 3389-3389)"],
        ),
        (
            SG_RULE,
            {"type": "ingress", "protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": ["0.0.0.0/0"]},
            ["'g' admits port 22 from 0.0.0.0/0 (all ports)", "'g' admits port 3389 from 0.0.0.0/0 (all ports)"],
        ),
    ],
)
def test_world_open_admin_ports(type_: str, props: dict[str, Any], expected: list[str]) -> None:
    assert check("no-world-admin-ports", type_, props, name="g") == expected


def test_admin_ports_from_a_private_range_or_other_ports_from_the_world_pass() -> None:
    private = {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["10.0.0.0/8"]}]}
    https = {"ingress": [{"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["0.0.0.0/0"]}]}
    udp = {"ingress": [{"protocol": "udp", "fromPort": 0, "toPort": 65535, "cidrBlocks": ["0.0.0.0/0"]}]}
    for props in (private, https, udp, inputs("good-node")):
        assert check("no-world-admin-ports", SG, props) == []


# ------------------------------------------------------------------------------------------- IMDS hop limit
def test_hop_limit_above_one_needs_a_reason_tag() -> None:
    assert check("imds-hop-limit-justified", LT, inputs("good-train-lt")) == []
    props = inputs("good-train-lt")
    props["metadataOptions"]["httpPutResponseHopLimit"] = 2
    assert check("imds-hop-limit-justified", LT, props, name="lt") == [
        "launch template 'lt' lets pods reach the node's credentials (IMDS hop limit 2): set "
        "metadataOptions.httpPutResponseHopLimit to 1, or tag it gpu-clusters/imds-hop-limit-reason=<why pods "
        "need IMDS>"
    ]
    props["tags"]["gpu-clusters/imds-hop-limit-reason"] = "   "
    assert len(check("imds-hop-limit-justified", LT, props)) == 1
    props["tags"]["gpu-clusters/imds-hop-limit-reason"] = "the DCGM exporter reads the instance id from IMDS"
    assert check("imds-hop-limit-justified", LT, props) == []
    del props["tags"]["gpu-clusters/imds-hop-limit-reason"]
    reason = {"gpu-clusters/imds-hop-limit-reason": "agents without host networking"}
    assert check("imds-hop-limit-justified", LT, props, provider_default_tags=reason) == []


# --------------------------------------------------------------------------------------- keys, queues, topics, logs
def test_kms_key_rotation() -> None:
    assert check("kms-key-rotation", KEY, inputs("good-key")) == []
    assert check("kms-key-rotation", KEY, {"enableKeyRotation": False}, name="k") == [
        "KMS key 'k' does not rotate its key material: set enableKeyRotation (CIS KMS.4)"
    ]
    assert check("kms-key-rotation", KEY, {"customerMasterKeySpec": "RSA_2048"}) == []  # asymmetric: cannot rotate


def test_sqs_queue_encrypted() -> None:
    assert check("sqs-queue-encrypted", QUEUE, inputs("good-interruptions")) == []
    assert check("sqs-queue-encrypted", QUEUE, {"kmsMasterKeyId": "alias/cluster"}) == []
    assert check("sqs-queue-encrypted", QUEUE, {"sqsManagedSseEnabled": False}, name="q") == [
        "SQS queue 'q' is not encrypted at rest: set sqsManagedSseEnabled or kmsMasterKeyId (FSBP SQS.1)"
    ]


def test_sns_topic_encrypted() -> None:
    assert check("sns-topic-encrypted", TOPIC, inputs("good-alerts")) == []
    assert check("sns-topic-encrypted", TOPIC, {}, name="t") == [
        "SNS topic 't' is not encrypted at rest: set kmsMasterKeyId to a KMS key of the stack"
    ]


def test_log_groups_encrypted_and_expiring() -> None:
    good = inputs("good-flow-logs")
    assert check("log-group-encrypted", LOG_GROUP, good) == []
    assert check("log-group-retention", LOG_GROUP, good) == []
    assert check("log-group-encrypted", LOG_GROUP, {"retentionInDays": 365}, name="lg") == [
        "log group 'lg' is not encrypted with a KMS key of the stack: set kmsKeyId"
    ]
    assert check("log-group-retention", LOG_GROUP, {"retentionInDays": 0}, name="lg") == [
        "log group 'lg' keeps its logs forever: set retentionInDays (at least 365 days)"
    ]
    assert check("log-group-retention", LOG_GROUP, {"retentionInDays": 30}, name="lg") == [
        "log group 'lg' keeps its logs 30 days; at least 365 are required"
    ]
    assert check("log-group-retention", LOG_GROUP, {"retentionInDays": 30}, config={"minRetentionDays": 30}) == []


def test_the_control_plane_log_group_is_declared_by_the_stack() -> None:
    assert validate_stack("eks-log-group-declared", good_stack()) == []
    assert validate_stack("eks-log-group-declared", without(good_stack(), "good-control-plane")) == [
        (
            "good",
            "EKS cluster 'good' ships control-plane logs to /aws/eks/good/cluster, which the stack does not declare, "
            "so EKS creates it without retention or KMS key: declare that aws.cloudwatch.LogGroup (retentionInDays, "
            "kmsKeyId) before the cluster",
        )
    ]

    def no_logs(records: list[Record]) -> None:
        records[:] = without(records, "good-control-plane")
        next(r for r in records if r["type"] == EKS_CLUSTER)["inputs"]["enabledClusterLogTypes"] = []

    assert validate_stack("eks-log-group-declared", changed(no_logs)) == []


# ------------------------------------------------------------------------------------------ secrets in user data
def with_user_data(text: str) -> dict[str, Any]:
    props = inputs("good-train-lt")
    props["userData"] = text
    return props


def test_user_data_without_secrets_passes() -> None:
    """The certificate authority (base64 PEM of a certificate) and shell variables are not secrets."""
    script = user_data('TOKEN="$(cat /run/token)"', "password: ${DB_PASSWORD}")
    assert check("no-secrets-in-user-data", LT, with_user_data(script)) == []


@pytest.mark.parametrize(
    "line, kind",
    [
        ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "an AWS secret access key"),
        ("-----BEGIN RSA PRIVATE KEY-----", "a private key"),
        ("      activationCode: Zm9vYmFyYmF6cXV1eA", "an SSM activation code"),
        ("kubeadm join --token abcdef.0123456789abcdef", "a Kubernetes bootstrap token"),
        ("git clone https://ghp_" + "a" * 36 + "@github.com/org/repo", "a GitHub token"),
        ("DB_PASSWORD=hunter2hunter2", "a password or token"),
    ],
)
def test_secrets_in_user_data_are_reported_without_their_value(line: str, kind: str) -> None:
    [message] = check("no-secrets-in-user-data", LT, with_user_data(user_data(line)), name="lt")
    assert message == (
        f"launch template 'lt' user data holds what looks like {kind} (part 2, line 2): fetch it at boot from "
        "Secrets Manager or SSM Parameter Store instead"
    )
    assert line.split()[-1][-8:] not in message


def test_secrets_are_found_through_gzip_and_base64_layers() -> None:
    key = base64.b64encode(b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n").decode()
    gzipped = base64.b64encode(gzip.compress(f"#!/bin/bash\necho {key} > /root/.ssh/id\n".encode())).decode()
    assert check("no-secrets-in-user-data", LT, with_user_data(gzipped), name="lt") == [
        "launch template 'lt' user data holds what looks like a base64-encoded private key (part 1, line 2): fetch "
        "it at boot from Secrets Manager or SSM Parameter Store instead"
    ]


# ---------------------------------------------------------------------------------------------- exceptions
def test_an_exception_tag_with_a_reason_waives_a_rule_outside_security_and_is_reported() -> None:
    reason = "central log archive re-encrypts with its own key"

    def waived(records: list[Record]) -> None:
        group = find(records, "good-flow-logs")
        del group["inputs"]["kmsKeyId"]
        group["inputs"]["tags"]["policy-exception/log-group-encrypted"] = reason

    assert validate_stack("policy-exceptions", changed(waived)) == [
        ("good-flow-logs", f"policy 'log-group-encrypted' is waived for 'good-flow-logs': {reason}")
    ]
    props = inputs("good-flow-logs")
    del props["kmsKeyId"]
    assert check("log-group-encrypted", LOG_GROUP, props) == [
        "log group 'r' is not encrypted with a KMS key of the stack: set kmsKeyId"
    ]
    props["tags"]["policy-exception/log-group-encrypted"] = reason
    assert check("log-group-encrypted", LOG_GROUP, props) == []


def test_a_tag_cannot_waive_a_security_rule_and_says_where_approvals_go() -> None:
    def tagged(records: list[Record]) -> None:
        records[:] = without(records, "good-vpc-flow-log")
        find(records, "good-vpc")["inputs"]["tags"]["policy-exception/vpc-flow-logs"] = "flow logs at the TGW"

    assert [name for name, _ in validate_stack("vpc-flow-logs", changed(tagged))] == ["good-vpc"]
    assert validate_stack("policy-exceptions", changed(tagged)) == [
        (
            "good-vpc",
            "'good-vpc': tag 'policy-exception/vpc-flow-logs' excepts nothing: 'vpc-flow-logs' is a security rule, "
            "whose exceptions are approved in policies/exceptions.json (reviewed by its CODEOWNERS)",
        )
    ]
    props = inputs("good-key") | {"enableKeyRotation": False}
    props["tags"]["policy-exception/kms-key-rotation"] = "imported key material"
    assert len(check("kms-key-rotation", KEY, props)) == 1


def test_an_approval_in_the_exceptions_file_waives_a_security_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from policies import pack
    from policies.rules.exceptions import Approval

    def no_flow_log(records: list[Record]) -> None:
        records[:] = without(records, "good-vpc-flow-log")

    reason = "flow logs at the transit gateway"
    monkeypatch.setattr(pack, "APPROVALS", [Approval("vpc-flow-logs", "good-vpc", reason, stack="test")])
    assert validate_stack("vpc-flow-logs", changed(no_flow_log)) == []
    assert validate_stack("policy-exceptions", changed(no_flow_log)) == [
        ("good-vpc", f"policy 'vpc-flow-logs' is waived for 'good-vpc': {reason} (approved in exceptions.json)")
    ]
    # An approval for another stack, or another resource, waives nothing here.
    monkeypatch.setattr(pack, "APPROVALS", [Approval("vpc-flow-logs", "*-vpc", reason)])
    assert validate_stack("vpc-flow-logs", changed(no_flow_log)) == []
    for other in (Approval("vpc-flow-logs", "good-vpc", reason, stack="prod"), Approval("vpc-flow-logs", "x", reason)):
        monkeypatch.setattr(pack, "APPROVALS", [other])
        assert [name for name, _ in validate_stack("vpc-flow-logs", changed(no_flow_log))] == ["good-vpc"]
    monkeypatch.setattr(pack, "APPROVALS", [Approval("vpc-flowlogs", "*", reason)])
    assert ("", "exceptions.json: approval for 'vpc-flowlogs' names no policy") in validate_stack(
        "policy-exceptions", good_stack()
    )


def test_the_exceptions_file_is_read_and_checked(tmp_path: Any) -> None:
    from policies.rules.exceptions import APPROVALS_FILE, Approval, load_approvals, parse_approvals

    assert load_approvals(APPROVALS_FILE) == parse_approvals(json.loads(APPROVALS_FILE.read_text()))
    assert load_approvals(tmp_path / "absent.json") == []
    assert parse_approvals({"exceptions": [{"policy": "p", "resource": "r", "reason": " why ", "stack": "s"}]}) == [
        Approval("p", "r", "why", "s")
    ]
    with pytest.raises(ValueError) as raised:
        parse_approvals({"exceptions": [{"policy": "p", "reason": ""}, {"policy": "p", "resource": "r", "why": 1}]})
    assert str(raised.value).endswith(
        "exceptions[0]: resource, reason missing or empty; exceptions[1]: reason missing or empty; "
        "exceptions[1]: unknown keys why"
    )
    with pytest.raises(ValueError, match="expected"):
        parse_approvals([])


def test_an_exception_without_a_reason_or_policy_excepts_nothing() -> None:
    def bad_tags(records: list[Record]) -> None:
        tags = find(records, "good-flow-logs")["inputs"]["tags"]
        tags["policy-exception/log-group-encrypted"] = " "
        tags["policy-exception/log-group-encrypt"] = "typo"

    assert validate_stack("policy-exceptions", changed(bad_tags)) == [
        (
            "good-flow-logs",
            "'good-flow-logs': tag 'policy-exception/log-group-encrypt' names no policy (did you mean "
            "'log-group-encrypted'?): nothing is excepted",
        ),
        (
            "good-flow-logs",
            "'good-flow-logs': tag 'policy-exception/log-group-encrypted' gives no reason, so it excepts nothing: "
            "give it as the value",
        ),
    ]


def test_one_reason_on_many_resources_is_reported_once() -> None:
    def everywhere(records: list[Record]) -> None:
        for r in records:
            if isinstance(r["inputs"].get("tags"), dict):
                r["inputs"]["tags"]["policy-exception/log-group-encrypted"] = "central archive"

    [(where, message)] = validate_stack("policy-exceptions", changed(everywhere))
    assert where == ""  # the stack: many resources
    assert message.startswith("policy 'log-group-encrypted' is waived for 'good-key', ")
    assert message.endswith(" more: central archive")


# ---------------------------------------------------------------------------------------------- shipped stacks
@pytest.mark.parametrize("policy", SECURITY_POLICIES)
def test_shipped_stacks_break_no_security_rule(each_shipped_plan: dict[str, Any], policy: str) -> None:
    """Nothing broken, and nothing waived but by an approval in exceptions.json (the privileged namespaces)."""
    found = [v["message"] for v in each_shipped_plan["violations"] if v["policy"] == policy]
    assert [m for m in found if not m.endswith("(approved in exceptions.json)")] == []
