"""flash_attention_amd: FlashAttention for PyTorch in Triton, AMD first, drop-in for flash_attn 2.x.

Example::

    from flash_attention_amd import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)

Nothing is compiled or switched on at import; Triton is imported on first use.
"""
import warnings as _warnings

# torch warns at import when numpy is absent ("Failed to initialize NumPy"): numpy is optional
# here and that warning would be the first line `flash-attention-amd bench` prints.
_warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

from .dispatch import BackendUnavailable, use_backend  # noqa: E402
from .interface import (  # noqa: E402
    explain,
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
)
from .modules import FlashAttention  # noqa: E402

__version__ = "0.1.0"


def __getattr__(name):
    # flash_attn_with_kvcache lives in kvcache.py, imported on first use.
    if name == "flash_attn_with_kvcache":
        from .kvcache import flash_attn_with_kvcache

        globals()[name] = flash_attn_with_kvcache  # later lookups: a plain module attribute
        return flash_attn_with_kvcache
    raise AttributeError(f"module 'flash_attention_amd' has no attribute {name!r}")

__all__ = [
    "BackendUnavailable",
    "FlashAttention",
    "explain",
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
    "use_backend",
]
