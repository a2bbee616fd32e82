"""The flash_attn drop-in pieces: ``bert_padding``, ``layers.rotary`` and ``compat.install()``.

bert_padding against plain boolean indexing (and gradcheck); rotary against an independent
float64 rotation written with complex numbers; the stand-in modules by importing flash_attn
the way flash_attn's users and its own test suite do.
"""
from __future__ import annotations

import textwrap
import warnings

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import compat
from flash_attention_amd.bert_padding import (
    index_first_axis,
    index_first_axis_residual,
    index_put_first_axis,
    pad_input,
    unpad_input,
    unpad_input_for_concatenated_sequences,
)
from flash_attention_amd.layers.rotary import (
    RotaryEmbedding,
    apply_rotary_emb,
    apply_rotary_emb_kv_,
    apply_rotary_emb_qkv_,
    apply_rotary_emb_torch,
)

# ------------------------------------------------------------------------------------ bert_padding


def _mask(batch, seqlen, seed=0):
    g = torch.Generator().manual_seed(seed)
    m = torch.rand(batch, seqlen, generator=g) > 0.4
    m[0] = False  # an empty row
    m[-1] = True  # a full row
    return m


def test_unpad_input_returns_flash_attn_28_tuple():
    x = torch.randn(4, 7, 3, 5)
    mask = _mask(4, 7)
    packed, indices, cu, max_len, seqused = unpad_input(x, mask)
    assert torch.equal(packed, x[mask])
    assert indices.dtype == torch.int64 and torch.equal(indices, mask.flatten().nonzero().flatten())
    lens = mask.sum(-1)
    assert cu.dtype == torch.int32 and cu.tolist() == [0] + lens.cumsum(0).tolist()
    assert type(max_len) is int and max_len == int(lens.max())
    assert seqused.dtype == torch.int32 and torch.equal(seqused, lens.int())
    # int masks are accepted as flash_attn accepts them
    packed2, *_ = unpad_input(x, mask.int())
    assert torch.equal(packed2, packed)


def test_unpad_input_unused_mask():
    """unused_mask: tokens allocated but unused are packed and counted in cu_seqlens, not in seqused."""
    x = torch.randn(2, 6, 4)
    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    unused = torch.tensor([[0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 0, 0]], dtype=torch.bool)
    packed, indices, cu, max_len, seqused = unpad_input(x, mask, unused)
    assert indices.tolist() == [0, 1, 2, 3, 6, 7, 8, 9]
    assert cu.tolist() == [0, 4, 8] and max_len == 4 and seqused.tolist() == [2, 3]
    assert torch.equal(packed, x.reshape(12, 4)[indices])


def test_pad_input_inverts_unpad_with_zeros():
    x = torch.randn(3, 9, 2, 4)
    mask = _mask(3, 9, seed=1)
    packed, indices, *_ = unpad_input(x, mask)
    back = pad_input(packed, indices, 3, 9)
    assert back.shape == x.shape
    assert torch.equal(back, x * mask[:, :, None, None])


def test_padding_gradients():
    mask = _mask(3, 5, seed=2)
    x = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    idx = mask.flatten().nonzero().flatten()
    assert torch.autograd.gradcheck(lambda t: unpad_input(t, mask)[0], (x,))
    vals = torch.randn(len(idx), 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: pad_input(t, idx, 3, 5), (vals,))
    flat = x.detach().reshape(15, 4).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: index_first_axis(t, idx), (flat,))
    assert torch.autograd.gradcheck(lambda t: index_put_first_axis(t, idx, 15), (vals,))
    # repeated indices: gradients add up
    rep = torch.tensor([1, 1, 3])
    index_first_axis(flat, rep).sum().backward()
    assert flat.grad[1].eq(2).all() and flat.grad[3].eq(1).all() and flat.grad[0].eq(0).all()


def test_index_first_axis_residual():
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([4, 0, 2])
    out, residual = index_first_axis_residual(x, idx)
    assert torch.equal(out, x[idx]) and torch.equal(residual, x.detach())
    assert torch.autograd.gradcheck(lambda t: sum(o.sum() * w for o, w in zip(index_first_axis_residual(t, idx),
                                                                             (2.0, 3.0))), (x,))


