"""Dropout keys held on the device: what calls compiled on a GPU use, so that CUDA graphs (torch.compile's
mode="reduce-overhead") replay them with a new draw each time and no call reads the key on the host.

The kernels read such a key (an int64 tensor []) through ``Seed`` instead of the two int32 words
(kernels/common.py philox_key); both must give the same mask. The compiled path draws the key with the device's
generator (ops.py, philox.device_seed): on a GPU the tests check it against eager calls whose keys are drawn the same
way (``core.new_seed`` patched), under torch.compile's default mode and CUDA graphs.
"""
from __future__ import annotations

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd.params import AttnParams
from helpers import DEVICE, HAS_TRITON, empty_process_caches, randn

pytestmark = [pytest.mark.triton, pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")]
ON_GPU = DEVICE == "cuda"
DTYPE = torch.bfloat16 if ON_GPU else torch.float32
KEY = 0x5DEECE66D_2B7E1516 & (2**63 - 1)  # both words nonzero and distinct


@pytest.mark.parametrize("opts", [dict(causal=True), dict(softcap=3.0), dict(varlen=True, window=(5, 2))],
                         ids=["quads", "classic", "varlen-window"])
def test_a_key_on_the_device_gives_the_words_mask(opts):
    """Forward and backward with the key as a tensor equal those with the key's words, bit for bit; a key whose words
    are swapped gives another mask (the test can fail)."""
    from flash_attention_amd.launch import bwd, fwd

    opts = dict(opts)
    varlen = opts.pop("varlen", False)
    left, right = opts.pop("window", (-1, -1))
    torch.manual_seed(0)
    d = 16
    extra = {}
    if varlen:
        q, k, v, dout = (randn(29, 2, d, dtype=DTYPE) for _ in range(4))
        cu = torch.tensor([0, 11, 29], dtype=torch.int32, device=DEVICE)
        extra = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=18, max_seqlen_k=18)
    else:
        q, k, v, dout = (randn(2, 19, 2, d, dtype=DTYPE) for _ in range(4))
    words = AttnParams(softmax_scale=d ** -0.5, dropout_p=0.3, seed=KEY, window_left=left, window_right=right,
                       **opts, **extra)
    tensor = words._replace(seed=torch.tensor(KEY, dtype=torch.int64, device=DEVICE))
    swapped = words._replace(seed=torch.tensor((KEY & 0xFFFFFFFF) << 31 | KEY >> 32, dtype=torch.int64,
                                               device=DEVICE))
    out, lse = fwd.attention_forward(q, k, v, words)
    out_t, lse_t = fwd.attention_forward(q, k, v, tensor)
    assert torch.equal(out, out_t) and torch.equal(lse, lse_t)
    assert not torch.equal(out, fwd.attention_forward(q, k, v, swapped)[0])
    grads = bwd.attention_backward(dout, q, k, v, out, lse, words)
    grads_t = bwd.attention_backward(dout, q, k, v, out, lse, tensor)
    for g, g_t in zip(grads, grads_t, strict=True):
        assert torch.equal(g, g_t)
    assert not torch.equal(grads[0], bwd.attention_backward(dout, q, k, v, out, lse, swapped)[0])


