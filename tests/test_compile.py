"""torch.compile traces through our custom ops with fullgraph=True (no graph break), forward and
backward, and gives the eager result (dropout included: same seed, same mask)."""
import pytest
import torch

import flash_attention_amd as fa
from helpers import DEVICE, empty_process_caches, randn


def _outputs_and_grads(fn, leaves, args, seed=None):
    """fn(*args) (a tensor or a tuple of them) and the gradients it gives ``leaves`` (None where none) for the loss
    sum(out ** 2) + sum(lse), every leaf's grad reset after."""
    if seed is not None:
        torch.manual_seed(seed)
    out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    (outs[0].square().sum() + sum(o.sum() for o in outs[1:])).backward()
    grads = [None if t.grad is None else t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    return outs, grads


def _eager_keys_like_compiled(monkeypatch):
    """On a GPU, calls compiled for our triton / torch backends draw their dropout keys from the GPU's generator
    (ops.py: CUDA graphs replay the draw); the eager calls they are compared with draw theirs alike
    (test_device_seed.py)."""
    if DEVICE == "cuda":
        from flash_attention_amd import core
        from flash_attention_amd.philox import device_seed

        monkeypatch.setattr(core, "new_seed", lambda: int(device_seed(torch.device(DEVICE))))


def _assert_compiled_matches_eager(f, compiled, leaves, args, seed=None):
    """Outputs and gradients within rounding: on the CPU an eager training call may keep its probabilities
    (backends/torch_saved.py) where the compiled graph's op recomputes them, two exact paths that round apart in the
    last bits of fp32 (a gradient missed or counted twice differs by far more)."""
    (outs_c, grads_c), (outs_e, grads_e) = (_outputs_and_grads(fn, leaves, args, seed) for fn in (compiled, f))
    for a, b in zip(outs_c, outs_e, strict=True):
        torch.testing.assert_close(a, b, **_TOL.get(a.dtype, {}))
    for a, b in zip(grads_c, grads_e, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, **_TOL.get(a.dtype, {}))


_TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5)}  # (torch.testing's fp32 defaults: 1.3e-6 / 1e-5)


@pytest.mark.parametrize("backend,hk,kwargs", [
    ("auto", 4, dict(causal=True)),  # sdpa on CPU and on an H100 (d=64, no GQA)
    ("auto", 2, dict(causal=True, softcap=4.0)),  # triton on a GPU, torch on CPU
    ("torch", 2, dict(causal=True, softcap=4.0, window_size=(6, 0), dropout_p=0.2)),
])
def test_compile_fullgraph_matches_eager(backend, hk, kwargs, monkeypatch):
    torch._dynamo.reset()
    _eager_keys_like_compiled(monkeypatch)  # the torch row's dropout, on a GPU
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    q, k, v = (randn(2, 24, h, 64, dtype=dtype, requires_grad=True) for h in (4, hk, hk))

    def f(q, k, v):
        with fa.use_backend(backend):
            return fa.flash_attn_func(q, k, v, **kwargs)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    _assert_compiled_matches_eager(f, compiled, (q, k, v), (q, k, v), seed=7)


def test_compile_traces_the_backends_first_availability_check(monkeypatch):
    """The triton backend's availability (the installed Triton's version, its kernels' import) is read on the
    first call that considers it, which may be a traced one: fullgraph tracing must get through that check."""
    pytest.importorskip("triton")
    from flash_attention_amd.backends import triton_backend
    from flash_attention_amd.launch import fwd_ws

    torch._dynamo.reset()
    monkeypatch.setattr(triton_backend, "_available", [])
    monkeypatch.setattr(fwd_ws, "_ws_triton", [])
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    q, k, v = (randn(2, 24, 2, 64, dtype=dtype, requires_grad=True) for _ in range(3))

    def f(q, k, v):
        with fa.use_backend("triton"):
            return fa.flash_attn_func(q, k, v, causal=True)

    out = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    assert triton_backend._available == []  # computed while tracing, kept by the first eager call (memo.py)
    torch.testing.assert_close(out, f(q, k, v))
    assert triton_backend._available == [None]


