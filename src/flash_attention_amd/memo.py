"""Values read once per process (an installed package's version, the backends, a device's arch), kept where
torch.compile may be tracing the call that first asks for them.

A write to module state while dynamo traces is a side effect: dynamo replays it after the graph, except inside a
higher-order op such as an activation-checkpointed region, which refuses it (fullgraph raises, otherwise the region
runs eagerly). A read is a guard: a graph traced while the cache was empty is compiled again once the first call
outside tracing (the ops' kernels, say) has filled it, doubling the compile time of a model's first step in a fresh
process. Even passing the cache to a function may guard on its length (torch 2.11 did, on a GPU). So while tracing
a caller computes the value and does not touch the cache at all: ``compute() if tracing() else once(cache,
compute)``; outside tracing the value is kept.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


tracing = torch.compiler.is_compiling


def once(cache: list, compute: Callable[[], T]) -> T:
    """cache[0], computed by ``compute()`` on first use (``cache``: an empty module-level list). Not while tracing
    (module docstring)."""
    if cache:
        return cache[0]
    value = compute()
    cache.append(value)
    return value


def once_per(cache: dict, key, compute: Callable[[], T]) -> T:
    """cache[key], computed by ``compute()`` on the key's first use. Not while tracing (module docstring)."""
    value = cache.get(key, cache)
    if value is cache:
        value = cache[key] = compute()
    return value
