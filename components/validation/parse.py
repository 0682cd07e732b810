"""First pass: parse each section (and each node pool) on its own, so one typo never hides the problems elsewhere.

What parsed is kept in a `Parsed`, which every rule of the second pass reads. A rule whose inputs failed to parse
stays silent: those inputs already have an error, and a follow-on error would only bury it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from copy import deepcopy
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_snake

from components import catalog
from components.config import (
    SECTIONS,
    UNSUPPORTED_KEYS,
    AddonsConfig,
    ClusterConfig,
    LabelKey,
    LabelValue,
    NamespaceName,
    NetworkConfig,
    NodePool,
    StorageConfig,
    WorkloadsConfig,
)
from components.errors import Problem
from components.planning.pools import default_system_pool, resolve_instance

#: The config namespaces read besides the project's: `aws` by the AWS provider (the program registers its AWS
#: resources with the default provider, which the engine configures from the `aws:` keys) and `pulumi` by the engine
#: itself. Any other namespace reaches the program, whose validation is the only reader (docs/configuration.md).
READ_NAMESPACES = ("aws", "pulumi")
#: How much of a bad value a message echoes: enough to recognise it, never the whole input.
MAX_ECHO = 60


@dataclass
class Parsed:
    """What parsed, with each pool's index in the stack file (for key paths).

    `config_keys` holds every fully qualified config key of the stack (`gpu-clusters:cluster`, `aws:region`) when
    the whole Pulumi config is validated, so the key rules can refuse the ones nothing reads.
    """

    region: str
    project: str = "gpu-clusters"
    config_keys: Mapping[str, Any] = field(default_factory=dict)
    raw_keys: tuple[str, ...] = ()
    cluster: ClusterConfig | None = None
    network: NetworkConfig | None = None
    pools: list[tuple[int, NodePool]] = field(default_factory=list)
    pools_complete: bool = True
    #: The system pool the rules judge with the others when the file names none (`planning.pools.default_system_pool`).
    default_pool: NodePool | None = None
    storage: StorageConfig | None = None
    addons: AddonsConfig | None = None
    workloads: WorkloadsConfig | None = None
    problems: list[Problem] = field(default_factory=list)
    #: Sections, pools and keys (`cluster`, `nodePools[2]`, `nodePools[2].capacity.reservationId`) that did not
    #: parse: a rule that would complain about something missing there stays silent, since the bad key is likely
    #: the missing thing, misspelt or malformed.
    damaged: set[str] = field(default_factory=set)

    @classmethod
    def from_raw(
        cls, raw: Mapping[str, Any], region: str, project: str = "gpu-clusters", config_keys: Mapping[str, Any] = {}
    ) -> Parsed:
        """Parse every section of `raw`. A section left out but probably misspelt (`nodepools`) counts as failed,
        not as absent: its typo is reported once, and no rule complains about the defaults standing in for it."""
        parsed = cls(region=region, project=project, config_keys=config_keys, raw_keys=tuple(map(str, raw)))
        stray = [*parsed.unknown_keys(), *(name for _, name in parsed.stray_keys())]
        misspelt = {section for key in stray if (section := closest(key, SECTIONS))} - set(raw)
        if "cluster" in raw:
            parsed.cluster = parsed._parse(ClusterConfig, raw["cluster"], "cluster")
        elif "cluster" not in misspelt:
            parsed.problems.append(Problem("cluster", "missing; every stack needs at least `cluster: {name: ...}`"))
        if "network" not in misspelt:
            parsed.network = parsed._parse(NetworkConfig, raw.get("network", {}), "network")
        if "nodePools" in misspelt:
            parsed.pools_complete = False
        else:
            parsed._parse_pools(raw.get("nodePools", []))
        if "storage" not in misspelt:
            parsed.storage = parsed._parse(StorageConfig, raw.get("storage", {}), "storage")
        if "addons" not in misspelt:
            parsed.addons = parsed._parse(AddonsConfig, raw.get("addons", {}), "addons")
        if "workloads" not in misspelt:
            parsed.workloads = parsed._parse(WorkloadsConfig, raw.get("workloads", {}), "workloads")
        return parsed

    def unknown_keys(self) -> list[str]:
        """The project's config keys no section reads (bare names: `nodepools`)."""
        prefix = f"{self.project}:"
        keys = [key.removeprefix(prefix) for key in self.config_keys if key.startswith(prefix)] or self.raw_keys
        return [key for key in keys if key not in SECTIONS and ":" not in key]

    def damaged_at(self, *paths: str) -> bool:
        """Whether any of `paths`, a key inside one or the section holding it failed to parse: its value is then a
        default standing in for what the user wrote, and a rule quoting it would invent a value."""

        def hit(path: str, damaged: str) -> bool:
            inside = damaged.startswith((f"{path}.", f"{path}["))
            holds = path.startswith((f"{damaged}.", f"{damaged}["))
            return damaged == path or inside or (holds and "." not in damaged and "[" not in damaged)

        return any(hit(path, damaged) for path in paths for damaged in self.damaged)

    def stray_keys(self) -> list[tuple[str, str]]:
        """(namespace, name) of every key in a namespace nothing reads: neither the project's nor one of
        `READ_NAMESPACES` (`gpuclusters:storage`, `gpu-cluster:nodePools`)."""
        pairs = [key.partition(":")[::2] for key in self.config_keys if key.count(":") == 1]
        return [(ns, name) for ns, name in pairs if ns and name and ns not in (self.project, *READ_NAMESPACES)]

    def _parse_pools(self, pools_raw: Any) -> None:
        if not isinstance(pools_raw, list):
            self.problems.append(Problem("nodePools", f"must be a list of node pools (got {shown(pools_raw)})"))
            self.pools_complete = False
            return
        for index, item in enumerate(pools_raw):
            pool = self._parse(NodePool, item, f"nodePools[{index}]")
            # A pool whose kind or role did not parse would be checked as the default kind or role: every rule
            # about it would then judge a pool the user did not write.
            if self.damaged_at(f"nodePools[{index}].kind", f"nodePools[{index}].role"):
                pool = None
            if pool is None:
                self.pools_complete = False
            else:
                self.pools.append((index, pool))
        # The rules judge the default system pool too; the stack's plan adds the same one (`plan_each_pool`).
        added = default_system_pool([pool for _, pool in self.pools]) if self.pools_complete else None
        if added is not None:
            self.pools.append((len(pools_raw), added))
            self.default_pool = added

    def _parse(self, model: type[BaseModel], value: Any, path: str) -> Any:
        """Parse `value`; on errors, report them and try once more without the offending keys.

        The second try gives the rules a section to check even when one of its keys is bad, so a typo in
        `cluster.tags` does not hide an unsupported `cluster.kubernetesVersion`. Only the first try's errors count.
        """
        try:
            return model.model_validate(value)
        except ValidationError as error:
            items = error.errors()
            self.damaged.add(path)
            self.damaged.update(join_path(path, item["loc"]) for item in items)
            self.problems.extend(_problems(model, path, items))
            pruned = _without(value, [item["loc"] for item in items])
            try:
                return model.model_validate(pruned)
            except ValidationError:
                return None

    @property
    def zones(self) -> list[str]:
        return self.network.zones if self.network else []

    @cached_property
    def instances(self) -> dict[int, catalog.InstanceType]:
        """Each aws pool's instance type by pool index, where it resolves (the pool rules report the others)."""
        found = {}
        for index, pool in self.pools:
            if pool.kind != "aws" or (pool.instance_type and pool.gpu_model):
                continue
            try:
                instance = resolve_instance(pool)
            except KeyError:
                continue
            if instance is not None:
                found[index] = instance
        return found

    def aws_pools(self) -> Iterator[tuple[str, NodePool, catalog.InstanceType | None]]:
        """(key path, pool, instance type or None) of every `kind: aws` pool."""
        for index, pool in self.pools:
            if pool.kind == "aws":
                yield f"nodePools[{index}]", pool, self.instances.get(index)

    def hybrid_pools(self) -> Iterator[tuple[str, NodePool]]:
        for index, pool in self.pools:
            if pool.kind == "hybrid":
                yield f"nodePools[{index}]", pool


