"""A guard for the sdpa backend against torch's cuDNN attention backward reading dO with another call's strides.

torch 2.11's cuDNN SDPA backward keeps one cuDNN graph per call signature, keyed on the shapes and the strides of q,
k, v and the output but not on those of dO, the output's gradient: a backward whose dO is laid out differently from
the first backward of that signature in the process replays the first one's graph, which reads dO with the first one's
strides. The gradients are then wrong, with no error (session 56, one H200, torch 2.11.0+cu130, cuDNN 9.19: the
largest error of dq, dk, dv 1.65-2.22 against 0.004-0.009 for the first backward; `benchmarks/cudnn_state_probe.py`,
`benchmarks/cudnn_grad_layout.py`, benchmarks/results/run53). Upstream, pytorch/pytorch PR 191576 keys the graph on
dO's strides (merged, then reverted for an older internal cuDNN). The memory-efficient and flash kernels read dO's
strides on every call.

Where the installed torch does this (``grad_layout_guarded``: asked once per CUDA device by two tiny cuDNN calls whose
gradients it compares; one host synchronisation), the sdpa backend returns each contiguous output [b, sq, h, dv] of a
call on q, k, v [b, s, h, d] (flash_attn's functions) that a gradient will flow back through as two views
(``fixed_grad_layout``): their backward hands the gradient on as one contiguous tensor (a copy only where it comes
laid out otherwise), so every such backward gives SDPA's backward dO in one layout, the output's own. Their host cost
on an H200's host (run53, medians): forward + backward of BERT-base's SDPA call 237 -> 278 and 251 -> 318 us, of ours
through flash_attn_func (GQA b=4 s=512 h=32/8 d=128, causal, sdpa) 704 -> 763 us. Not applied to calls on q, k, v
heads first (``core.attention_heads_first``, made only by the Hugging Face integration): Hugging Face's attention
modules reshape the output and feed it to their output projection, a Linear, whose backward gives the gradient
contiguous, so those backwards already share one layout. Not covered either: an output that is not contiguous, traced
calls (torch.compile picks the layouts), and another caller's backward of the same shapes with another layout in the
same process (which can still leave a graph that ours then replays).
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from .sdpa_common import gpu_probe_setting


def fixed_grad_layout(out: torch.Tensor) -> torch.Tensor:
    """out [b, sq, h, dv], contiguous, through view(-1) and back: the same values and storage; the backward of the
    two views makes the gradient contiguous (reshape copies one laid out otherwise). out as it is where it is not
    contiguous."""
    if out.is_contiguous():
        return out.view(-1).view(out.shape)
    return out


def grad_layout_guarded(device: torch.device) -> bool:
    """Whether the sdpa backend's CUDA outputs that a gradient flows back through go through ``fixed_grad_layout``:
    where this torch's cuDNN backward replays a graph with another dO layout (``_replays_dout_layout``), and while a
    CUDA graph is being captured (nothing can be read then; the views cost no kernel)."""
    if device.type != "cuda" or torch.compiler.is_compiling():
        return False
    if torch.cuda.is_current_stream_capturing():
        return True
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _replays_dout_layout(index)


@functools.cache
def _replays_dout_layout(index: int) -> bool:
    """Two backwards of one cuDNN call of a shape nothing else uses (b=1, h=3, s=24, d=64, bf16), the same values of
    dO laid out [b, h, s, d] and then [b, s, h, d]: whether the gradients differ by more than a tenth of their
    largest value (kernels that read dO's strides give the same gradients up to the order of their sums). False
    where cuDNN does not take the call (nothing to guard)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with gpu_probe_setting(index):
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(1, 3, 24, 64, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
                   for _ in range(3))
        dout = torch.randn(1, 3, 24, 64, device="cuda", dtype=torch.bfloat16, generator=g)
        grads = []
        for d in (dout, dout.transpose(1, 2).contiguous().transpose(1, 2)):
            try:
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    out = F.scaled_dot_product_attention(q, k, v)
                    grads.append(torch.autograd.grad(out, (q, k, v), d))
            except RuntimeError:  # no cuDNN kernel for this call here
                return False
        scale = max(t.abs().max().item() for t in grads[0])
        return any((a.float() - b.float()).abs().max().item() > 0.1 * scale for a, b in zip(*grads))
