"""Backends: triton (our kernels), sdpa (torch's fused kernels), ck (the flash_attn package),
torch (pure PyTorch, runs anywhere). See dispatch.py for how one is chosen."""