@pytest.mark.parametrize("backend", ["sdpa", "auto"])
def test_compile_bool_mask_fullgraph_matches_eager(backend):
    """A key-masked call (a sequence the mask hides entirely included) through the sdpa backend (its
    masked route: the CPU's default) and the automatic choice (triton on a GPU) traces without a graph
    break and gives the eager result, forward and backward."""
    torch._dynamo.reset()
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    q, k, v = (randn(3, 24, 4, 64, dtype=dtype, requires_grad=True) for _ in range(3))
    mask = (torch.arange(24, device=q.device)[None, :] < torch.tensor([[24], [7], [0]], device=q.device))
    mask = mask[:, None, None, :]

    def f(q, k, v, mask):
        with fa.use_backend(backend):
            return fa.flash_attn_func(q, k, v, attn_bias=mask)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    out_c = compiled(q, k, v, mask)
    out_c.square().sum().backward()
    grads_c = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    out_e = f(q, k, v, mask)
    out_e.square().sum().backward()
    assert (out_c[2] == 0).all()
    torch.testing.assert_close(out_c, out_e)
    for gc, t in zip(grads_c, (q, k, v)):
        torch.testing.assert_close(gc, t.grad)


def test_custom_op_passes_opcheck():
    import flash_attention_amd.ops  # noqa: F401  (registers the custom ops; nothing does at package import)

    q, k, v = (randn(1, 8, 2, 16, requires_grad=True) for _ in range(3))
    args = (q, k, v, "torch", 0.25, True, -1, 0, 0.0, 0.0, None, None, None, 0, 0, False, False, False, None, None)
    utils = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.flash_attention_amd.fwd.default, args, test_utils=utils)
    with torch.no_grad():
        out, lse, rng_state, _ = torch.ops.flash_attention_amd.fwd.default(*args)
    dout, dlse = randn(*out.shape), randn(*lse.shape)
    q, k, v = (t.detach() for t in (q, k, v))  # the backward op is not differentiable (no double backward)
    bwd_args = (dout, dlse, q, k, v, out, lse, rng_state, "torch", 0.25, True, -1, 0, 0.0, 0.0, None, None, None, 0,
                0, False, False, None, None, False)
    torch.library.opcheck(torch.ops.flash_attention_amd.bwd.default, bwd_args, test_utils=utils[:1] + utils[2:])


def test_exported_module_is_differentiable():
    """A compiled call reaches the ops' Python at once: their autograd is _CompiledFn's, traced into the graph
    (torch.library.custom_op's autograd and per-device kernels, in Python, ran on every compiled call: 15-25 us of
    host time, benchmarks/compiled_host_cpu.py). An exported program calls the forward op itself: on tensors that
    need gradients its small autograd kernel routes the call through _CompiledFn, so the gradients are right
    (without it the autograd fallback only warned, and k and v got none)."""
    import flash_attention_amd.ops  # noqa: F401

    assert not torch._C._dispatch_has_kernel_for_dispatch_key("flash_attention_amd::bwd", "Autograd")

    class M(torch.nn.Module):
        def forward(self, q, k, v):
            with fa.use_backend("torch"):
                return fa.flash_attn_func(q, k, v, causal=True, softcap=3.0)

    q, k, v = (randn(2, 16, 4, 32) for _ in range(3))
    module = torch.export.export(M(), (q, k, v)).module()
    torch.testing.assert_close(module(q, k, v), M()(q, k, v))
    for t in (q, k, v):
        t.requires_grad_()
    out = module(q, k, v)
    (out.square().sum() + q.sum()).backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    ref = M()(q, k, v)
    (ref.square().sum() + q.sum()).backward()
    torch.testing.assert_close(out, ref)
    for g, t in zip(grads, (q, k, v)):
        torch.testing.assert_close(g, t.grad)


