"""Copies of JSON documents, as an API hands out a new one on every read (the fake Kubernetes APIs of the verify and
node-health tests)."""

from __future__ import annotations

from copy import deepcopy
from typing import Any


def fresh(document: Any) -> Any:
    """A copy of a JSON document: new dicts and lists, the same immutable scalars; anything else is deep-copied.
    `copy.deepcopy` alone gives the same copy about twenty times slower, keeping a memo of shared and cyclic
    references that a document from the API cannot have."""
    if isinstance(document, dict):
        return {key: fresh(value) for key, value in document.items()}
    if isinstance(document, list):
        return [fresh(value) for value in document]
    if document is None or isinstance(document, str | int | float):
        return document
    return deepcopy(document)