#: A pool's place in a key path or message, not yet followed by its name.
POOL_PATH = re.compile(r"nodePools\[(\d+)\](?! \()")
#: How a problem names the system pool a stack gets when it names none (`planning.pools.DEFAULT_SYSTEM_POOL`): no
#: entry of the file.
DEFAULT_POOL_LABEL = "nodePools (default system pool)"


def pool_labels(pools_raw: Any, parsed: Parsed) -> dict[int, str]:
    """Each pool's label by index: `nodePools[1] (h100)` (its index and name as written; the space keeps it from
    reading as a Markdown link), `nodePools[1]` where the entry has no name, and `DEFAULT_POOL_LABEL` for the
    default system pool, which the file does not hold."""
    entries = pools_raw if isinstance(pools_raw, list) else []
    labels = {}
    for index, item in enumerate(entries):
        name = item.get("name") if isinstance(item, dict) else None
        labels[index] = (
            f"nodePools[{index}] ({shown_text(name, 40)})" if isinstance(name, str) else f"nodePools[{index}]"
        )
    if any(index == len(entries) for index, _ in parsed.pools):
        labels[len(entries)] = DEFAULT_POOL_LABEL
    return labels


def with_pool_names(problem: Problem, labels: Mapping[int, str]) -> Problem:
    """`problem` with every `nodePools[i]` in its path and message named as `pool_labels` names it, so one form
    reads the same in every rule's message."""

    def label(match: re.Match[str]) -> str:
        return labels.get(int(match[1]), match[0])

    return Problem(POOL_PATH.sub(label, problem.path), POOL_PATH.sub(label, problem.message))