@pytest.mark.parametrize("shared", ["qkv", "kv"])
def test_compile_shared_tensors_match_eager(shared):
    """The same tensor passed as q, k and v (or as k and v): the compiled autograd takes each tensor once and sums
    its gradients, as eager autograd does."""
    torch._dynamo.reset()
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    x, y = randn(2, 24, 2, 32, dtype=dtype, requires_grad=True), randn(2, 24, 2, 32, dtype=dtype, requires_grad=True)

    def f(x, y):
        with fa.use_backend("torch"):
            return fa.flash_attn_func(x, x, x, causal=True) if shared == "qkv" else fa.flash_attn_func(
                y, x, x, causal=True)

    _assert_compiled_matches_eager(f, torch.compile(f, fullgraph=True, backend="aot_eager"), (x, y), (x, y))


def test_compile_varlen_fullgraph_matches_eager():
    torch._dynamo.reset()
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    lens = [5, 17, 9]
    cu = torch.tensor([0, 5, 22, 31], dtype=torch.int32, device=DEVICE)
    q, k, v = (randn(sum(lens), h, 32, dtype=dtype, requires_grad=True) for h in (4, 2, 2))

    def f(q, k, v):
        out, lse, _ = fa.flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True,
                                                return_attn_probs=True)
        return out, lse

    _assert_compiled_matches_eager(f, torch.compile(f, fullgraph=True, backend="aot_eager"), (q, k, v), (q, k, v))


def test_compile_kvcache_fullgraph_matches_eager():
    """Rotary, the in-place append and the attention: one custom op, caches mutated as in eager."""
    torch._dynamo.reset()
    from flash_attention_amd.kvcache import flash_attn_with_kvcache

    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    kc, vc = randn(2, 32, 2, 16, dtype=dtype), randn(2, 32, 2, 16, dtype=dtype)
    q, k, v = randn(2, 1, 4, 16, dtype=dtype), randn(2, 1, 2, 16, dtype=dtype), randn(2, 1, 2, 16, dtype=dtype)
    seqlens = torch.tensor([5, 9], dtype=torch.int32, device=DEVICE)
    cos, sin = randn(64, 4), randn(64, 4)

    def f(q, kc, vc, k, v, seqlens):
        return flash_attn_with_kvcache(q, kc, vc, k=k, v=v, rotary_cos=cos, rotary_sin=sin, cache_seqlens=seqlens,
                                       causal=True, return_softmax_lse=True)

    kc_before = kc.clone()
    kc_c, vc_c = kc.clone(), vc.clone()
    out_c, lse_c = torch.compile(f, fullgraph=True, backend="aot_eager")(q, kc_c, vc_c, k, v, seqlens)
    out_e, lse_e = f(q, kc, vc, k, v, seqlens)
    torch.testing.assert_close(out_c, out_e)
    torch.testing.assert_close(lse_c, lse_e)
    assert torch.equal(kc_c, kc) and torch.equal(vc_c, vc)
    assert not torch.equal(kc_c, kc_before)  # the new k was appended


def test_compiled_calls_reuse_their_launch_plans(monkeypatch):
    """The custom ops keep their backend's launch plans per call signature (ops._slot), as eager calls do: a
    repeated compiled call plans neither its forward nor its backward again (before, each planned both anew: host
    time on every call), and another signature gets plans of its own."""
    pytest.importorskip("triton")
    from flash_attention_amd import ops
    from flash_attention_amd.launch import bwd as launch_bwd
    from flash_attention_amd.launch import fwd as launch_fwd

    torch._dynamo.reset()
    monkeypatch.setattr(ops, "_SLOTS", {})
    planned = []

    def counting(real, name):
        def plan(*args, **kwargs):
            planned.append(name)
            return real(*args, **kwargs)
        return plan

    for module, name in ((launch_fwd, "plan_forward"), (launch_bwd, "plan_backward")):
        monkeypatch.setattr(module, name, counting(getattr(module, name), name))
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32

    def f(q, k, v):
        with fa.use_backend("triton"):
            return fa.flash_attn_func(q, k, v, causal=True)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    for s, calls in ((24, 3), (40, 2)):
        q, k, v = (randn(2, s, 2, 32, dtype=dtype, requires_grad=True) for _ in range(3))
        for _ in range(calls):
            out = compiled(q, k, v)
            out.square().sum().backward()
        assert planned == ["plan_forward", "plan_backward"], planned  # the first compiled call's, once
        planned.clear()  # (the eager reference below plans through core.py's own plans)
        grads = [t.grad.clone() / calls for t in (q, k, v)]
        for t in (q, k, v):
            t.grad = None
        ref = f(q, k, v)
        ref.square().sum().backward()
        torch.testing.assert_close(out, ref)
        for g, t in zip(grads, (q, k, v)):
            torch.testing.assert_close(g, t.grad)
        planned.clear()


