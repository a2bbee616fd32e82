"""Values read once per process (an installed package's version, the backends, a device's arch), kept where
torch.compile may be tracing the call that first asks for them.

A write to module state while dynamo traces is a side effect: dynamo replays it after the graph, except inside a
higher-order op such as an activation-checkpointed region, which refuses it (fullgraph raises, otherwise the region
runs eagerly). So while tracing a value is computed and returned, not kept; the next call outside tracing keeps it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def once(cache: list, compute: Callable[[], T]) -> T:
    """cache[0], computed by ``compute()`` on first use (``cache``: an empty module-level list)."""
    if cache:
        return cache[0]
    value = compute()
    if not torch.compiler.is_compiling():
        cache.append(value)
    return value


def once_per(cache: dict, key, compute: Callable[[], T]) -> T:
    """cache[key], computed by ``compute()`` on the key's first use."""
    value = cache.get(key, cache)
    if value is cache:
        value = compute()
        if not torch.compiler.is_compiling():
            cache[key] = value
    return value
