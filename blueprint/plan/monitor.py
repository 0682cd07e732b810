"""The engine's resource monitor, offline: hands each registration and invoke to `PlanMocks` and records it.

The SDK's own `MockMonitor` runs on a worker thread and encodes each answer by pumping the event loop again
(`_sync_await`); `OfflineMonitor` answers in place, on the loop's own thread (`runner.run_offline` runs the blocking
monitor calls inline), which a plan of thousands of registrations needs. None of its answers pumps the loop: called
in place, each pump nests inside the one before, and reads made together overflowed the stack and stalled the run.
`RecordingMonitor` keeps every registration with its resource options (protect, retainOnDelete, parent, dependsOn,
ignoreChanges), which `Mocks.new_resource` never sees. Why and how much: docs/architecture.md#how-a-plan-runs-the-sdk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks
from pulumi.runtime.proto import provider_pb2, resource_pb2

SECRET = "[secret]"


@dataclass
class Registration:
    """One resource registration as the offline plan reports it (docs/architecture.md#the-plan-json-contract)."""

    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    protect: bool
    retain_on_delete: bool
    depends_on: list[str] = field(default_factory=list)
    ignore_changes: list[str] = field(default_factory=list)
    provider: str | None = None
    id: str | None = None
    #: Input property -> URNs it depends on: how policies link a launch template to its security group even
    #: where ids are unknown (as in a real preview).
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    #: Earlier names or URNs this resource answers to (`ResourceOptions.aliases`): a rename that keeps its state.
    aliases: list[str] = field(default_factory=list)
    #: Output properties the program marks secret beyond the provider's own (`additional_secret_outputs`).
    additional_secret_outputs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "id": self.id,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "custom": self.custom,
            "inputs": self.inputs,
            "options": {
                "protect": self.protect,
                "retainOnDelete": self.retain_on_delete,
                "dependsOn": self.depends_on,
                "ignoreChanges": self.ignore_changes,
                "aliases": self.aliases,
                "additionalSecretOutputs": self.additional_secret_outputs,
            },
            "propertyDependencies": self.property_dependencies,
        }


def _plain(value: Any) -> Any:
    """Make deserialized inputs JSON-friendly: secrets masked, resource references by URN, unknowns marked."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return SECRET
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, pulumi.Resource):
        return f"<resource {type(value).__name__}>"
    if value is rpc.UNKNOWN or value == rpc.UNKNOWN:
        return "<unknown>"
    return value


def _aliases(request: Any) -> list[str]:
    """The aliases of a registration, as alias URNs or (alias specs) `name=<old name>`."""
    found = list(request.aliasURNs)
    for alias in request.aliases:
        if alias.HasField("urn"):
            found.append(alias.urn)
        elif alias.spec.name:
            found.append(f"name={alias.spec.name}")
    return sorted(found)


def _struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    """Plain values (what `PlanMocks` answers) as the engine's Struct. Like `rpc.serialize_properties`, it leaves
    out the top-level properties whose value is None; unlike it, it needs no event loop."""
    struct = struct_pb2.Struct()
    struct.update({key: value for key, value in values.items() if value is not None})
    return struct


class OfflineMonitor(MockMonitor):
    """The SDK's mock monitor, answering registrations and invokes without re-entering the event loop."""

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        inputs = rpc.deserialize_properties(request.object)
        resource_id, state = self.mocks.new_resource(
            MockResourceArgs(
                typ=request.type,
                name=request.name,
                inputs=inputs,
                provider=request.provider,
                resource_id=request.importId,
                custom=request.custom or False,
            )
        )
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, resource_id, state)  # type: ignore[arg-type]
        response = resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id or "", object=_struct(state))
        self.registered(request, response, inputs)
        return response

    def registered(self, request: Any, response: Any, inputs: dict[str, Any]) -> None:
        """Called with each answered registration and its decoded inputs; nothing here."""

    def ReadResource(self, request: Any) -> Any:
        """A resource read by id (`Role.get(name, id)`), answered by the mocks as the SDK's monitor answers it."""
        urn = self.make_urn(request.parent, request.type, request.name)
        resource_id, state = self.mocks.new_resource(
            MockResourceArgs(
                typ=request.type,
                name=request.name,
                inputs=rpc.deserialize_properties(request.properties),
                provider=request.provider,
                resource_id=request.id,
            )
        )
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, resource_id, state)  # type: ignore[arg-type]
        return resource_pb2.ReadResourceResponse(urn=urn, properties=_struct(state))

    def Invoke(self, request: Any) -> Any:
        args = rpc.deserialize_properties(request.args)
        if request.tok == "pulumi:pulumi:getResource":  # a resource read by URN: what was registered under it
            registered = self.resources.get(args["urn"])
            if registered is None:
                raise Exception(f"unknown resource {args['urn']}")
            return resource_pb2.ResourceInvokeResponse(**{"return": _struct(registered._asdict())})
        answer = self.mocks.call(MockCallArgs(token=request.tok, args=args, provider=request.provider))
        values, failures = (answer, None) if isinstance(answer, dict) else answer
        return resource_pb2.ResourceInvokeResponse(
            failures=[provider_pb2.CheckFailure(property=key, reason=reason) for key, reason in failures or ()],
            **{"return": _struct(values)},
        )


class RecordingMonitor(OfflineMonitor):
    """An offline monitor that keeps every registration with its options, in the order registrations complete."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def registered(self, request: Any, response: Any, inputs: dict[str, Any]) -> None:
        self.registrations.append(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=bool(request.custom),
                inputs=_plain(inputs),
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                # sets in the engine's model, gathered by the SDK in no stable order: sorted here
                depends_on=sorted(set(request.dependencies)),
                ignore_changes=sorted(request.ignoreChanges),
                provider=request.provider or None,
                id=response.id or None,
                property_dependencies={
                    key: sorted(request.propertyDependencies[key].urns) for key in sorted(request.propertyDependencies)
                },
                aliases=_aliases(request),
                additional_secret_outputs=sorted(request.additionalSecretOutputs),
            )
        )