#: A rule of the second pass: every problem it finds in what parsed.
Rule = Callable[[Parsed], Iterator[Problem]]


def _problems(model: type[BaseModel], path: str, items: list[Any]) -> Iterator[Problem]:
    """One problem per pydantic error; a misspelt key names its likely spelling, a key the stack does not support
    says why (`config.UNSUPPORTED_KEYS`), and the "required key is missing" that a misspelling causes is left out
    (one mistake, one problem)."""
    unsupported = {
        index: reason
        for index, item in enumerate(items)
        if item["type"] == "extra_forbidden"
        and (reason := _unsupported(_model_at(model, item["loc"][:-1]), str(item["loc"][-1])))
    }
    guesses = {
        index: guess
        for index, item in enumerate(items)
        if item["type"] == "extra_forbidden"
        and index not in unsupported
        and (guess := closest(str(item["loc"][-1]), _keys_at(model, item["loc"][:-1])))
    }
    meant = {(*items[index]["loc"][:-1], guess) for index, guess in guesses.items()}
    for index, item in enumerate(items):
        if item["type"] == "missing" and tuple(item["loc"]) in meant:
            continue
        if index in unsupported:
            message = unsupported[index]
        else:
            message = f"unknown key (did you mean {guesses[index]}?)" if index in guesses else describe(item)
        yield Problem(join_path(path, item["loc"]), message)


def _unsupported(model: type[BaseModel] | None, key: str) -> str | None:
    """Why `key` of `model` is refused, when the stack does not support it (`config.UNSUPPORTED_KEYS`)."""
    reasons = next((keys for owner, keys in UNSUPPORTED_KEYS.items() if owner is model), {})
    return reasons.get(key)


