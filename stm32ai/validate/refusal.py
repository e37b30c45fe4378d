"""The one exception a reference run raises when it cannot give outputs for a model.

Its own module so that reference.py and op_versions.py (which retries a refusal on a
version-lowered copy) both use it without importing each other."""

from __future__ import annotations


class ReferenceUnavailable(Exception):
    """The reference runtime refused or crashed on the model; ``reason`` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
