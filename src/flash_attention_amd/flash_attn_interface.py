"""``flash_attn.flash_attn_interface`` as this library provides it: the public functions and the
private entry points that code built on flash_attn 2.x calls directly (ring-flash-attn,
training frameworks): ``_flash_attn_forward``, ``_flash_attn_varlen_forward``,
``_flash_attn_backward``, ``_flash_attn_varlen_backward`` and ``_get_block_size_n``.

Same signatures and semantics as flash_attn 2.8 (written here, not copied):

- the forwards return ``(out, softmax_lse, S_dmask, rng_state)``; ``S_dmask`` is the
  dropout-signed probability matrix when ``return_softmax`` and ``dropout_p > 0`` (see
  ``probs.py``), else None; ``rng_state`` is an int64 tensor ``[seed, 0]`` on the CPU (on q's
  device for a call captured into a CUDA graph: core.py ``_capture_key``) that the backward takes
  back to regenerate the same dropout mask;
- the backwards write dq, dk, dv into the given tensors (allocated when None) and return
  ``softmax_d`` = rowsum(dout * out) in fp32, [b, h, sq] (varlen [h, total_q]).

No autograd here: these run one pass each, on a kernel-style backend (triton or torch)
chosen by the dispatcher exactly as for the public functions (forcing and
``FLASH_ATTENTION_DEBUG`` apply).
"""
from __future__ import annotations

from .interface import (  # noqa: F401  (re-exported: flash_attn's module has them too)
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
)
from .kvcache import flash_attn_with_kvcache  # noqa: F401


def _get_block_size_n(device, head_dim, is_dropout, is_causal) -> int:
    """Key-block width by which ``S_dmask`` rows are normalised (flash_attn's tests read it).

    Our ``S_dmask`` holds ``exp(s - rowmax)`` with the max over all of a row's keys, i.e. one
    block as wide as any sequence, so this returns a width no sequence reaches.
    """
    return 1 << 30


def _forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
             causal, window_size_left, window_size_right, softcap, alibi_slopes, return_softmax, block_table=None):
    from .core import forward_pass

    if block_table is not None:  # paged K/V: the keys in use, gathered (paged.py)
        from .paged import gather_pages

        k, v = gather_pages(q, k, v, cu_seqlens_k, block_table)
    return forward_pass(q, k, v, dropout_p=dropout_p, softmax_scale=softmax_scale, causal=causal,
                        window_size=(window_size_left, window_size_right), softcap=softcap,
                        alibi_slopes=alibi_slopes, return_softmax=return_softmax, cu_seqlens_q=cu_seqlens_q,
                        cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)


def _flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal, window_size_left, window_size_right, softcap,
                        alibi_slopes, return_softmax):
    """-> (out [b, sq, h, dv], softmax_lse [b, h, sq] fp32, S_dmask or None, rng_state int64 [2])."""
    return _forward(q, k, v, None, None, 0, 0, dropout_p, softmax_scale, causal, window_size_left,
                    window_size_right, softcap, alibi_slopes, return_softmax)


def _flash_attn_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                               softmax_scale, causal, window_size_left=-1, window_size_right=-1, softcap=0.0,
                               alibi_slopes=None, return_softmax=False, block_table=None, leftpad_k=None,
                               seqused_k=None, zero_tensors=False):
    """-> (out [total_q, h, dv], softmax_lse [h, total_q] fp32, S_dmask or None, rng_state).

    ``leftpad_k`` and ``seqused_k`` are not implemented: passing one raises (never ignored).
    """
    for name, value in (("leftpad_k", leftpad_k), ("seqused_k", seqused_k)):
        if value is not None:
            raise ValueError(f"{name} is not supported by _flash_attn_varlen_forward here; allowed: None")
    return _forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
                    causal, window_size_left, window_size_right, softcap, alibi_slopes, return_softmax,
                    block_table)


def _backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
              max_seqlen_k, dropout_p, softmax_scale, causal, window_size_left, window_size_right, softcap,
              alibi_slopes, deterministic, rng_state):
    from .core import backward_pass

    grads = backward_pass(dout, q, k, v, out, softmax_lse, dropout_p=dropout_p, softmax_scale=softmax_scale,
                          causal=causal, window_size=(window_size_left, window_size_right), softcap=softcap,
                          alibi_slopes=alibi_slopes, deterministic=deterministic, rng_state=rng_state,
                          cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                          max_seqlen_k=max_seqlen_k)
    for dst, grad in zip((dq, dk, dv), grads):
        if dst is not None:
            dst.copy_(grad)
    o, do = out.float(), dout.float()
    delta = (o * do).sum(-1)  # [b, sq, h] or [total_q, h]
    return delta.transpose(-1, -2).contiguous() if cu_seqlens_q is None else delta.t().contiguous()


def _flash_attn_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p, softmax_scale, causal,
                         window_size_left, window_size_right, softcap, alibi_slopes, deterministic, rng_state=None):
    """Writes dq, dk, dv (those given; the others are computed and dropped) -> softmax_d [b, h, sq]."""
    return _backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, None, None, 0, 0, dropout_p, softmax_scale,
                     causal, window_size_left, window_size_right, softcap, alibi_slopes, deterministic, rng_state)


def _flash_attn_varlen_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
                                max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal, window_size_left,
                                window_size_right, softcap, alibi_slopes, deterministic, rng_state=None,
                                zero_tensors=False):
    """Varlen twin of ``_flash_attn_backward`` -> softmax_d [h, total_q]."""
    return _backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     max_seqlen_k, dropout_p, softmax_scale, causal, window_size_left, window_size_right, softcap,
                     alibi_slopes, deterministic, rng_state)


__all__ = [
    "_flash_attn_backward",
    "_flash_attn_forward",
    "_flash_attn_varlen_backward",
    "_flash_attn_varlen_forward",
    "_get_block_size_n",
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
]
