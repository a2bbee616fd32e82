"""Eager attention calls with dropout captured into a CUDA graph (torch.cuda.graph), fa_amd on the triton backend:
do two replays draw two masks? (session 40: before it, the key was drawn on the CPU while capturing, a constant of
the graph, so every replay repeated the capture's mask). Prints the fraction of the elements of out, dq, dk and dv
that differ between two replays (0.0: the same mask); tests/test_device_seed.py checks the values.

    PYTHONPATH=src python benchmarks/capture_dropout_probe.py
"""
from __future__ import annotations

import torch

import flash_attention_amd as fa


def main():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 128, h, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for h in (4, 2, 2))
    dout = torch.randn(2, 128, 4, 64, device="cuda", dtype=torch.bfloat16)

    def step():
        with fa.use_backend("triton"):
            out = fa.flash_attn_func(q, k, v, dropout_p=0.3, causal=True)
        return (out, *torch.autograd.grad(out, (q, k, v), dout))

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    outs = []
    for _ in range(2):
        graph.replay()
        outs.append([t.clone() for t in static])
    torch.cuda.synchronize()
    diff = [float((a != b).float().mean()) for a, b in zip(*outs, strict=True)]
    print(f"{torch.cuda.get_device_name()}, {fa.__file__}: fraction of elements that differ between two replays: "
          f"out {diff[0]:.3f}, dq {diff[1]:.3f}, dk {diff[2]:.3f}, dv {diff[3]:.3f} (0: the same dropout mask)")


if __name__ == "__main__":
    main()
