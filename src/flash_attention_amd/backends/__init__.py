"""The backends: one module each, and the registry that creates them on first use."""
from __future__ import annotations

from .base import Backend

_registry: dict[str, Backend] = {}


def registry() -> dict[str, Backend]:
    """name -> Backend instance, created on first use (nothing runs at import)."""
    if not _registry:
        from .fa4_backend import FA4Backend
        from .flash_attn_backend import FlashAttnBackend
        from .sdpa_backend import SdpaBackend
        from .torch_backend import TorchBackend
        from .triton_backend import TritonBackend

        for backend in (TritonBackend(), SdpaBackend(), FlashAttnBackend(), FA4Backend(), TorchBackend()):
            _registry[backend.name] = backend
    return _registry