@pytest.mark.parametrize("softcap", [0.0, 3.0], ids=["quads", "classic"])
def test_the_torch_backend_takes_a_key_tensor(softcap):
    """The PyTorch path (backends/torch_backend.py, philox.py) computes its masks from a key held in a tensor with
    tensor arithmetic (no synchronisation on a GPU): forward and backward equal those of the key as an int, bit for
    bit; a key one apart gives another mask."""
    from flash_attention_amd.backends import registry

    torch.manual_seed(2)
    q, k, v, dout = (randn(2, 19, 2, 16, dtype=DTYPE) for _ in range(4))
    backend = registry()["torch"]
    words = AttnParams(softmax_scale=0.25, causal=True, dropout_p=0.3, seed=KEY, softcap=softcap)
    results = []
    for params in (words, words._replace(seed=torch.tensor(KEY, device=DEVICE)),
                   words._replace(seed=torch.tensor(KEY + 1, device=DEVICE))):
        out, lse = backend.forward(q, k, v, params, {})
        results.append((out, lse, *backend.backward(dout, q, k, v, out, lse, params, None, {})[:3]))
    for a, b in zip(results[0], results[1], strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(results[0][0], results[2][0])


def test_flash_attn_private_passes_take_a_key_tensor():
    """core.forward_pass with the key in a tensor (what a captured call draws) returns it as rng_state [key, 0] on the
    key's device, and backward_pass with that rng_state gives the gradients of the key's words."""
    from flash_attention_amd import core

    torch.manual_seed(1)
    q, k, v, dout = (randn(1, 21, 2, 16, dtype=DTYPE) for _ in range(4))
    opts = dict(dropout_p=0.25, softmax_scale=0.25, causal=True, window_size=(-1, -1), softcap=0.0, alibi_slopes=None)
    with fa.use_backend("triton"):
        out, lse, _, rng = core.forward_pass(q, k, v, return_softmax=False, seed=KEY, **opts)
        out_t, lse_t, _, rng_t = core.forward_pass(q, k, v, return_softmax=False,
                                                   seed=torch.tensor(KEY, device=DEVICE), **opts)
        assert torch.equal(out, out_t) and torch.equal(lse, lse_t)
        assert rng_t.device == q.device and rng_t.tolist() == rng.tolist() == [KEY, 0]
        grads = core.backward_pass(dout, q, k, v, out, lse, deterministic=False, rng_state=rng, **opts)
        grads_t = core.backward_pass(dout, q, k, v, out, lse, deterministic=False, rng_state=rng_t, **opts)
    for g, g_t in zip(grads, grads_t, strict=True):
        assert torch.equal(g, g_t)


def _draw_like_compiled(monkeypatch):
    """Eager calls draw their keys as calls compiled on a GPU do: from the GPU's generator."""
    from flash_attention_amd import core
    from flash_attention_amd.philox import device_seed

    monkeypatch.setattr(core, "new_seed", lambda: int(device_seed(torch.device(DEVICE))))


def _loss_and_grads(fn, leaves, seed):
    torch.manual_seed(seed)
    out = fn(*leaves)
    out.float().square().sum().backward()
    grads = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    return out.detach(), grads


def _attn(q, k, v):  # softcap: the triton backend on a GPU
    return fa.flash_attn_func(q, k, v, dropout_p=0.3, causal=True, softcap=3.0)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a GPU")
def test_forward_op_with_a_key_on_the_device():
    """The forward op takes a key on the device as it is: its rng_state output is then empty on q's device (the
    backward reads the key itself), and the fake kernel agrees."""
    import flash_attention_amd.ops  # noqa: F401  (registers the custom ops)

    q, k, v = (randn(1, 8, 2, 16, dtype=DTYPE) for _ in range(3))
    op = torch.ops.flash_attention_amd.fwd.default
    args = (q, k, v, "triton", 0.25, True, -1, 0, 0.0, 0.3, None, None, None, 0, 0, False, False, False, None,
            None, None, None, None, torch.tensor(KEY, device=DEVICE))
    rng_state = op(*args)[2]
    assert rng_state.device == q.device and rng_state.numel() == 0
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a GPU")
@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_compiled_dropout_matches_eager_with_device_keys(monkeypatch, backend):
    """Compiled (Inductor) with dropout on our kernel-style backends: outputs and gradients equal eager calls drawing
    their keys from the same generator state; no host synchronisation in the compiled calls."""
    torch._dynamo.reset()
    _draw_like_compiled(monkeypatch)
    q, k, v = (randn(2, 128, h, 64, dtype=DTYPE, requires_grad=True) for h in (4, 2, 2))

    def attn(q, k, v):
        with fa.use_backend(backend):
            return _attn(q, k, v)

    compiled = torch.compile(attn, fullgraph=True)
    _loss_and_grads(compiled, (q, k, v), 1)  # compiles
    torch.cuda.set_sync_debug_mode("error")
    try:
        out_c, grads_c = _loss_and_grads(compiled, (q, k, v), 5)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    out_e, grads_e = _loss_and_grads(attn, (q, k, v), 5)
    assert torch.equal(out_c, out_e)
    for a, b in zip(grads_c, grads_e, strict=True):
        torch.testing.assert_close(a, b)
    assert not torch.equal(out_c, _loss_and_grads(compiled, (q, k, v), 6)[0])  # another key, another mask


def _ref_with_mask(q, k, v, keep, p, softcap):
    """float64 causal softcapped attention with dropout mask ``keep`` [b, h, sq, sk] (True: kept)."""
    from flash_attention_amd.reference import scores_ref

    s = scores_ref(q, k, causal=True, softcap=softcap)
    probs = torch.softmax(s, dim=-1) * keep / (1 - p)
    return torch.einsum("bhij,bjhd->bihd", probs, v.repeat_interleave(q.shape[2] // k.shape[2], dim=2))


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a GPU")
def test_compiled_checkpointed_dropout_recomputes_its_mask(monkeypatch):
    """Activation checkpointing around a compiled call with dropout: the backward's recomputed forward reads the key
    the forward drew, so the gradients are those of the mask the forward used (S_dmask, return_attn_probs: dropped
    elements negative), checked against float64 math with that mask. (AOTAutograd draws the key of a recomputed
    region from its own copy of the GPU generator's state, so this mask is not the eager call's.) The process's
    caches start empty: the first traced call is inside the region (memo.py)."""
    from torch.utils.checkpoint import checkpoint

    from helpers import assert_matches

    empty_process_caches(monkeypatch)
    torch._dynamo.reset()
    q, k, v = (randn(2, 128, h, 64, dtype=DTYPE, requires_grad=True) for h in (4, 2, 2))
    dout = randn(2, 128, 4, 64, dtype=DTYPE)

    def attn(q, k, v):
        out, _, probs = fa.flash_attn_func(q, k, v, dropout_p=0.3, causal=True, softcap=3.0, return_attn_probs=True)
        return out, probs

    def f(q, k, v):
        return checkpoint(attn, q, k, v, use_reentrant=False)

    out, probs = torch.compile(f, fullgraph=True)(q, k, v)
    out.backward(dout)
    keep = probs[:, :, :128, :128] >= 0
    visible = torch.ones(128, 128, dtype=torch.bool, device=DEVICE).tril()
    assert 0.65 < keep[..., visible].float().mean() < 0.75  # about 1 - p of the visible elements kept
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = _ref_with_mask(q64, k64, v64, keep, 0.3, 3.0)
    ref.backward(dout.double())
    assert_matches(out, ref)
    for name, g, g64 in zip("qkv", (q.grad, k.grad, v.grad), (q64.grad, k64.grad, v64.grad), strict=True):
        assert_matches(g, g64, name=f"d{name}")


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a GPU")
def test_cuda_graphs_replay_dropout(monkeypatch):
    """mode="reduce-overhead" with dropout on the triton backend: no graph skipped, each replay a new mask, and a
    replay after torch.manual_seed(s) equals the eager calls' result after the same seeding (keys drawn alike)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    _draw_like_compiled(monkeypatch)
    q, k, v = (randn(2, 128, h, 64, dtype=DTYPE) for h in (4, 2, 2))
    compiled = torch.compile(_attn, fullgraph=True, mode="reduce-overhead")
    outs = []
    for i in range(4):  # warm-up, recording, replays
        torch.manual_seed(10 + i)
        outs.append(compiled(q, k, v).clone())
    assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
    torch.manual_seed(13)
    eager = _attn(q, k, v)
    assert torch.equal(outs[3], eager)
    assert not torch.equal(outs[2], outs[3])


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a GPU")
@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_captured_eager_calls_draw_a_new_key_each_replay(monkeypatch, backend):
    """Eager calls captured into a CUDA graph (torch.cuda.graph) with dropout on our kernel-style backends draw their
    key on the GPU (core._capture_key): each replay a new mask, and a replay after torch.manual_seed(s) gives the eager
    result of keys drawn alike, forward and backward. A key drawn on the CPU while capturing was a constant of the
    graph: every replay the same mask."""
    q, k, v = (randn(2, 128, h, 64, dtype=DTYPE, requires_grad=True) for h in (4, 2, 2))
    dout = randn(2, 128, 4, 64, dtype=DTYPE)

    def step():
        with fa.use_backend(backend):
            out = _attn(q, k, v)
        return (out, *torch.autograd.grad(out, (q, k, v), dout))

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # plans and kernels ready before the capture
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    replays = []
    for s in (21, 22):
        torch.manual_seed(s)
        graph.replay()
        replays.append([t.clone() for t in static])
    assert not torch.equal(replays[0][0], replays[1][0])
    _draw_like_compiled(monkeypatch)
    torch.manual_seed(22)
    for got, want in zip(replays[1], step(), strict=True):
        assert torch.equal(got, want)
