"""launch/runtime.py: the key of a cached direct launch against Triton 3.6's own specialisation.

The direct path launches a compiled kernel again whenever the key of a launch (``launch_key``)
equals the key of a launch it compiled. That is only correct if equal keys imply equal
specialisations: this test builds Triton's own binder (``create_function_from_signature``, what
``JITFunction.run`` calls) for the CUDA backend (sm90) and the HIP backend (gfx942, buffer ops on
and off) on the CPU, and checks that implication over randomised arguments of every real kernel
(tensors of several alignments and storage sizes below and above 2 GiB, ints equal to 1, multiples
of 16, past int32, the do-not-specialise dropout seeds, floats, None pointers, stride tuples).
"""
from __future__ import annotations

import random

import pytest
import torch

triton = pytest.importorskip("triton")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import make_backend  # noqa: E402
from triton.runtime.jit import JITFunction, create_function_from_signature  # noqa: E402

from flash_attention_amd.launch import bwd, bwd_ws, decode, fwd, fwd_ws, runtime  # noqa: E402

_INTS = (0, 1, 2, 16, 17, 32, 48, -1, -16, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**40, 2**40 + 3, 2**63)
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _jit(kernel) -> JITFunction:
    """The kernel as a real JITFunction (the tests run it in the interpreter otherwise)."""
    if isinstance(kernel, JITFunction):
        return kernel
    return JITFunction(kernel.fn, **kernel.kwargs)


