"""The backends: one module each, and the registry that creates them on first use."""
from __future__ import annotations

from ..memo import once, tracing
from .base import Backend

_registry: list = []  # [name -> Backend]


def registry() -> dict[str, Backend]:
    """name -> Backend instance, created on first use (nothing runs at import; memo.py)."""
    return _create() if tracing() else once(_registry, _create)


def _create() -> dict[str, Backend]:
    from .fa4_backend import FA4Backend
    from .flash_attn_backend import FlashAttnBackend
    from .sdpa_backend import SdpaBackend
    from .torch_backend import TorchBackend
    from .triton_backend import TritonBackend

    return {b.name: b for b in (TritonBackend(), SdpaBackend(), FlashAttnBackend(), FA4Backend(), TorchBackend())}
