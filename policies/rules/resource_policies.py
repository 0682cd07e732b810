"""Resource policies: no key, queue, topic or bucket policy open to everyone, and every bucket refuses plain HTTP.

Resource policies are the other half of AWS access control: an identity policy says what a principal may do, a
resource policy says who may use the resource, and `"Principal": "*"` there means anyone, in any account
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html, "All principals").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.resources import BUCKETS, KMS_KEY, Resource, Stack, get, peek, strings
from policies.rules.iam import condition_keys, statements
from policies.rules.signatures import Config, StackViolations

KEY_POLICY = "aws:kms/keyPolicy:KeyPolicy"
SQS_QUEUE = "aws:sqs/queue:Queue"
SQS_QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
SNS_TOPIC = "aws:sns/topic:Topic"
SNS_TOPIC_POLICY = "aws:sns/topicPolicy:TopicPolicy"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
#: Every resource type whose `policy` input is a resource policy.
RESOURCE_POLICY_TYPES = frozenset(
    {KMS_KEY, KEY_POLICY, SQS_QUEUE, SQS_QUEUE_POLICY, SNS_TOPIC, SNS_TOPIC_POLICY, BUCKET_POLICY, *BUCKETS}
)


def everyone(statement: Mapping[str, Any]) -> bool:
    """`"Principal": "*"` or `{"AWS": "*"}`: anyone, signed in to any account or not."""
    principal = get(statement, "Principal")
    return principal == "*" or "*" in strings(get(principal, "AWS"))


def resource_policy_no_open_principal(r: Resource, config: Config) -> Iterator[str]:
    """No KMS key, SQS queue, SNS topic or S3 bucket policy allows everyone (`"Principal": "*"`) without a
    condition.

    A key policy that allows `*` lets any AWS account use the key; a queue or topic policy lets anyone send or read
    (https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-overview.html; Security Hub SQS and SNS
    controls). A condition (`aws:SourceArn`, `aws:PrincipalOrgID`, `aws:SourceAccount`) narrows it to known callers;
    Deny statements (the TLS-only statement) are fine.
    """
    for statement in statements(r.get("policy")):
        if get(statement, "Effect") == "Allow" and everyone(statement) and not condition_keys(statement):
            actions = ", ".join(strings(get(statement, "Action"))) or "every action"
            yield f'\'{r.name}\' allows {actions} to everyone ("Principal": "*") with no condition'


def denies_plain_http(document: Any) -> bool:
    """Whether a bucket policy denies every request to everyone when `aws:SecureTransport` is false."""
    for s in statements(document):
        if get(s, "Effect") != "Deny" or not everyone(s):
            continue
        if not {"*", "s3:*"} & set(strings(get(s, "Action"))):
            continue
        bool_block = get(s, "Condition", "Bool")
        if isinstance(bool_block, Mapping):
            for key, value in bool_block.items():
                if str(key).lower() == "aws:securetransport" and [str(v).lower() for v in strings(value)] == ["false"]:
                    return True
    return False


def s3_tls_only(stack: Stack, config: Config) -> StackViolations:
    """Every bucket's policy denies requests that do not use TLS (`aws:SecureTransport` false; FSBP S3.5).

    Without that statement a client may read datasets and checkpoints over plain HTTP
    (https://docs.aws.amazon.com/securityhub/latest/userguide/s3-controls.html#s3-5).
    """
    policies: dict[str, list[Any]] = {}
    for policy in stack.of_type(BUCKET_POLICY):
        value = peek(policy.props, "bucket")
        for bucket in stack.referenced(policy, "bucket", [value] if isinstance(value, str) else [], BUCKETS):
            policies.setdefault(bucket.urn, []).append(policy.get("policy"))
    for bucket in stack.of_type(BUCKETS):
        documents = [bucket.get("policy"), *policies.get(bucket.urn, [])]
        if not any(denies_plain_http(d) for d in documents if d):
            yield (
                f"bucket '{bucket.name}' does not deny requests without TLS: add a Deny statement for s3:* to "
                '"*" with Bool aws:SecureTransport "false" (FSBP S3.5)',
                bucket.urn,
            )