def test_forward_op_holds_no_cpu_tensor_without_dropout():
    """Without dropout the forward op's seed output is an empty tensor on q's device, so that a compiled graph holds
    no CPU tensor (torch.compile's CUDA graphs skip graphs with one); with dropout it is the seed, on the CPU."""
    import flash_attention_amd.ops  # noqa: F401  (registers the custom ops)

    q, k, v = (randn(1, 8, 2, 16) for _ in range(3))
    op = torch.ops.flash_attention_amd.fwd.default
    head, tail = (q, k, v, "torch", 0.25, True, -1, 0, 0.0), (None, None, None, 0, 0, False, False, False, None, None)
    rng_state = op(*head, 0.0, *tail)[2]
    assert rng_state.device == q.device and rng_state.dtype == torch.int64 and rng_state.numel() == 0
    torch.manual_seed(3)
    rng_state = op(*head, 0.3, *tail)[2]
    assert rng_state.device.type == "cpu" and rng_state.numel() == 1 and rng_state.item() != 0
    for p in (0.0, 0.3):  # the fake kernel agrees
        torch.library.opcheck(op, (*head, p, *tail), test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("backend,hk,kwargs", [
    ("auto", 4, dict()),  # sdpa on CPU; enable_gqa is a bool there, not a symbolic one
    ("auto", 2, dict(causal=True)),
    ("torch", 2, dict(causal=True, softcap=4.0, window_size=(6, 0))),
])
def test_compile_dynamic_shapes_match_eager(backend, hk, kwargs):
    """torch.compile(dynamic=True): every size is symbolic while tracing, the head dims included (the validation
    specialises those: kernel constants), and floats too; two sequence lengths through one compiled graph, each
    equal to eager, gradients included."""
    torch._dynamo.reset()
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32

    def f(q, k, v):
        with fa.use_backend(backend):
            return fa.flash_attn_func(q, k, v, **kwargs)

    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    for s in (24, 40):
        q, k, v = (randn(2, s, h, 32, dtype=dtype, requires_grad=True) for h in (4, hk, hk))
        _assert_compiled_matches_eager(f, compiled, (q, k, v), (q, k, v))


def test_compile_dynamic_varlen_matches_eager():
    torch._dynamo.reset()
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32

    def f(q, k, v, cu, max_seqlen):
        out, lse, _ = fa.flash_attn_varlen_func(q, k, v, cu, cu, max_seqlen, max_seqlen, causal=True,
                                                return_attn_probs=True)
        return out, lse

    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    for lens in ([5, 17, 9], [3, 8, 11, 6]):
        cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
        q, k, v = (randn(sum(lens), h, 32, dtype=dtype, requires_grad=True) for h in (4, 2, 2))
        _assert_compiled_matches_eager(f, compiled, (q, k, v), (q, k, v, cu, max(lens)))


def test_every_backends_availability_check_traces():
    """Each backend's availability may first be asked by a traced call (on sm90 the rules ask for FA4 and
    flash_attn): a check that imports a package runs while tracing, its result taken as a constant (before, FA4's
    and flash_attn's importlib calls broke the graph: fullgraph raised on an H100, benchmarks/results/run36)."""
    from flash_attention_amd.backends import registry

    torch._dynamo.reset()
    names = sorted(registry())

    def f(x):
        return x + sum(1 << i for i, name in enumerate(names) if registry()[name].available() is None)

    expected = sum(1 << i for i, name in enumerate(names) if registry()[name].available() is None)
    out = torch.compile(f, fullgraph=True, backend="eager")(torch.zeros(2))
    assert out.tolist() == [float(expected)] * 2


def test_compiled_activation_checkpointing_with_dropout_matches_eager(monkeypatch):
    """torch.compile of a region under activation checkpointing (torch.utils.checkpoint: the backward recomputes the
    forward) with attention dropout: the recomputed forward draws the same mask, as in eager (the seed is an op of the
    graph, flash_attention_amd::seed, seeded by torch's CPU generator; drawn inside the forward op, the recomputation
    drew another: wrong gradients). The first call of the process traced inside the region: the library's once-per-
    process values are not written while tracing (memo.py; a write there is a side effect the region refuses)."""
    from torch.utils.checkpoint import checkpoint

    if DEVICE == "cuda":  # the key is the GPU's there, drawn by AOTAutograd from its own copy of the generator's state
        pytest.skip("on a GPU: test_device_seed.py::test_compiled_checkpointed_dropout_recomputes_its_mask")
    empty_process_caches(monkeypatch)
    torch._dynamo.reset()
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    q, k, v = (randn(2, 24, h, 32, dtype=dtype, requires_grad=True) for h in (4, 2, 2))

    def attn(q, k, v):  # softcap: triton on a GPU, torch on the CPU (our ops either way)
        return fa.flash_attn_func(q, k, v, dropout_p=0.3, causal=True, softcap=3.0)

    def f(q, k, v):
        return checkpoint(attn, q, k, v, use_reentrant=False)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    _assert_compiled_matches_eager(f, compiled, (q, k, v), (q, k, v), seed=5)
    # and against the plain eager call (no checkpoint), which the recomputation must reproduce
    _assert_compiled_matches_eager(attn, compiled, (q, k, v), (q, k, v), seed=5)


def test_a_fresh_process_compiles_once(monkeypatch):
    """The first compiled call of a process traces while the library's once-per-process caches (the backends, the
    launchers, the environment's keys, the device's arch) are empty, and its run fills them: a guard on their
    state compiled the graph again on the second call (a model's whole graph, in a fresh process). memo.py neither
    reads nor writes them while tracing, so the second call reuses the graph."""
    from flash_attention_amd import backends

    empty_process_caches(monkeypatch)
    torch._dynamo.reset()
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    q, k, v = (randn(2, 24, h, 32, dtype=dtype, requires_grad=True) for h in (4, 2, 2))

    def f(q, k, v):
        return fa.flash_attn_func(q, k, v, causal=True, softcap=3.0)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(3):
            compiled(q, k, v).sum().backward()
    assert backends._registry  # the runs outside tracing kept it


def test_compiled_dropout_calls_draw_their_own_seeds(monkeypatch):
    """Two attention calls with dropout in one compiled graph draw two seeds, in order, as eager calls do (the seed
    ops take the call's tensors: AOTAutograd's CSE merged two argument-less seed ops into one)."""
    torch._dynamo.reset()
    _eager_keys_like_compiled(monkeypatch)
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    q, k, v = (randn(2, 24, 2, 32, dtype=dtype, requires_grad=True) for _ in range(3))

    def f(q, k, v):
        first = fa.flash_attn_func(q, k, v, dropout_p=0.3, softcap=3.0)
        return first + fa.flash_attn_func(first, k, v, dropout_p=0.3, softcap=3.0)

    _assert_compiled_matches_eager(f, torch.compile(f, fullgraph=True, backend="aot_eager"), (q, k, v), (q, k, v),
                                   seed=9)
