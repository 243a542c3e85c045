"""Offset ranges as inclusive (first, last) spans: merged, as the consumer-impact and tiered-storage
rules both need them."""

from __future__ import annotations


def interval_union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive offset spans merged where they overlap or touch, in order."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out
