"""No host-device synchronisation on the hot paths of a GPU call outside debug mode (issue: the
call path): forward, backward, varlen, the Hugging Face integration and KV-cache decoding run
under ``torch.cuda.set_sync_debug_mode("error")``, which raises on any synchronising CUDA call."""
import contextlib

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd.kvcache import flash_attn_with_kvcache

pytestmark = pytest.mark.gpu


@contextlib.contextmanager
def no_sync():
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def _qkv(*shape_q, hk=2, grad=True):
    q = torch.randn(*shape_q, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
    shape_k = (*shape_q[:-2], hk, shape_q[-1])
    k = torch.randn(*shape_k, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
    v = torch.randn(*shape_k, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
    return q, k, v


@pytest.mark.parametrize("backend", ["auto", "triton"])
@pytest.mark.parametrize("kwargs", [dict(causal=True), dict(window_size=(16, 0), softcap=20.0), dict(dropout_p=0.1)])
def test_dense_forward_backward_no_sync(backend, kwargs):
    q, k, v = _qkv(2, 96, 4, 64)
    with fa.use_backend(backend):
        fa.flash_attn_func(q, k, v, **kwargs).sum().backward()  # plan and compile first
        with no_sync():
            for _ in range(2):
                out, lse, _ = fa.flash_attn_func(q, k, v, return_attn_probs=True, **kwargs)
                (out.float().square().sum() + lse.sum()).backward()


def test_varlen_forward_backward_no_sync():
    cu = torch.tensor([0, 17, 40, 96], dtype=torch.int32, device="cuda")
    q, k, v = _qkv(96, 4, 64)
    fa.flash_attn_varlen_func(q, k, v, cu, cu, 56, 56, causal=True).sum().backward()
    with no_sync():
        for _ in range(2):
            fa.flash_attn_varlen_func(q, k, v, cu, cu, 56, 56, causal=True).sum().backward()


@pytest.mark.parametrize("batch", [3, 1])
@pytest.mark.parametrize("packed", [False, True])
def test_hf_padded_attention_no_sync(packed, batch, monkeypatch):
    """Dense (key mask) and packed routes; batch 1 packed: one dense call over the packed rows. A new mask
    tensor each call inside no_sync, so that its packing is made there too."""
    from flash_attention_amd.integrations import hf
    from flash_attention_amd.integrations.hf import attention_forward

    monkeypatch.setattr(hf, "PACK_MIN_SCORES", 0 if packed else 1 << 62)

    module = torch.nn.Module()
    module.is_causal = True
    q, k, v = (t.transpose(1, 2) for t in _qkv(batch, 40, 4, 64))  # HF layout [b, h, s, d]
    mask = torch.ones(batch, 40, dtype=torch.long, device="cuda")
    mask[0, :7] = 0
    mask[-1, 31:] = 0
    attention_forward(module, q, k, v, mask)[0].sum().backward()
    with no_sync():
        for _ in range(2):
            attention_forward(module, q, k, v, mask.clone())[0].float().sum().backward()


@pytest.mark.parametrize("model_kind", ["llama", "bert"])
@pytest.mark.parametrize("padded", [False, True])
def test_hf_model_training_step_no_sync(model_kind, padded):
    """A whole Hugging Face training step (forward with the loss, backward) with attn_implementation="fa_amd"
    and a 2-D mask, padded or all ones: register()'s mask function never reads the mask (HF's own
    flash_attention_mask does, mask.all()), so nothing in the step synchronises."""
    transformers = pytest.importorskip("transformers")
    from flash_attention_amd.integrations import hf

    hf.register()
    torch.manual_seed(0)
    if model_kind == "llama":
        config = transformers.LlamaConfig(vocab_size=97, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2)
        model = transformers.LlamaForCausalLM(config)
    else:
        config = transformers.BertConfig(vocab_size=97, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=256)
        model = transformers.BertForMaskedLM(config)
    model = model.to("cuda", torch.bfloat16).train()
    model.set_attn_implementation("fa_amd")
    ids = torch.randint(0, 97, (3, 40), device="cuda")
    mask = torch.ones_like(ids)
    if padded:
        mask[0, 29:] = 0
        mask[2, 11:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()  # plan and compile first
    with no_sync():
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()


def test_kvcache_decode_no_sync():
    kc = torch.randn(2, 256, 2, 64, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    q, k, v = _qkv(2, 1, 4, 64, grad=False)
    seqlens = torch.tensor([10, 100], dtype=torch.int32, device="cuda")
    flash_attn_with_kvcache(q, kc, vc, k=k[:, :1], v=v[:, :1], cache_seqlens=seqlens, causal=True)
    with no_sync():
        for _ in range(2):
            flash_attn_with_kvcache(q, kc, vc, k=k[:, :1], v=v[:, :1], cache_seqlens=seqlens, causal=True)
