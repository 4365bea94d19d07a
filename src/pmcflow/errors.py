"""The one exception for an item a stage refuses: a machine-readable ``reason`` and a ``detail``.

Stages catch it and write a rejection row (``tables.Rejections.add(uid, e.reason, e.detail)``), so
nothing is dropped silently; the CLI prints it as one line. Each stage subclasses it to name its
own family of reasons (``FetchError``, ``JatsError``, ``BadPackage``, ``ImageError``,
``ImageReject``, ...); a test checks that every class carrying a reason and a detail is one.
"""

from __future__ import annotations


class RejectionError(Exception):
    """An item refused for ``reason`` (a short code such as ``checksum_mismatch``)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
