"""Helpers the sdpa backend's modules share: SDPA restricted to its fused kernels, whether SDPA's CPU kernels'
default scale equals a call's, and the setting of the once-per-process GPU probes."""
from __future__ import annotations

import contextlib
import math
import struct
import warnings

import torch


def _fused_kernels(device_type: str):
    """SDPA restricted to its fused kernels, cuDNN first on GPUs (the fastest measured on an H100)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device_type == "cpu":
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    kernels = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    try:
        return sdpa_kernel(kernels, set_priority=True)
    except TypeError:  # torch < 2.6: no priorities, torch's own order
        return sdpa_kernel(kernels)


def _default_scale(scale: float, headdim: int, dtype: torch.dtype) -> bool:
    """Whether SDPA's CPU kernels, left their default scale (``1 / sqrt(headdim)`` in double precision), compute with
    the same value as with ``scale``: exactly that double, or for fp16 / bf16 / fp32 inputs (whose kernel holds the
    scale as a float) the same float (see sdpa_backend's ``_cpu_runner``)."""
    default = 1.0 / math.sqrt(headdim)
    return scale == default or (dtype != torch.float64 and _as_float(scale) == _as_float(default))


def _as_float(x: float) -> float:
    """x rounded to the nearest float32, as the CPU kernel's ``accum_t`` holds it."""
    return struct.unpack("f", struct.pack("f", x))[0]


@contextlib.contextmanager
def gpu_probe_setting(index: int):
    """The setting of a probe's tiny SDPA calls on GPU ``index``, whatever the caller's: gradients recorded (not
    inference mode, no functorch transform), torch's sync-debug mode off where the caller set it (the probe reads its
    results: one host synchronisation, on purpose; restored afterwards), and no warning let out: torch warns once per
    process for each reason a kernel declines a call (six lines, seen in a BERT run's log: run53/h200_c_e2e_bert.txt),
    and on every change of the sync-debug mode, so the mode is left alone where it is already off."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mode = torch.cuda.get_sync_debug_mode()
        if mode:
            torch.cuda.set_sync_debug_mode(0)
        try:
            with torch.inference_mode(False), torch.enable_grad(), torch._C._DisableFuncTorch(), \
                    torch.cuda.device(index):
                yield
        finally:
            if mode:
                torch.cuda.set_sync_debug_mode(mode)
