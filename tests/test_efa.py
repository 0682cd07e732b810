"""EFA interface layouts: every EFA type in the catalog gets exactly AWS's layout, and every EFA device it has.

Expected layouts are written from the facts file (aws-gpu-facts.md §1b max EFA interfaces, §2 [EFAD] layout rules),
not from the catalog, so a wrong catalog entry fails here as surely as a wrong layout function.
"""

from __future__ import annotations

from typing import Any

import pytest

from components import catalog
from components.planning.efa import NetworkInterface, efa_device_count, efa_interfaces
from components.planning.pools import PoolPlan
from tests.builders import first_pool_plan

#: Network cards that carry EFA, per EFA type ([KP] `vpc.amazonaws.com/efa` counts, [EFAD] for p6-b300's
#: ENA-only card 0).
EFA_CARDS: dict[str, range] = {
    "p5.48xlarge": range(0, 32),
    "p5e.48xlarge": range(0, 32),
    "p5en.48xlarge": range(0, 16),
    "p6-b200.48xlarge": range(0, 8),
    "p6-b300.48xlarge": range(1, 17),
    "p4d.24xlarge": range(0, 4),
    "p4de.24xlarge": range(0, 4),
    "g6e.12xlarge": range(0, 1),
    "g6e.24xlarge": range(0, 2),
    "g6e.48xlarge": range(0, 4),
    "g5.12xlarge": range(0, 1),
    "g5.48xlarge": range(0, 1),
    "g6.12xlarge": range(0, 1),
    "g6.48xlarge": range(0, 1),
    "g4dn.12xlarge": range(0, 1),
}
EXPECTED_DEVICES = {
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
    "p6-b300.48xlarge": 16,
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "g6e.48xlarge": 4,
    "g6e.24xlarge": 2,
    "g6e.12xlarge": 1,
    "g5.12xlarge": 1,
    "g5.48xlarge": 1,
    "g6.12xlarge": 1,
    "g6.48xlarge": 1,
    "g4dn.12xlarge": 1,
}
NO_EFA = ["g6e.xlarge", "g6e.2xlarge", "g5.xlarge", "g6.xlarge", "m7i.xlarge"]


def tuples(interfaces: list[NetworkInterface]) -> list[tuple[int, int, str]]:
    return [(i.network_card_index, i.device_index, i.interface_type) for i in interfaces]


def test_every_efa_type_in_the_catalog_has_an_expected_layout() -> None:
    """A type added to the catalog must be added here too, with its facts."""
    assert sorted(EFA_CARDS) == catalog.efa_instance_type_names()


@pytest.mark.parametrize("name", sorted(EFA_CARDS))
def test_current_layout_is_ena_primary_then_efa_only_on_every_efa_card(name: str) -> None:
    cards = EFA_CARDS[name]
    expected = [(0, 0, "interface")]
    if 0 in cards:
        expected.append((0, 1, "efa-only"))
    expected += [(card, 0, "efa-only") for card in cards if card != 0]
    interfaces = efa_interfaces(catalog.instance_type(name))
    assert tuples(interfaces) == expected
    assert efa_device_count(interfaces) == EXPECTED_DEVICES[name]


def test_p5_layout_spelled_out() -> None:
    """The headline case in full: ENA at (0,0), efa-only at (0,1), efa-only at (1..31, 0): 32 EFA devices."""
    got = tuples(efa_interfaces(catalog.instance_type("p5.48xlarge")))
    assert got[:3] == [(0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only")]
    assert got[-1] == (31, 0, "efa-only")
    assert len(got) == 33
    assert sum(1 for _, _, kind in got if kind == "efa-only") == 32
    assert len({(card, device) for card, device, _ in got}) == 33, "no two interfaces share a slot"


def test_p6_b300_card_zero_is_ena_only() -> None:
    got = tuples(efa_interfaces(catalog.instance_type("p6-b300.48xlarge")))
    assert got == [(0, 0, "interface")] + [(card, 0, "efa-only") for card in range(1, 17)]
    assert not any(card == 0 and kind != "interface" for card, _, kind in got)


@pytest.mark.parametrize("name", sorted(n for n, cards in EFA_CARDS.items() if 0 in cards))
def test_legacy_layout_puts_efa_on_card_zero_and_device_one_elsewhere(name: str) -> None:
    cards = EFA_CARDS[name]
    expected = [(0, 0, "efa")] + [(card, 1, "efa") for card in cards if card != 0]
    interfaces = efa_interfaces(catalog.instance_type(name), "efa")
    assert tuples(interfaces) == expected
    assert efa_device_count(interfaces) == EXPECTED_DEVICES[name]


def test_legacy_layout_is_refused_on_p6_b300() -> None:
    with pytest.raises(ValueError, match="card 0 carries no EFA"):
        efa_interfaces(catalog.instance_type("p6-b300.48xlarge"), "efa")


@pytest.mark.parametrize("name", NO_EFA)
def test_types_without_efa_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="has no EFA"):
        efa_interfaces(catalog.instance_type(name))


def _plan(pool: dict[str, Any]) -> PoolPlan:
    return first_pool_plan(pool, name="t")


def test_training_pool_plan_wires_every_fabric_device() -> None:
    plan = _plan({"name": "h100", "role": "training", "instanceType": "p5.48xlarge", "scaling": {"max": 4}})
    assert plan.efa_devices == 32
    assert plan.max_efa_devices == 32
    assert plan.fabric_gbps == 3200
    assert plan.availability_zones == ("us-east-1a",)
    assert plan.placement_group is True


def test_inference_pool_gets_no_efa_unless_asked() -> None:
    auto = _plan({"name": "l40s", "role": "inference", "instanceType": "g6e.48xlarge"})
    on = _plan({"name": "l40s", "role": "inference", "instanceType": "g6e.48xlarge", "efa": "on"})
    assert (auto.efa_devices, auto.fabric_gbps, auto.interfaces) == (0, 0.0, ())
    assert on.efa_devices == 4