def _tensor(rng: random.Random, elem_type: str):
    """A meta tensor (no memory) of the type's dtype; random offset (alignment) and storage size
    (below or above 2**31 - 1 bytes)."""
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "i32": torch.int32,
             "u8": torch.uint8}.get(elem_type, rng.choice(_DTYPES))
    if rng.random() < 0.2:
        dtype = rng.choice(_DTYPES)  # another dtype than the signature's: the key must tell
    size = rng.choice((64, 4096, 2**31 // dtype.itemsize - 8, 2**31 // dtype.itemsize + 64, 2**32 // dtype.itemsize))
    base = torch.empty(size, dtype=dtype, device="meta")
    return base[rng.choice((0, 0, 1, 3, 8, 16, 24))]


def _value(rng: random.Random, ty, name: str):
    if isinstance(ty, tuple):  # strides, sizes, score scalars (ints and floats), descale pointers
        return tuple(rng.choice(_INTS[:10]) if t == "i32" else _value(rng, t, name) for t in ty)
    if ty == "constexpr":
        return None if name[0].isupper() else rng.choice((1, 2, 8))  # None pointers; group
    if ty.startswith("*"):
        return _tensor(rng, ty[1:])
    if ty == "fp32":
        return rng.choice((0.0, 1.0, 0.125, -3.5, 30.0))
    return rng.choice(_INTS)


def _cases():
    specs = []
    for mod, arch in ((fwd, "sm90"), (fwd, "gfx942"), (bwd, "gfx942"), (bwd, "sm90"), (decode, "sm90"),
                      (fwd_ws, "sm90"), (bwd_ws, "sm90")):
        by_kernel: dict = {}
        for spec in mod.compile_specs(arch):
            if any(isinstance(t, str) and t.startswith("tensordesc") for t in spec.signature.values()):
                continue
            by_kernel.setdefault(spec.kernel, []).append(spec)
        for group in by_kernel.values():
            specs += group[:: max(1, len(group) // 3)]  # a few variants of each kernel
    return specs


@pytest.mark.parametrize("target,buffer_ops", [(("cuda", 90, 32), False), (("hip", "gfx942", 64), True),
                                               (("hip", "gfx942", 64), False)], ids=["sm90", "gfx942", "gfx942-nobuf"])
def test_equal_keys_mean_equal_specialisations(target, buffer_ops, monkeypatch):
    monkeypatch.setattr(triton.knobs.amd, "use_buffer_ops", buffer_ops)
    backend = make_backend(GPUTarget(*target))
    rng = random.Random(1234)
    collisions = 0
    for spec in _cases():
        fn = _jit(spec.fn)
        binder = create_function_from_signature(fn.signature, fn.params, backend)
        names = [p.name for p in fn.params if not p.is_constexpr]
        constexprs = {p.name: spec.constexprs[p.name] for p in fn.params if p.is_constexpr}
        seen: dict = {}
        types = [spec.signature.get(n, "i32") for n in names]
        base = [_value(rng, t, n) for t, n in zip(types, names)]
        for _ in range(150):  # variations of one launch: some arguments drawn anew each time
            args = tuple(_value(rng, t, n) if rng.random() < 0.2 else b for t, n, b in zip(types, names, base))
            key = runtime.launch_key(fn, args, constexprs, {"num_warps": 4}, 0, buffer_ops, False, None)
            specialisation = repr(binder(*args, **constexprs)[1])
            if key in seen:
                collisions += 1
                assert seen[key] == specialisation, (spec.label, key)
            seen[key] = specialisation
    assert collisions > 50  # the randomisation produced equal keys from different arguments


def test_seed_words_do_not_change_the_key():
    """The dropout seed (do_not_specialize) is keyed by its int range only: new seeds, same kernel."""
    fn = _jit(fwd.compile_specs("sm90")[0].fn)
    names = [p.name for p in fn.params if not p.is_constexpr]
    args = [0] * len(names)
    args[names.index("sizes")] = (4, 1, 16, 16, 1)  # nheads, group, seqlen_q, seqlen_k, num_m_blocks
    keys = set()
    for seed in (1, 16, 12345, -7, 2**31 - 1):
        args[names.index("seed_lo")] = seed
        keys.add(runtime.launch_key(fn, tuple(args), {}, {}, 0, False, False, None))
    assert len(keys) == 1
    args[names.index("sizes")] = (4, 1, 17, 16, 1)  # a specialised int (seqlen_q): by value
    assert runtime.launch_key(fn, tuple(args), {}, {}, 0, False, False, None) not in keys


def test_unknown_argument_kinds_fall_back():
    fn = _jit(decode.compile_specs("sm90")[0].fn)
    with pytest.raises(runtime.Unkeyable):
        runtime.launch_key(fn, (object(),), {}, {}, 0, False, False, None)


def test_plan_slots_key_every_argument_that_changes(monkeypatch):
    """A plan's KernelSlot keys only its ``dynamic`` positions: across calls of one signature
    (new tensors, dout of other strides, new dropout seeds, dlse or not) every other argument
    must be the same value."""
    from flash_attention_amd.params import AttnParams

    seen: dict = {}

    def record(self, grid, device, args, context=False, fast=None, pointers=None):
        seen.setdefault(id(self), []).append((self, args, fast))
        if pointers is not None:  # a launcher's own pointers: the tensors' data_ptr, the rest as given
            assert len(pointers) == len(args)
            for a, p in zip(args, pointers):
                assert p == a.data_ptr() if type(a) is torch.Tensor else p is a

    monkeypatch.setattr(runtime.KernelSlot, "launch", record)
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # launches are recorded, never run
    b, s, h, d = 2, 20, 4, 16
    params = AttnParams(softmax_scale=0.25, causal=True, window_right=0, dropout_p=0.1,
                        alibi_slopes=torch.rand(h, device=dev), diag_offset=3, dropout_offset_q=2)
    fslot, bslot = {}, {}
    for seed, transpose in ((5, False), (2**40 + 7, True), (9, False)):
        p = params._replace(seed=seed)
        q, k, v = (torch.randn(b, s, h, d, device=dev) for _ in range(3))
        out, lse = fwd.attention_forward(q, k, v, p, fslot)
        dout = torch.randn(b, h, s, d, device=dev).transpose(1, 2) if transpose else torch.randn(b, s, h, d, device=dev)
        dlse = torch.randn(b, h, s, device=dev) if transpose else None
        bwd.attention_backward(dout, q, k, v, out, lse, p, slot=bslot, dlse=dlse)
    # forward, preprocess, dK/dV, dQ (no dQ kernel where the row adds dQ by atomics: sm90 dropout, d <= 64;
    # no preprocess kernel where the dQ kernel computes delta)
    plan = bslot["bwd"]
    _check_slot_calls(seen, 3 if plan.use_atomic or plan.delta_in_dq else 4)


def _check_slot_calls(seen: dict, n_slots: int) -> None:
    """Three recorded launches per KernelSlot: the fast keys imply equal launch keys, every
    parameter is passed in order (runtime._run's direct-path conditions), and the arguments
    outside the slot's dynamic positions are the same value on every call."""
    assert len(seen) == n_slots
    for calls in seen.values():
        (slot, first, fast1), (_, second, fast2), (_, third, fast3) = calls
        flags = runtime.fn_info(_jit(slot.fn))[0]
        full = [tuple(runtime._key(a[i], flags[i], False) for i in slot.dynamic) for a in (first, second, third)]
        assert fast1 is not None and fast1 == fast3 and full[0] == full[2], slot.fn
        assert (fast1 == fast2) <= (full[0] == full[1]), slot.fn
        fn = _jit(slot.fn)
        assert runtime.fn_info(fn)[1] == len(first)
        assert list(fn.arg_names) == list(fn.arg_names[:len(first)]) + list(slot.constexprs)
        for i, (a, c) in enumerate(zip(first, second)):
            if i not in slot.dynamic:
                assert type(a) is type(c) and a == c, (slot.fn, i, a, c)


@pytest.mark.parametrize("merge", [True, False])
def test_decode_slots_key_every_argument_that_changes(monkeypatch, merge):
    """The decode, combine (when the split kernel does not merge its splits) and append launches of
    one kvcache plan (launch/decode.py): new tensors each call (q misaligned on the second), the same
    plan."""
    from flash_attention_amd.params import AttnParams

    monkeypatch.setattr(decode, "MERGE_IN_SPLIT", merge)
    seen: dict = {}

    def record(self, grid, device, args, context=False, fast=None, pointers=None):
        seen.setdefault(id(self), []).append((self, args, fast))
        if pointers is not None:  # a launcher's own pointers: the tensors' data_ptr, the rest as given
            assert len(pointers) == len(args)
            for a, p in zip(args, pointers):
                assert p == a.data_ptr() if type(a) is torch.Tensor else p is a

    monkeypatch.setattr(runtime.KernelSlot, "launch", record)
    monkeypatch.setattr(runtime, "launch_context", lambda device: (0, False, False, None))  # as on a GPU
    b, h, hk, d, cap = 2, 4, 2, 32, 40
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    slot: dict = {}
    for offset in (0, 1, 0):
        flat = torch.randn(b * h * d + offset, device=dev)
        q = flat[offset:].view(b, 1, h, d)
        kc, vc = torch.randn(b, cap, hk, d, device=dev), torch.randn(b, cap, hk, d, device=dev)
        knew, vnew = torch.randn(b, 1, hk, d, device=dev), torch.randn(b, 1, hk, d, device=dev)
        lens = decode.append_kv(kc, vc, knew, vnew, torch.tensor([5, 30], dtype=torch.int32, device=dev), slot=slot)
        decode.decode(q, kc, vc, lens, AttnParams(softmax_scale=0.2), num_splits=3, slot=slot)
    assert {c[0][0].fn.__name__ for c in seen.values()} == {"decode_split_kernel", "kv_append_kernel",
                                                            *(() if merge else ("decode_combine_kernel",))}
    _check_slot_calls(seen, 2 if merge else 3)


def test_direct_launches_pass_tensors_as_pointers(monkeypatch):
    """A direct launch gives Triton's C launcher each tensor as its data_ptr (an int: the launcher then
    skips its per-tensor driver query) and every other argument as the launcher passed it: the split,
    combine and append launches of a decode plan, a forward and a backward, each launched three times
    (the first compiles, the second finds the key, the third its fast key). Launches are recorded,
    never run: the direct path itself runs on GPUs only."""
    from flash_attention_amd.params import AttnParams

    gpu_context = (0, False, False, None)
    monkeypatch.setattr(runtime, "launch_context", lambda device: gpu_context)
    monkeypatch.setattr(bwd, "launch_context", lambda device: gpu_context)
    monkeypatch.setattr(decode, "MERGE_IN_SPLIT", False)  # the combine kernel too
    given, direct, compiled = [], [], []
    launch = runtime.KernelSlot.launch

    def record(self, grid, device, args, context=False, fast=None, pointers=None):
        given.append((self.fn, args))
        launch(self, grid, device, args, context, fast, pointers)

    def fake_run(fn, grid, device, index, key, cache, args, constexprs, options):  # a compile
        compiled.append(fn)
        cache[key] = (fn, None)

    jits: dict = {}  # the interpreter's kernels as JITFunctions (their parameters' flags)
    info = runtime.fn_info
    monkeypatch.setattr(runtime, "fn_info", lambda fn: info(jits.setdefault(id(fn), _jit(fn))))
    monkeypatch.setattr(runtime.KernelSlot, "launch", record)
    monkeypatch.setattr(runtime, "_run", fake_run)
    monkeypatch.setattr(runtime, "_launch_direct",
                        lambda entry, grid, index, args, cvals: direct.append((entry[0], list(args))) or True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    params = AttnParams(softmax_scale=0.25, causal=True, alibi_slopes=torch.rand(4, device=dev))
    fslot, bslot, dslot = {}, {}, {}
    for _ in range(3):
        q, k, v = (torch.randn(2, 20, 4, 16, device=dev) for _ in range(3))
        out, lse = fwd.attention_forward(q, k, v, params, fslot)
        bwd.attention_backward(torch.randn_like(out), q, k, v, out, lse, params, slot=bslot)
        kc, vc = torch.randn(2, 40, 2, 16, device=dev), torch.randn(2, 40, 2, 16, device=dev)
        knew, vnew = torch.randn(2, 1, 2, 16, device=dev), torch.randn(2, 1, 2, 16, device=dev)
        lens = decode.append_kv(kc, vc, knew, vnew, torch.tensor([5, 30], dtype=torch.int32, device=dev),
                                slot=dslot)
        decode.decode(q[:, :1], kc, vc, lens, params, num_splits=3, slot=dslot)
    names = {fn.__name__ for fn in compiled}
    assert {"attn_fwd_kernel", "bwd_dkdv", "decode_split_kernel", "decode_combine_kernel",
            "kv_append_kernel"} <= names, names
    assert len(direct) == 2 * len(compiled) and len(given) == 3 * len(compiled)
    launched = iter(direct)
    for i, (fn, args) in enumerate(given):
        if i < len(compiled):
            continue  # the first call's launches: compiled, with the tensors
        got_fn, got = next(launched)
        assert got_fn is fn and len(got) == len(args)
        tensors = 0
        for a, p in zip(args, got):
            if type(a) is torch.Tensor:
                tensors += 1
                assert type(p) is int and p == a.data_ptr(), fn.__name__
            else:
                assert p is a, fn.__name__
        assert tensors >= 3, fn.__name__


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="direct launches run on GPUs only")
def test_direct_launches_call_registered_launch_hooks():
    """The direct path skips Triton's launch hooks only while none is registered: with a hook (a
    profiler's), every launch of a seen kernel goes through Triton's launcher and calls it."""
    from triton import knobs

    import flash_attention_amd as fa
    from flash_attention_amd.kvcache import flash_attn_with_kvcache

    q, k, v = (torch.randn(2, 64, 4, 64, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    kc, vc = torch.randn(2, 128, 4, 64, device="cuda", dtype=torch.float16), torch.randn(
        2, 128, 4, 64, device="cuda", dtype=torch.float16)
    lens = torch.tensor([3, 9], dtype=torch.int32, device="cuda")

    def calls():
        with fa.use_backend("triton"):
            fa.flash_attn_func(q, k, v, causal=True).sum().backward()
            flash_attn_with_kvcache(q[:, :1].detach(), kc, vc, k=k[:, :1].detach(), v=v[:, :1].detach(),
                                    cache_seqlens=lens, causal=True)

    calls()
    calls()  # every kernel seen: the direct path from here on
    names = []

    def hook(meta):
        names.append(meta.get()["name"] if hasattr(meta, "get") else meta["name"])

    knobs.runtime.launch_enter_hook.add(hook)
    try:
        calls()
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    torch.cuda.synchronize()
    assert {"attn_fwd_kernel", "bwd_dkdv", "bwd_dq", "decode_split_kernel"} <= set(names), names
    names.clear()
    calls()
    assert names == []  # the hook is gone: nothing calls it


def test_slots_keep_constexprs_in_the_kernels_order():
    """A direct launch passes the slot's constexpr values after the arguments, positionally (``_run`` keeps a
    compiled kernel for the direct path only when they are the kernel's trailing parameters in order): a slot
    takes them in the kernel's parameter order whatever the order its launcher wrote them in, so that a launcher
    listing them otherwise does not silently lose the direct launch (its host time: about 75 us a call measured on
    an H100, benchmarks/results/run28/h100_host_vs_base_5.txt). Every launcher's slots, and one written out of
    order."""
    from flash_attention_amd.kernels.fwd import attn_fwd_kernel
    from flash_attention_amd.launch import fwd_gluon

    def ordered(slot):
        names = list(slot.fn.arg_names)
        return list(slot.constexprs) == [n for n in names if n in slot.constexprs]

    slot = runtime.KernelSlot(_jit(attn_fwd_kernel), {"HEAD_DIM": 64, "BLOCK_M": 64}, {}, ())
    names = list(slot.fn.arg_names)
    assert names.index("BLOCK_M") < names.index("HEAD_DIM") and ordered(slot)
    assert slot._cvals == tuple(slot.constexprs.values())
    if fwd_gluon.gluon_triton_reason() is None:  # the Gluon launchers' slots (planned on the CPU)
        from helpers import attn_params

        q, k, v = (torch.randn(1, 2048, 2, 128, dtype=torch.bfloat16) for _ in range(3))
        row = fwd_gluon.gluon_row("sm90", 128, True)
        for causal in (False, True):
            plan = fwd_gluon.plan_gluon(q, k, v, attn_params(causal=causal), row.config, (0, 0, 0), (0, 0))
            assert ordered(plan.slot) and ordered(plan.hd_slot)


def test_host_descriptors_expand_as_triton_expands_them(monkeypatch):
    """A kernel with host-made TMA descriptors (the Gluon forward's): Triton 3.6 wraps its C launch function in Python
    that encodes every descriptor on every call (``wrap_handle_tensordesc``). The direct path takes the C function
    under it and expands the descriptors itself: the same arguments as Triton's wrapper gives (checked here against
    it, with the driver's encoder replaced by a pure stand-in, never run), and one encoding per (base address,
    shape, strides, block): a new address encodes again, the same one does not."""
    from triton.backends.nvidia import driver as nv
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from triton.runtime import driver

    encoded = []

    def encode(*args):  # what it was given, as the map (a CUtensorMap is a pure function of it)
        encoded.append(args[0])
        return tuple(tuple(a) if isinstance(a, list) else a for a in args)

    class FakeDriver:
        utils = type("Utils", (), {"fill_tma_descriptor": staticmethod(encode)})

    monkeypatch.setattr(type(driver), "active", property(lambda self: FakeDriver()))
    monkeypatch.setattr(runtime, "_TMA", {})
    signature = {"q_desc": "tensordesc<bf16[64, 128],x>", "Out": "*bf16", "k_desc": "tensordesc<bf16[128, 128],x>",
                 "n": "i32", "C": "constexpr"}
    metas = [dict(swizzle=128, elem_size=2, elem_type=9, block_size=[64, 128], fp4_padded=False),
             dict(swizzle=128, elem_size=2, elem_type=9, block_size=[128, 128], fp4_padded=False)]
    calls = []
    wrapped = nv.wrap_handle_tensordesc(lambda *a: calls.append(a), signature, metas)
    launcher, positions, tmetas = runtime.unwrap_descriptors(wrapped)
    assert positions == (0, 2) and tmetas[1] == (128, 2, nv.TMA_DTYPE_DEVICE_TO_HOST[9], (128, 128), False)
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    x, y = torch.zeros(512, 256, dtype=torch.bfloat16), torch.zeros(512, 256, dtype=torch.bfloat16)
    base = tuple(range(nv._BASE_ARGS_FORMAT_LEN))
    ours_encoded = []
    for a, b in ((x, y), (x, y), (y, x)):
        qd = TensorDescriptor(a, [512, 256], [256, 1], [64, 128], layout)
        kd = TensorDescriptor(b, [384, 128], [256, 1], [128, 128], layout)
        wrapped(*base, qd, 7, kd, 5, None)
        theirs = calls.pop()
        n = len(encoded)
        args = [qd, 7, kd, 5]
        for i in range(len(positions) - 1, -1, -1):
            args[positions[i]:positions[i] + 1] = runtime._descriptor_args(args[positions[i]], tmetas[i])
        launcher(*base, *args, None)
        ours_encoded.append(encoded[n:])
        assert calls.pop() == theirs
    # Triton encodes twice a call; ours: both descriptors on the first call, none on the second (same addresses and
    # layouts), both on the third (each descriptor's address changed)
    assert ours_encoded == [[y.data_ptr(), x.data_ptr()], [], [x.data_ptr(), y.data_ptr()]] and len(runtime._TMA) == 4
    assert runtime.unwrap_descriptors(lambda *a: None) is None