def test_unpad_input_for_concatenated_sequences():
    """The example of flash_attn's docstring: rows hold the lengths of concatenated short samples."""
    x = torch.randn(3, 6, 2)
    lengths = torch.tensor([[2, 3, 0, 0, 0, 0], [3, 2, 0, 0, 0, 0], [6, 0, 0, 0, 0, 0]])
    packed, indices, cu, max_len = unpad_input_for_concatenated_sequences(x, lengths)
    assert cu.dtype == torch.int32 and cu.tolist() == [0, 2, 5, 8, 10, 16]
    assert max_len == 6
    assert indices.tolist() == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17]
    assert torch.equal(packed, x.reshape(18, 2)[indices])


def test_unpad_varlen_pad_equals_padded_attention():
    """The usual pipeline (unpad, varlen attention, pad) equals attention of each sequence alone."""
    b, s, h, d = 3, 10, 2, 16
    mask = _mask(b, s, seed=3)
    q, k, v = (torch.randn(b, s, h, d) for _ in range(3))
    qp, idx, cu, mx, _ = unpad_input(q, mask)
    kp, _, _, _, _ = unpad_input(k, mask)
    vp, _, _, _, _ = unpad_input(v, mask)
    out = pad_input(fa.flash_attn_varlen_func(qp, kp, vp, cu, cu, mx, mx, causal=True), idx, b, s)
    for bi in range(b):
        n = int(mask[bi].sum())
        sel = mask[bi]
        ref = fa.flash_attn_func(q[bi:bi + 1, sel], k[bi:bi + 1, sel], v[bi:bi + 1, sel], causal=True) if n else None
        if n:
            torch.testing.assert_close(out[bi, sel], ref[0], atol=1e-6, rtol=1e-5)
        assert not out[bi, ~sel].any()


# ------------------------------------------------------------------------------------ rotary


def _rotate_ref(x, cos, sin, pos, interleaved):
    """float64 RoPE with complex numbers: x [..., tokens, h, d], pos [..., tokens] int (rows of cos/sin;
    a row outside the tables leaves the token unchanged)."""
    x = x.double().clone()
    half = cos.shape[1]
    rd = 2 * half
    ok = (pos >= 0) & (pos < cos.shape[0])
    rows = pos.clamp(0, cos.shape[0] - 1)
    rot = torch.complex(torch.where(ok[..., None], cos.double()[rows], 1.0),
                        torch.where(ok[..., None], sin.double()[rows], 0.0))[..., None, :]  # [..., tokens, 1, half]
    xr = x[..., :rd]
    if interleaved:
        z = torch.complex(xr[..., 0::2], xr[..., 1::2]) * rot
        x[..., 0:rd:2], x[..., 1:rd:2] = z.real, z.imag
    else:
        z = torch.complex(xr[..., :half], xr[..., half:]) * rot
        x[..., :half], x[..., half:rd] = z.real, z.imag
    return x


