"""Every environment variable the library reads, read here and nowhere else.

Values are read at call time (never at import), so tests and users can change them
between calls.

- ``FLASH_ATTENTION_BACKEND``: ``triton`` | ``sdpa`` | ``flash_attn`` (alias ``ck``) | ``torch``
  forces a backend (a forced backend that cannot serve a call raises with its reason).
- ``FLASH_ATTENTION_DEBUG``: ``1`` logs each distinct dispatch decision once, with the
  reasons of the backends passed over, and turns on host-side value checks for GPU
  tensors (cu_seqlens order, block_table range, cache room).
- ``TRITON_INTERPRET``: ``1`` lets the Triton backend run on CPU tensors (Triton's
  interpreter): the way CI tests the real kernel code without a GPU.
- ``FLASH_ATTENTION_WARP_SPEC``: ``0`` keeps the Triton backend off its warp-specialised kernels
  (sm90: the forward, kernels/fwd_ws.py, and the backward's dK/dV, kernels/bwd_ws.py): the main
  kernels serve those calls too (read when a call signature is first planned).
- ``FLASH_ATTENTION_GLUON``: ``0`` keeps the Triton backend off its Gluon forward (sm90,
  kernels/fwd_gluon.py): the other forward kernels serve those calls (read when a call signature
  is first planned).
"""
from __future__ import annotations

import os

from .memo import once, once_per, tracing

BACKEND_NAMES = ("triton", "sdpa", "flash_attn", "fa4", "torch")
# Old names that still work: "ck" was the flash_attn backend's name while it served ROCm's CK build only.
BACKEND_ALIASES = {"ck": "flash_attn"}


def canonical_backend(name: str) -> str | None:
    """The backend a (lower-case) name or alias means, or None when it names none."""
    name = BACKEND_ALIASES.get(name, name)
    return name if name in BACKEND_NAMES else None


_TRUE = ("1", "true", "yes", "on")
_KEYS: dict[str, object] = {}


def _env(name: str) -> str:
    """os.environ.get(name, ""), read on every call. Every attention call reads two variables;
    on POSIX this looks the encoded name up in os.environ's own mapping (a dict lookup, about
    0.1 us) instead of going through the encode/decode of os.environ.get (about 1.5 us)."""
    data = getattr(os.environ, "_data", None)
    if os.name != "posix" or type(data) is not dict:
        return os.environ.get(name, "")
    if tracing():  # the cache untouched (memo.py)
        raw = data.get(os.environ.encodekey(name))
    else:  # the kept key at once (every call reads two variables); memo.py's once_per on first use
        key = _KEYS.get(name)
        raw = data.get(key if key is not None else once_per(_KEYS, name, lambda: os.environ.encodekey(name)))
    return "" if raw is None else os.environ.decodevalue(raw)


def call_env() -> tuple:
    """The raw values of FLASH_ATTENTION_BACKEND and FLASH_ATTENTION_DEBUG (None where unset), unparsed: what
    forced_backend() and debug() read, for the plan cache's key of every attention call (core.py). One call and
    two dict lookups on POSIX (about 0.4 us less than forced_backend() and debug() each parsing its own read);
    the plan built for a key parses them (a bad value raises there, on every call, as it is never cached)."""
    data = getattr(os.environ, "_data", None)
    if os.name != "posix" or type(data) is not dict:
        return os.environ.get("FLASH_ATTENTION_BACKEND"), os.environ.get("FLASH_ATTENTION_DEBUG")
    if tracing():  # the cache untouched (memo.py)
        backend_key, debug_key = _encoded_call_keys()
    else:
        backend_key, debug_key = _CALL_KEYS[0] if _CALL_KEYS else once(_CALL_KEYS, _encoded_call_keys)
    return data.get(backend_key), data.get(debug_key)


def _encoded_call_keys() -> tuple:
    return tuple(os.environ.encodekey(name) for name in ("FLASH_ATTENTION_BACKEND", "FLASH_ATTENTION_DEBUG"))


_CALL_KEYS: list = []  # [call_env()'s two names, encoded as os.environ keeps them]


def _flag(name: str) -> bool:
    return _env(name).strip().lower() in _TRUE


def forced_backend() -> str | None:
    """The backend named by FLASH_ATTENTION_BACKEND, or None."""
    value = _env("FLASH_ATTENTION_BACKEND").strip().lower()
    if not value or value == "auto":
        return None
    name = canonical_backend(value)
    if name is None:
        raise ValueError(
            f"FLASH_ATTENTION_BACKEND={value!r} is not a backend; allowed: {', '.join(BACKEND_NAMES)} or auto"
        )
    return name


def debug() -> bool:
    """FLASH_ATTENTION_DEBUG=1: log dispatch decisions and run host-side value checks."""
    return _flag("FLASH_ATTENTION_DEBUG")


def triton_interpret() -> bool:
    """TRITON_INTERPRET=1: Triton kernels run on CPU tensors in the interpreter."""
    return _flag("TRITON_INTERPRET")


def gluon_off() -> bool:
    """FLASH_ATTENTION_GLUON=0: no Gluon forward (launch/fwd_gluon.py)."""
    return _env("FLASH_ATTENTION_GLUON").strip().lower() in ("0", "false", "no", "off")


def warp_spec_off() -> bool:
    """FLASH_ATTENTION_WARP_SPEC=0: no warp-specialised kernels (launch/fwd_ws.py, launch/bwd_ws.py)."""
    return _env("FLASH_ATTENTION_WARP_SPEC").strip().lower() in ("0", "false", "no", "off")