def _model_at(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model at `loc` inside `model` (list indexes and dict keys pass through), or None."""
    for part in loc:
        if model is None or isinstance(part, int):
            continue
        found = model.model_fields.get(to_snake(str(part)))
        model = next(iter(_models_in(found.annotation)), None) if found else None
    return model


def _keys_at(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at `loc` inside `model` accepts."""
    found = _model_at(model, loc)
    return [field.alias or name for name, field in found.model_fields.items()] if found else []


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds: `Model`, `Model | None`, `list[Model]`, `dict[str, Model]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


def _without(value: Any, locations: list[tuple[Any, ...]]) -> Any:
    """A deep copy of `value` without the dict keys the error locations point into (lists are kept whole)."""
    copy = deepcopy(value)
    for loc in locations:
        node, parent, key = copy, None, None
        for part in loc:
            if isinstance(node, dict) and part in node:
                parent, key, node = node, part, node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                break
        if isinstance(parent, dict) and key in parent:
            del parent[key]
    return copy


def join_path(path: str, loc: Iterable[Any]) -> str:
    """`nodePools[1]` + ("scaling", "min") -> `nodePools[1].scaling.min` (a dict key's own check adds nothing)."""
    for part in loc:
        if part == "[key]":
            continue
        path += f"[{part}]" if isinstance(part, int) else (f".{shown_text(str(part))}" if path else str(part))
    return path


def shown_text(text: str, limit: int = MAX_ECHO) -> str:
    """`text` cut to `limit` characters, marked as cut."""
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def shown(value: Any) -> str:
    """A bad value as a message quotes it, in YAML's words for true, false and null, cut to a sane length."""
    words = {True: "true", False: "false", None: "null"}
    if value is None or isinstance(value, bool):
        return words[value]
    return shown_text(repr(value))


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to `word`, ignoring case, or None when nothing is close."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean X?)` for the closest choice, ignoring case; empty when nothing is close."""
    choice = closest(word, choices)
    return f" (did you mean {choice}?)" if choice else ""


#: What the config's regular expressions mean, for people (the pattern itself is a poor error message).
PATTERN_MEANINGS = {
    r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$": "use 2-32 lowercase letters, digits and hyphens, starting with a letter",
    r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$": "EKS cluster names are 1-100 letters, digits, hyphens and underscores",
    r"^cr-[0-9a-f]{8,17}$": "a capacity reservation id looks like cr-0123456789abcdef0",
    r"^vpc-[0-9a-f]{8,17}$": "a VPC id looks like vpc-0123456789abcdef0",
    r"^subnet-[0-9a-f]{8,17}$": "a subnet id looks like subnet-0123456789abcdef0",
    r"^\d+[smh]$": "a duration like 10m, 30s or 1h",
    r"^v\d+\.\d+\.\d+-eksbuild\.\d+$": "an EKS add-on version like v1.20.4-eksbuild.1",
    get_args(NamespaceName)[1].pattern: "not a Kubernetes namespace name: 1-63 lowercase letters, digits and `-`, "
    "starting and ending with a letter or digit (a DNS-1123 label)",
    get_args(LabelKey)[1].pattern: "not a Kubernetes label key: an optional DNS prefix and `/`, then 1-63 letters, "
    "digits, `-`, `_` or `.`, starting and ending alphanumeric (Kubernetes, Labels and Selectors)",
    get_args(LabelValue)[1].pattern: "not a Kubernetes label value: at most 63 letters, digits, `-`, `_` or `.`, "
    "starting and ending alphanumeric (Kubernetes, Labels and Selectors)",
}
#: Messages for pydantic error types, made to say what would be valid (strict types above all).
TYPE_MESSAGES = {
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number (no .nan or .inf)",
    "bool_type": "must be true or false",
    "string_type": "must be text (quote it)",
    "dict_type": "must be a mapping of keys to values",
    "model_type": "must be a mapping of keys to values",
    "list_type": "must be a list",
}


def describe(item: Mapping[str, Any]) -> str:
    """Pydantic's message, made to say what would be valid, echoing at most a short piece of the input."""
    kind, message, value = item["type"], item["msg"], item.get("input")
    if kind == "extra_forbidden":
        return "unknown key (check its spelling and the config reference in docs/configuration.md)"
    if kind == "missing":
        return "required key is missing"
    if kind == "literal_error":
        return f"got {shown(value)}; {message[0].lower()}{message[1:]}"
    if kind == "string_pattern_mismatch":
        pattern = item["ctx"]["pattern"]
        return f"{shown(value)} is not valid: {PATTERN_MEANINGS.get(pattern, f'must match {pattern}')}"
    if kind in TYPE_MESSAGES:
        got = "null: an empty value" if value is None else f"{_kind_of(value)} {shown(value)}"
        return f"{TYPE_MESSAGES[kind]} (got {got})"
    return f"{shown_text(message, 200)} (got {shown(value)})"


def _kind_of(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "text", list: "list", dict: "mapping"}
    return names.get(type(value), type(value).__name__)


def unknown_key(key: str, known: Iterable[str]) -> str:
    """The message for a key nothing reads: its closest valid spelling, or the valid keys."""
    known = list(known)
    hint = did_you_mean(key, known)
    return f"unknown key{hint}; valid keys: {', '.join(known)}" if hint else f"unknown key; valid: {', '.join(known)}"


__all__ = [
    "SECTIONS",
    "Parsed",
    "Rule",
    "describe",
    "did_you_mean",
    "join_path",
    "pool_labels",
    "shown",
    "unknown_key",
    "with_pool_names",
]
