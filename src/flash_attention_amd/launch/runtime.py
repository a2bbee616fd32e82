"""Launching a Triton kernel: ``launch(fn, grid, device, args, constexprs, options)``."""
from __future__ import annotations

import torch


def launch(fn, grid: tuple, device: torch.device, args: tuple, constexprs: dict, options: dict) -> None:
    """fn[grid](*args, **constexprs, **options); args are the kernel's non-constexpr parameters
    in order, then its constexprs by name."""
    if device.type == "cuda" and device.index is not None and device.index != torch.cuda.current_device():
        with torch.cuda.device(device):
            fn[grid](*args, **constexprs, **options)
        return
    fn[grid](*args, **constexprs, **options)
