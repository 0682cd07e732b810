"""EFA network interface layouts for launch templates, computed from the catalog.

AWS's current layout ([EFAD], aws-gpu-facts.md §2): an ENA primary at (card 0, device 0), an `efa-only` interface at
(0, 1) when card 0 carries EFA, and an `efa-only` at device 0 of every other EFA card. The older all-`efa` layout is
an option, never on a type whose card 0 has no EFA (p6-b300). Why and sources:
docs/design-notes.md#efa-interface-layouts; the user view:
docs/node-pools.md#efa-every-device-in-awss-current-layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components.catalog import InstanceType

InterfaceType = Literal["interface", "efa", "efa-only"]
Layout = Literal["efa-only", "efa"]
#: The interface types that carry an EFA device.
EFA_INTERFACE_TYPES: tuple[InterfaceType, ...] = ("efa", "efa-only")


@dataclass(frozen=True, order=True)
class NetworkInterface:
    network_card_index: int
    device_index: int
    interface_type: InterfaceType

    @property
    def is_efa(self) -> bool:
        return self.interface_type in EFA_INTERFACE_TYPES


def efa_interfaces(instance: InstanceType, layout: Layout = "efa-only") -> list[NetworkInterface]:
    """Every interface a launch template needs to wire all of the type's EFA devices, primary first."""
    if not instance.efa_supported:
        raise ValueError(f"{instance.name} has no EFA; EFA types: see components.catalog.efa_instance_type_names()")
    cards = sorted(instance.efa_cards)
    if layout == "efa":
        if 0 not in cards:
            raise ValueError(f"{instance.name}: network card 0 carries no EFA, so the `efa` layout cannot work")
        return [NetworkInterface(0, 0, "efa")] + [NetworkInterface(card, 1, "efa") for card in cards if card != 0]
    interfaces = [NetworkInterface(0, 0, "interface")]
    for card in cards:
        interfaces.append(NetworkInterface(card, 1 if card == 0 else 0, "efa-only"))
    return interfaces


def efa_device_count(interfaces: list[NetworkInterface]) -> int:
    return sum(1 for i in interfaces if i.is_efa)
