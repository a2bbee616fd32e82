"""``flash_attn_with_kvcache`` decoding steps on the CPU (the torch backend's path there), this tree against an older
one importable as ``flash_attention_amd_base`` (``BASE_SRC=<old src> . benchmarks/base_pkg.sh``), loops taking turns:
median (min) µs a call over ``--loops`` loops of ``--calls`` calls, float32, 2 threads. The cache holds more slots than
the sequences' keys (as a preallocated cache does): the unused slots' scores are -inf.

    PYTHONPATH=src:/tmp/basepkg python benchmarks/cpu_kvcache_decode.py
"""
from __future__ import annotations

import torch
from cpu_train_calls import row, start, take_turns  # benchmarks/, the script's own folder

# name, (b, h, hk, d), cache slots, sequence lengths
CASES = (
    ("b=4 h=8/2 d=64, 4096 slots, 300-500 keys", (4, 8, 2, 64), 4096, (300, 420, 500, 350)),
    ("b=1 h=32/8 d=128, 2048 slots, 1000 keys", (1, 32, 8, 128), 2048, (1000,)),
    ("b=8 h=8/8 d=64, 512 slots, full", (8, 8, 8, 64), 512, (512,) * 8),
)


def main() -> None:
    a, libs = start(__doc__, "flash_attn_with_kvcache (torch backend)", "µs", 20, 21)
    for name, (b, h, hk, d), slots, lens in CASES:
        g = torch.Generator().manual_seed(0)
        q = torch.randn(b, 1, h, d, generator=g)
        k_cache, v_cache = (torch.randn(b, slots, hk, d, generator=g) for _ in range(2))
        seqlens = torch.tensor(lens, dtype=torch.int32)

        def call(lib, args=(q, k_cache, v_cache, seqlens)):
            with lib.use_backend("torch"):
                return lib.flash_attn_with_kvcache(*args[:3], cache_seqlens=args[3])
        calls = {n: (lambda lib=lib: call(lib)) for n, lib in libs.items()}
        assert torch.allclose(calls["ours"](), calls["base"](), rtol=1e-4, atol=1e-5), name
        print(row(name, take_turns(calls, a.loops, a.calls, 1e-6), 1))


if __name__ == "__main__":
    main()