def _tables(rows, half, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    angle = torch.rand(rows, half, generator=g, dtype=torch.float64) * 6.3
    return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotary_fraction", [1.0, 0.5])
@pytest.mark.parametrize("offsets", ["zero", "int", "tensor"])
@pytest.mark.parametrize("inplace", [False, True])
def test_apply_rotary_emb_dense(interleaved, rotary_fraction, offsets, inplace):
    b, s, h, d = 3, 11, 2, 16
    rd = int(d * rotary_fraction)
    cos, sin = _tables(2 * s, rd // 2)
    x = torch.randn(b, s, h, d)
    off = {"zero": 0, "int": 5, "tensor": torch.tensor([0, 7, 2 * s - 4], dtype=torch.int32)}[offsets]
    pos = torch.arange(s)[None, :] + (off[:, None].long() if offsets == "tensor" else off)
    ref = _rotate_ref(x, cos, sin, pos.expand(b, s), interleaved)  # the last row's tail is past the tables
    xin = x.clone()
    out = apply_rotary_emb(xin, cos, sin, interleaved=interleaved, inplace=inplace, seqlen_offsets=off)
    torch.testing.assert_close(out.double(), ref, atol=1e-6, rtol=1e-6)
    assert (out.data_ptr() == xin.data_ptr()) == inplace
    assert torch.equal(xin, out if inplace else x)
    # the torch reference formula of flash_attn, cos/sin indexed per token
    if offsets != "tensor":
        c, s_ = cos[off:off + s], sin[off:off + s]
        torch.testing.assert_close(apply_rotary_emb_torch(x, c, s_, interleaved), out, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("interleaved", [False, True])
def test_apply_rotary_emb_varlen(interleaved):
    lens = [4, 0, 9, 3]
    cu = torch.tensor([0, 4, 4, 13, 16], dtype=torch.int32)
    total, h, d = 18, 3, 8  # 2 tokens past the last sequence: left as they are
    cos, sin = _tables(20, 4)
    x = torch.randn(total, h, d)
    offsets = torch.tensor([1, 5, 0, 16], dtype=torch.int64)  # sequence 3 runs past the tables at its end
    pos = torch.full((total,), -1)
    for bi in range(4):
        pos[cu[bi]:cu[bi + 1]] = torch.arange(lens[bi]) + offsets[bi]
    ref = _rotate_ref(x, cos, sin, pos, interleaved)
    out = apply_rotary_emb(x, cos, sin, interleaved=interleaved, seqlen_offsets=offsets, cu_seqlens=cu, max_seqlen=9)
    torch.testing.assert_close(out.double(), ref, atol=1e-6, rtol=1e-6)
    out = apply_rotary_emb(x, cos, sin, interleaved=interleaved, seqlen_offsets=2, cu_seqlens=cu, max_seqlen=9)
    pos2 = torch.full((total,), -1)
    for bi in range(4):
        pos2[cu[bi]:cu[bi + 1]] = torch.arange(lens[bi]) + 2
    torch.testing.assert_close(out.double(), _rotate_ref(x, cos, sin, pos2, interleaved), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_apply_rotary_emb_low_precision(dtype):
    """fp16/bf16: computed in fp32, rounded once to the input dtype."""
    x = torch.randn(2, 7, 2, 32).to(dtype)
    cos, sin = _tables(7, 16, dtype)
    out = apply_rotary_emb(x, cos, sin)
    assert out.dtype == dtype
    ref = _rotate_ref(x, cos, sin, torch.arange(7).expand(2, 7), False)
    assert torch.equal(out, ref.to(dtype)) or (out.double() - ref).abs().max() <= 2 * (ref.to(dtype).double()
                                                                                       - ref).abs().max()


@pytest.mark.parametrize("inplace", [False, True])
def test_apply_rotary_emb_gradient(inplace):
    cos, sin = _tables(9, 3, torch.float64)
    x = torch.randn(2, 6, 2, 8, dtype=torch.float64, requires_grad=True)
    off = torch.tensor([0, 4])
    if not inplace:
        assert torch.autograd.gradcheck(lambda t: apply_rotary_emb(t, cos, sin, seqlen_offsets=off), (x,))
    g = torch.randn(2, 6, 2, 8, dtype=torch.float64)
    src = x * 1.0  # a non-leaf that may be overwritten in place
    out = apply_rotary_emb(src, cos, sin, inplace=inplace, seqlen_offsets=off, interleaved=True)
    (dx,) = torch.autograd.grad(out, x, g)
    # the gradient of a rotation is the opposite rotation
    pos = torch.arange(6)[None] + off[:, None]
    expect = _rotate_ref(g, cos, -sin, pos, True)
    torch.testing.assert_close(dx, expect)


def test_apply_rotary_emb_qkv_and_kv_inplace():
    b, s, h, d = 2, 5, 3, 8
    cos, sin = _tables(s + 3, 4, seed=1)
    cos_k, sin_k = _tables(s + 3, 4, seed=2)
    qkv = torch.randn(b, s, 3, h, d)
    expect = qkv.clone()
    expect[:, :, 0] = apply_rotary_emb(qkv[:, :, 0], cos, sin, seqlen_offsets=3)
    expect[:, :, 1] = apply_rotary_emb(qkv[:, :, 1], cos_k, sin_k, seqlen_offsets=3)
    got = qkv.clone()
    assert apply_rotary_emb_qkv_(got, cos, sin, cos_k, sin_k, seqlen_offsets=3).data_ptr() == got.data_ptr()
    assert torch.equal(got, expect)
    # GQA layout: (b, s, hq + 2 * hk, d)
    hq, hk = 4, 2
    packed = torch.randn(b, s, hq + 2 * hk, d)
    expect = packed.clone()
    expect[:, :, :hq] = apply_rotary_emb(packed[:, :, :hq], cos, sin, interleaved=True)
    expect[:, :, hq:hq + hk] = apply_rotary_emb(packed[:, :, hq:hq + hk], cos, sin, interleaved=True)
    got = packed.clone()
    apply_rotary_emb_qkv_(got, cos, sin, interleaved=True, num_heads_q=hq)
    assert torch.equal(got, expect)
    kv = torch.randn(b, s, 2, h, d)
    expect = kv.clone()
    expect[:, :, 0] = apply_rotary_emb(kv[:, :, 0], cos, sin)
    got = kv.clone()
    apply_rotary_emb_kv_(got, cos, sin)
    assert torch.equal(got, expect)


def test_apply_rotary_emb_qkv_gradients():
    cos, sin = _tables(6, 2, torch.float64)
    qkv = torch.randn(2, 5, 3, 2, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: apply_rotary_emb_qkv_(t * 1.0, cos, sin), (qkv,))
    kv = torch.randn(2, 5, 2, 2, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: apply_rotary_emb_kv_(t * 1.0, cos, sin, seqlen_offsets=1), (kv,))


def test_rotary_arguments_are_checked():
    x = torch.randn(2, 4, 2, 8)
    cos, sin = _tables(4, 4)
    with pytest.raises(ValueError, match="rotary_dim"):
        apply_rotary_emb(x, *_tables(4, 5))
    with pytest.raises(ValueError, match="seqlen_offsets"):
        apply_rotary_emb(x, cos, sin, seqlen_offsets=1)  # 4 + 1 rows needed
    with pytest.raises(ValueError, match="seqlen_offsets"):
        apply_rotary_emb(x, cos, sin, seqlen_offsets=torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("scale_base", [None, 16.0])
def test_rotary_embedding_module(scale_base):
    dim, b, s, h = 8, 2, 6, 2
    mod = RotaryEmbedding(dim, base=100.0, interleaved=False, scale_base=scale_base)
    inv = 1.0 / 100.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    t = torch.arange(s + 2, dtype=torch.float64)
    ang = torch.outer(t, inv)
    scale = torch.ones_like(ang)
    if scale_base is not None:
        base = (torch.arange(0, dim, 2, dtype=torch.float64) + 0.4 * dim) / (1.4 * dim)
        scale = base[None, :] ** ((t - (s + 2) // 2) / scale_base)[:, None]
    qkv = torch.randn(b, s, 3, h, dim)
    got = mod(qkv.clone(), seqlen_offset=2)
    pos = (torch.arange(s) + 2).expand(b, s)
    q_ref = _rotate_ref(qkv[:, :, 0], ang.cos() * scale, ang.sin() * scale, pos, False)
    k_ref = _rotate_ref(qkv[:, :, 1], ang.cos() / scale, ang.sin() / scale, pos, False)
    torch.testing.assert_close(got[:, :, 0].double(), q_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[:, :, 1].double(), k_ref, atol=1e-5, rtol=1e-5)
    assert torch.equal(got[:, :, 2], qkv[:, :, 2])
    q, kv = mod(qkv[:, :, 0].clone(), qkv[:, :, 1:].clone(), seqlen_offset=2)
    torch.testing.assert_close(q, got[:, :, 0])
    torch.testing.assert_close(kv[:, :, 0], got[:, :, 1])


# ------------------------------------------------------------------------------------ compat.install()


@pytest.fixture
def fake_real_flash_attn(tmp_path, monkeypatch, clean_flash_attn):
    """A 'real' flash_attn package on sys.path (a directory with an __init__.py)."""
    pkg = tmp_path / "flash_attn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        __version__ = "2.7.0"
        REAL = True
        def flash_attn_varlen_func(*a, **k):
            raise AssertionError("the real package was called")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    return pkg


def _no_real_flash_attn():
    return compat.real_flash_attn() is None


def test_install_makes_flash_attn_imports_resolve(clean_flash_attn):
    if not _no_real_flash_attn():
        pytest.skip("a real flash_attn is installed here")
    assert compat.install() is True
    import flash_attn
    from flash_attn import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: F401
    from flash_attn.bert_padding import pad_input as pad2
    from flash_attn.bert_padding import unpad_input as unpad2
    from flash_attn.flash_attn_interface import _flash_attn_forward, _get_block_size_n  # noqa: F401
    from flash_attn.layers.rotary import RotaryEmbedding as Rot2  # noqa: F401
    from flash_attn.layers.rotary import apply_rotary_emb as rot2

    assert flash_attn.__version__ == compat.STANDIN_VERSION == "2.8.3"
    assert flash_attn.__flash_attention_amd_standin__ is True
    assert flash_attn_func is fa.flash_attn_func and unpad2 is unpad_input and pad2 is pad_input
    assert rot2 is apply_rotary_emb
    assert flash_attn.flash_attn_interface.flash_attn_with_kvcache is fa.flash_attn_with_kvcache
    import importlib.util

    assert importlib.util.find_spec("flash_attn") is not None
    q, k, v = (torch.randn(1, 9, 2, 16) for _ in range(3))
    torch.testing.assert_close(flash_attn_func(q, k, v, causal=True), fa.flash_attn_func(q, k, v, causal=True))
    with pytest.raises(ModuleNotFoundError):
        import flash_attn.modules.mha  # noqa: F401  (not provided)
    assert compat.install() is True  # idempotent, no warning
    assert compat.uninstall() is True
    if compat._namespace_paths():  # FA4 installed (flash_attn/cute alone): its namespace package comes back
        import flash_attn  # noqa: F811

        assert not compat.installed() and not hasattr(flash_attn, "flash_attn_func")
        return
    with pytest.raises(ModuleNotFoundError):
        import flash_attn  # noqa: F401,F811


def test_flash_attn_backend_declines_the_standin(clean_flash_attn):
    from flash_attention_amd.backends.flash_attn_backend import FlashAttnBackend

    compat.install(force=True)
    reason = FlashAttnBackend().available()
    assert reason is not None and "stand-in" in reason
    q = torch.randn(1, 4, 2, 8)
    with fa.use_backend("flash_attn"), pytest.raises(fa.BackendUnavailable, match="stand-in"):
        fa.flash_attn_func(q, q, q)


def test_install_leaves_a_real_flash_attn_alone(fake_real_flash_attn):
    with pytest.warns(compat.CompatWarning, match=r"real flash_attn is importable .*force=True"):
        assert compat.install() is False
    import flash_attn

    assert getattr(flash_attn, "REAL", False) and not compat.installed()


def test_install_force_replaces_and_uninstall_restores(fake_real_flash_attn):
    import flash_attn as real

    with pytest.warns(compat.CompatWarning, match="replaced"):
        assert compat.install(force=True) is True
    import flash_attn

    assert flash_attn is not real and flash_attn.__flash_attention_amd_standin__
    from flash_attention_amd.backends.flash_attn_backend import FlashAttnBackend

    assert "stand-in" in FlashAttnBackend().available()
    compat.uninstall()
    import flash_attn as again

    assert again is real


def test_no_warning_without_a_real_flash_attn(clean_flash_attn):
    if not _no_real_flash_attn():
        pytest.skip("a real flash_attn is installed here")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compat.install(force=True) is True


def test_flash_attn_test_suite_style_usage(clean_flash_attn):
    """What flash_attn's tests/test_flash_attn.py does at import and in generate_qkv, on the stand-in."""
    compat.install(force=True)
    from flash_attn import flash_attn_varlen_func
    from flash_attn.bert_padding import pad_input, unpad_input
    from flash_attn.flash_attn_interface import _get_block_size_n

    assert _get_block_size_n("cpu", 64, True, False) >= 1 << 20
    b, s, h, d = 2, 12, 2, 16
    q, k, v = (torch.randn(b, s, h, d) for _ in range(3))
    mask = torch.arange(s)[None] < torch.tensor([[7], [12]])
    q_unpad, indices_q, cu_q, max_q, _ = unpad_input(q, mask)
    k_unpad, _, cu_k, max_k, _ = unpad_input(k, mask)
    v_unpad, _, _, _, _ = unpad_input(v, mask)
    out_unpad, lse, S = flash_attn_varlen_func(q_unpad, k_unpad, v_unpad, cu_q, cu_k, max_q, max_k, 0.17,
                                               causal=True, window_size=torch.tensor([3, 1]), return_attn_probs=True)
    out = pad_input(out_unpad, indices_q, b, s)
    assert out.shape == (b, s, h, d) and S.shape == (b, h, 128, 128) and lse.shape == (h, int(cu_q[-1]))
    assert (S[0, :, 7:] == 0).all()
