"""Probe: does torch's cuDNN attention take packed variable-length calls (``cum_seq_q`` / ``cum_seq_k``,
the nested-tensor path of ``aten::_cudnn_attention_forward`` / ``_backward``) correctly, with GQA and
causal masks, and how fast is it against our varlen Triton kernels? (issue 13: "wherever a peer
still wins, the dispatcher sends that shape to it"; issue 10's Llama rows run packed varlen calls.)

Packed q [total, h, d], k / v [total, hk, d], bf16. Errors are against a float64 reference per
sequence; timings are CUDA-event medians (triton.testing.do_bench) of forward and backward.

    PYTHONPATH=src python benchmarks/cudnn_varlen_probe.py
"""
from __future__ import annotations

import traceback

import torch
import triton

import flash_attention_amd as fa
from flash_attention_amd.reference import attention_ref

CASES = [  # (label, lengths, h, hk, d)
    ("one seq 8192, 32/8, d=64", [8192], 32, 8, 64),
    ("4 seqs 256..2048, 32/8, d=64", [2048, 1031, 256, 1800], 32, 8, 64),
    ("one seq 8192, 32/8, d=128", [8192], 32, 8, 128),
    ("4 seqs 256..2048, 32/8, d=128", [2048, 1031, 256, 1800], 32, 8, 128),
    ("8 seqs 1024, 16/16, d=128", [1024] * 8, 16, 16, 128),
]


def _cudnn_fwd(q, k, v, cu, max_len, scale):
    res = torch.ops.aten._cudnn_attention_forward(q, k, v, None, cu, cu, max_len, max_len, True, 0.0, True, False,
                                                  scale=scale)
    return res[0], res[1], res[6], res[7]


def _cudnn_bwd(dout, q, k, v, out, lse, seed, offset, cu, max_len, scale):
    empty = torch.empty(0, device=q.device)
    return torch.ops.aten._cudnn_attention_backward(dout, q, k, v, out, lse, seed, offset, empty, cu, cu, max_len,
                                                    max_len, 0.0, True, scale=scale)


def _rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


def _errors(q, k, v, dout, cu, lengths, out_c, out_o, grads_c, grads_o):
    """Relative errors of cuDNN's and our outputs and gradients against float64 math per sequence."""
    ref_out, ref_g = [], [[], [], []]
    for i in range(len(lengths)):
        s, e = int(cu[i]), int(cu[i + 1])
        qs, ks, vs = (t[s:e].double()[None].requires_grad_() for t in (q, k, v))
        o, _ = attention_ref(qs, ks, vs, causal=True)
        gq, gk, gv = torch.autograd.grad(o, (qs, ks, vs), dout[s:e].double()[None])
        ref_out.append(o[0].detach())
        for j, t in enumerate((gq, gk, gv)):
            ref_g[j].append(t[0])
    ref_out = torch.cat(ref_out)
    ref_g = [torch.cat(t) for t in ref_g]
    return (f"{_rel(out_c, ref_out):.1e} / {_rel(out_o, ref_out):.1e}",
            " ".join(f"{_rel(a, b):.1e}" for a, b in zip(grads_c, ref_g)),
            " ".join(f"{_rel(a, b):.1e}" for a, b in zip(grads_o, ref_g)))


def _times(q, k, v, dout, cu, max_len, scale, cudnn_state, ours_state):
    """ms of cuDNN's forward, ours, cuDNN's backward, ours (do_bench medians)."""
    out_c, lse_c, seed, offset = cudnn_state
    out_o, qr, kr, vr = ours_state
    t_fc = triton.testing.do_bench(lambda: _cudnn_fwd(q, k, v, cu, max_len, scale))
    t_fo = triton.testing.do_bench(lambda: fa.flash_attn_varlen_func(q, k, v, cu, cu, max_len, max_len, causal=True))
    t_bc = triton.testing.do_bench(lambda: _cudnn_bwd(dout, q, k, v, out_c, lse_c, seed, offset, cu, max_len, scale))
    t_bo = triton.testing.do_bench(lambda: torch.autograd.grad(out_o, (qr, kr, vr), dout, retain_graph=True))
    return t_fc, t_fo, t_bc, t_bo


def _public_varlen() -> None:
    """What torch's own varlen_attn (torch.nn.attention.varlen) does with a GQA and an MHA call."""
    try:
        from torch.nn.attention import varlen
    except ImportError as e:
        print(f"# torch.nn.attention.varlen: {e}")
        return
    import inspect

    print(f"# varlen_attn{inspect.signature(varlen.varlen_attn)}")
    use = getattr(varlen, "_should_use_cudnn", None)
    if use is not None:
        print("# _should_use_cudnn:\n" + inspect.getsource(use))
    for h, hk in ((16, 16), (32, 8)):
        q = torch.randn(3072, h, 128, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(3072, hk, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        cu = torch.tensor([0, 1024, 3072], dtype=torch.int32, device="cuda")
        try:
            out = varlen.varlen_attn(q, k, v, cu, cu, 2048, 2048, is_causal=True)
            ref = fa.flash_attn_varlen_func(q, k, v, cu, cu, 2048, 2048, causal=True)
            print(f"# varlen_attn h={h} hk={hk}: ok, rel diff to ours {_rel(out, ref.double()):.1e}")
        except Exception as e:  # noqa: BLE001
            print(f"# varlen_attn h={h} hk={hk}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")


def main() -> None:
    _public_varlen()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print("| case | fwd rel err cuDNN / ours | dq dk dv rel err cuDNN | dq dk dv rel err ours | fwd ms cuDNN / ours | "
          "bwd ms cuDNN / ours | lse shape |")
    print("|---|---|---|---|---|---|---|")
    for label, lengths, h, hk, d in CASES:
        g = torch.Generator(device="cuda").manual_seed(len(lengths) * d)
        total = sum(lengths)
        cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device="cuda")
        max_len = max(lengths)
        q = torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(total, hk, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        dout = torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
        scale = d ** -0.5
        try:
            out_c, lse_c, seed, offset = _cudnn_fwd(q, k, v, cu, max_len, scale)
            grads_c = _cudnn_bwd(dout, q, k, v, out_c, lse_c, seed, offset, cu, max_len, scale)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - the probe reports what the op says
            print(f"| {label} | cuDNN failed: {type(e).__name__}: {str(e).splitlines()[0][:150]} | | | | | |")
            if label == CASES[0][0]:
                traceback.print_exc()
            continue
        qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
        out_o = fa.flash_attn_varlen_func(qr, kr, vr, cu, cu, max_len, max_len, causal=True)
        grads_o = torch.autograd.grad(out_o, (qr, kr, vr), dout, retain_graph=True)
        if max_len > 2048:  # a float64 reference would not fit: cuDNN against ours
            err_f = f"{_rel(out_c, out_o.double()):.1e} (vs ours)"
            err_c = " ".join(f"{_rel(a, b.double()):.1e}" for a, b in zip(grads_c, grads_o)) + " (vs ours)"
            err_o = "-"
        else:
            err_f, err_c, err_o = _errors(q, k, v, dout, cu, lengths, out_c, out_o, grads_c, grads_o)
        t_fc, t_fo, t_bc, t_bo = _times(q, k, v, dout, cu, max_len, scale, (out_c, lse_c, seed, offset),
                                        (out_o, qr, kr, vr))
        print(f"| {label} | {err_f} | {err_c} | {err_o} | {t_fc:.3f} / {t_fo:.3f} | {t_bc:.3f} / {t_bo:.3f} | "
              f"{tuple(lse_c.shape)} |", flush=True)


if __name__ == "__main__":
    main()
