"""User-data rule: no credentials in a launch template's user data.

Launch templates take user data base64-encoded; the stacks' is a MIME multipart document (the nodeadm NodeConfig
YAML and shell scripts, components.planning.nodeadm) or Bottlerocket TOML. `texts` undoes the base64, gzip and MIME
layers (and each part's own transfer encoding) so the patterns see what the instance sees.
"""

from __future__ import annotations

import base64
import binascii
import email
import email.policy
import gzip
import re
from collections.abc import Iterator

from policies.resources import Resource
from policies.rules.signatures import Config

#: What a credential looks like, by kind. Values are never echoed into a message.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    (
        "an AWS secret access key",
        re.compile(r"(?i)aws_?secret_?access_?key\W{0,3}[:=]\s*['\"]?[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"),
    ),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    # nodeadm's hybrid NodeConfig (spec.hybrid.ssm.activationCode) and the SSM agent's -code flag.
    ("an SSM activation code", re.compile(r"(?i)(?:activation[-_]?code\W{0,3}[:=]|\s-code\s)\s*['\"]?[^\s'\"$]{8,}")),
    # Kubernetes bootstrap tokens: [a-z0-9]{6}.[a-z0-9]{16}, on their own (not inside a host name).
    ("a Kubernetes bootstrap token", re.compile(r"(?<![\w.-])[a-z0-9]{6}\.[a-z0-9]{16}(?![\w.-])")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
    # A literal value assigned to a password/secret/token/api key name (a "$VARIABLE" reference is fine).
    (
        "a password or token",
        re.compile(
            r"(?i)(?<![a-z])(?:password|passwd|secret|api[_-]?key|token)\w*['\"]?\s*[:=]\s*['\"]?(?!\$)[^\s'\"]{8,}"
        ),
    ),
)

#: The catch-all kind, reported only for lines no specific pattern matched.
GENERIC = SECRET_PATTERNS[-1][0]

#: Base64 runs long enough to hide a key (a PEM private key inside a YAML field); decoded and searched again.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")


def _decode_base64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


def _to_text(data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except OSError:
            return ""
    return data.decode("utf-8", errors="replace")


def texts(user_data: str) -> list[str]:
    """The readable parts of user data: each MIME part's decoded body, or the whole document when it is not MIME."""
    raw = _decode_base64(user_data)
    document = _to_text(raw) if raw is not None else user_data
    if "content-type:" not in document[:2000].lower():
        return [document]
    # compat32, the parser's own default: the parts' payloads decode the same, without the modern policy's header
    # objects, which made parsing a tenth of a whole check
    message = email.message_from_string(document, policy=email.policy.compat32)
    parts = []
    for part in message.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            parts.append(_to_text(payload))
    return parts or [document]


def findings(text: str) -> Iterator[tuple[str, int]]:
    """(kind of credential, line number) for each match in `text` and in the base64 runs it carries."""
    for number, line in enumerate(text.splitlines(), start=1):
        kinds = [kind for kind, pattern in SECRET_PATTERNS if pattern.search(line)]
        # The generic password/token pattern last: only when nothing more specific named the line.
        for kind in [k for k in kinds if k != GENERIC] or kinds:
            yield kind, number
        for run in _BASE64_RUN.findall(line):
            decoded = _decode_base64(run)
            if decoded is not None and SECRET_PATTERNS[2][1].search(_to_text(decoded)):
                yield "a base64-encoded private key", number


def no_secrets_in_user_data(lt: Resource, config: Config) -> Iterator[str]:
    """Launch template user data carries no credentials: AWS keys, private keys, SSM activation codes, bootstrap or
    API tokens, passwords.

    User data is readable by anyone allowed ec2:DescribeLaunchTemplateVersions or ec2:DescribeInstanceAttribute and
    by every process on the node through IMDS, and it is not encrypted
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/user-data.html). Nodes get AWS credentials from their
    instance role and read other secrets at boot from Secrets Manager or SSM Parameter Store. No Security Hub control
    covers launch templates' user data.
    """
    user_data = lt.get("userData")
    if not isinstance(user_data, str) or not user_data:
        return
    seen = set()
    for index, text in enumerate(texts(user_data), start=1):
        for kind, line in findings(text):
            if (kind, index, line) in seen:
                continue
            seen.add((kind, index, line))
            yield (
                f"launch template '{lt.name}' user data holds what looks like {kind} (part {index}, line {line}): "
                "fetch it at boot from Secrets Manager or SSM Parameter Store instead"
            )
