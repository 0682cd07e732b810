"""Encryption rules for keys and messages: KMS keys rotate, queues and topics are encrypted at rest, log groups use
a KMS key of the stack's own.

Control ids are AWS Security Hub's (https://docs.aws.amazon.com/securityhub/latest/userguide/fsbp-standard.html and
.../cis-aws-foundations-benchmark.html list which standard carries each control).
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.resources import Resource, truthy
from policies.rules.signatures import Config

SQS_QUEUE = "aws:sqs/queue:Queue"
SNS_TOPIC = "aws:sns/topic:Topic"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"

#: Key specs AWS KMS can rotate automatically: symmetric encryption keys only; asymmetric and HMAC keys cannot
#: (KMS EnableKeyRotation, https://docs.aws.amazon.com/kms/latest/APIReference/API_EnableKeyRotation.html).
ROTATABLE_KEY_SPECS = frozenset({"SYMMETRIC_DEFAULT"})


def kms_key_rotation(key: Resource, config: Config) -> Iterator[str]:
    """Symmetric KMS keys rotate their key material automatically (enableKeyRotation; Security Hub KMS.4, in the CIS
    AWS Foundations Benchmark standard).

    Rotation is off by default for customer-managed keys; with it on, KMS makes new key material every year (or every
    `rotationPeriodInDays`) and keeps the old material to decrypt older data, at no change to the key's users
    (https://docs.aws.amazon.com/kms/latest/APIReference/API_EnableKeyRotation.html). Asymmetric and HMAC keys cannot
    rotate and are not judged.
    """
    spec = str(key.get("customerMasterKeySpec", default="SYMMETRIC_DEFAULT"))
    if spec in ROTATABLE_KEY_SPECS and not truthy(key.get("enableKeyRotation", default=False)):
        yield f"KMS key '{key.name}' does not rotate its key material: set enableKeyRotation (CIS KMS.4)"


def sqs_queue_encrypted(queue: Resource, config: Config) -> Iterator[str]:
    """SQS queues are encrypted at rest, with SQS-managed keys (sqsManagedSseEnabled) or a KMS key (kmsMasterKeyId)
    (FSBP SQS.1).

    The stack says so explicitly rather than rely on the account-time default (SSE-SQS became the default for new
    queues in 2022; `sqsManagedSseEnabled: false` turns it off). The interruption queue keeps SSE-SQS: EventBridge
    can deliver to it without a key policy, which an AWS-managed `alias/aws/sqs` key would refuse
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-server-side-encryption.html).
    """
    if queue.get("kmsMasterKeyId"):
        return
    if not truthy(queue.get("sqsManagedSseEnabled", default=False)):
        yield (
            f"SQS queue '{queue.name}' is not encrypted at rest: set sqsManagedSseEnabled or kmsMasterKeyId "
            "(FSBP SQS.1)"
        )


def sns_topic_encrypted(topic: Resource, config: Config) -> Iterator[str]:
    """SNS topics are encrypted at rest with a KMS key (kmsMasterKeyId; AWS Config rule sns-encrypted-kms).

    SNS stores messages unencrypted unless the topic names a key
    (https://docs.aws.amazon.com/sns/latest/dg/sns-server-side-encryption.html). A topic that CloudWatch alarms
    publish to needs a customer-managed key whose policy lets cloudwatch.amazonaws.com use it; the AWS-managed
    `alias/aws/sns` key does not, so the alarms would fail to deliver.
    """
    if not topic.get("kmsMasterKeyId"):
        yield f"SNS topic '{topic.name}' is not encrypted at rest: set kmsMasterKeyId to a KMS key of the stack"


def log_group_encrypted(group: Resource, config: Config) -> Iterator[str]:
    """CloudWatch log groups are encrypted with a KMS key of the stack's own (kmsKeyId), not only the service's key.

    CloudWatch Logs always encrypts at rest; a customer-managed key adds control over who may read control-plane
    audit logs and flow logs, and a way to make them unreadable by disabling the key. The key's policy must allow
    `logs.<region>.amazonaws.com` with an `kms:EncryptionContext:aws:logs:arn` condition
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html). No Security Hub control.
    """
    if not group.get("kmsKeyId"):
        yield f"log group '{group.name}' is not encrypted with a KMS key of the stack: set kmsKeyId"
