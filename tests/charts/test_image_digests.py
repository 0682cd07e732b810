"""The catalog's digest pins (`components/catalog/images.yaml` `chart_images`) reach the images the charts render:
each pinned image appears as `image:tag@digest` in what its chart makes of our values."""

from __future__ import annotations

import pytest

from components.catalog.images import chart_images
from tests.charts.conftest import Case
from tests.charts.test_rendered_releases import render, rendered

pytestmark = pytest.mark.charts


def test_every_digest_pin_reaches_its_rendered_image(case: Case) -> None:
    missing = []
    for release in rendered(case):
        chart = release.chart_dir.rsplit("-", 1)[0]
        text = "\n".join(render(release).values())
        for pinned in chart_images(chart):
            reference = f"{pinned.image}:{pinned.tag}@{pinned.digest}"
            if reference not in text:
                missing.append(f"{release.name}: {reference}")
    assert not missing, f"{case.name}: pinned images not rendered:\n  " + "\n  ".join(missing)
