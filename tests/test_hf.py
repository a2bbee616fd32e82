"""Hugging Face transformers with attn_implementation="fa_amd" gives eager's logits,
with and without a padding mask (tiny random Llama, built from a config: nothing downloaded)."""
import pytest
import torch

transformers = pytest.importorskip("transformers")


def _model(impl):
    from flash_attention_amd.integrations import hf

    hf.register()
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval().to(torch.float32), impl


@pytest.mark.parametrize("padded", [False, True])
def test_llama_logits_match_eager(padded, padded_route):
    model, _ = _model("fa_amd")
    ids = torch.randint(0, 97, (2, 23))
    mask = torch.ones_like(ids)
    if padded:
        mask[0, :7] = 0  # left padding
    with torch.no_grad():
        model.set_attn_implementation("eager")
        ref = model(input_ids=ids, attention_mask=mask).logits
        model.set_attn_implementation("fa_amd")
        out = model(input_ids=ids, attention_mask=mask).logits
    keep = mask.bool()
    torch.testing.assert_close(out[keep], ref[keep], atol=2e-5, rtol=2e-5)


def test_generate_with_cache_matches_eager():
    model, _ = _model("fa_amd")
    ids = torch.randint(0, 97, (1, 9))
    model.set_attn_implementation("eager")
    ref = model.generate(ids, max_new_tokens=6, do_sample=False)
    model.set_attn_implementation("fa_amd")
    out = model.generate(ids, max_new_tokens=6, do_sample=False)
    assert torch.equal(out, ref)


def _grads_and_loss(model, impl, ids, mask, labels):
    model.zero_grad(set_to_none=True)
    model.set_attn_implementation(impl)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    return out.loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.fixture(params=["dense", "dense-transposed", "packed"])
def padded_route(request, monkeypatch):
    """Every way a padded call is served: a dense call with a key mask on HF's [b, h, s, d] tensors
    (core.attention_heads_first), the same on transposed views (HEADS_FIRST off), or packed varlen calls."""
    from flash_attention_amd.integrations import hf

    monkeypatch.setattr(hf, "PACK_MIN_SCORES", 0 if request.param == "packed" else 1 << 62)
    monkeypatch.setattr(hf, "HEADS_FIRST", request.param != "dense-transposed")
    return request.param


@pytest.mark.parametrize("side", ["left", "right", "holes"])
def test_llama_padded_training_grads_match_eager(side, padded_route):
    """Loss and every parameter gradient equal eager's (fp32), any 2-D mask, dense or packed."""
    model, _ = _model("fa_amd")
    model.train()
    ids = torch.randint(0, 97, (3, 19))
    _assert_training_matches_eager(model, ids, _side_mask(ids, side))


def _side_mask(ids, side: str):
    """A 2-D padding mask for ids [3, n]: "none"; "left" / "right" padding of rows 0 and 2 / 0 and 1 (a quarter
    and a half, up to three quarters); "holes": tokens left out inside rows 0 and 2 (the others keep their order)."""
    n = ids.shape[1]
    mask = torch.ones_like(ids)
    if side == "left":
        mask[0, :n // 4], mask[2, :n // 2] = 0, 0
    elif side == "right":
        mask[0, 3 * n // 4:], mask[1, n // 4:] = 0, 0
    elif side == "holes":
        mask[0, n // 6:n // 3], mask[2, ::4] = 0, 0
    return mask


def _assert_training_matches_eager(model, ids, mask):
    """fa_amd's loss and every parameter gradient equal eager's (fp32) -> (the loss, the labels)."""
    # the loss at token t comes from position t - 1: only where that position is not padding
    # (a padding row sees no key: eager gives it a uniform average of masked keys, we give 0)
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, 1:] = labels[:, 1:].masked_fill(mask[:, :-1] == 0, -100)
    ref_loss, ref = _grads_and_loss(model, "eager", ids, mask, labels)
    loss, got = _grads_and_loss(model, "fa_amd", ids, mask, labels)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    assert got.keys() == ref.keys()
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], atol=2e-5, rtol=2e-4, msg=name)
    return ref_loss, labels


def _bert():
    """A tiny random BertForMaskedLM in training mode, dropout off."""
    config = transformers.BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(config).train()


def test_bert_padded_outputs_and_grads_match_eager(padded_route):
    from flash_attention_amd.integrations import hf

    hf.register()
    model = _bert()
    ids = torch.randint(0, 97, (3, 21))
    mask = torch.ones_like(ids)
    mask[0, 15:], mask[2, 6:] = 0, 0
    labels = ids.masked_fill(mask == 0, -100)
    ref_loss, ref = _grads_and_loss(model, "eager", ids, mask, labels)
    loss, got = _grads_and_loss(model, "fa_amd", ids, mask, labels)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], atol=2e-5, rtol=2e-4, msg=name)


def test_mask_function_never_reads_the_mask():
    """register()'s mask function passes HF's 2-D mask on (its last kv_length columns) without reading its
    values: a meta tensor, whose values cannot be read, goes through; HF's own flash_attention_mask reads it
    (mask.all(): a host synchronisation on a GPU) and fails on it."""
    from transformers.masking_utils import flash_attention_mask

    from flash_attention_amd.integrations.hf import padding_mask

    mask = torch.ones(3, 10, dtype=torch.bool, device="meta")
    kw = dict(batch_size=3, q_length=4, kv_length=7, q_offset=3, kv_offset=0, attention_mask=mask)  # 3 cached
    out = padding_mask(**kw)
    assert out.shape == (3, 7) and out.device.type == "meta"
    assert padding_mask(**dict(kw, attention_mask=None)) is None
    with pytest.raises(RuntimeError, match="meta"):
        flash_attention_mask(**kw)


def test_register_picks_the_mask_function():
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

    from flash_attention_amd.integrations import hf

    try:
        hf.register(sync_free=False)
        assert ALL_MASK_ATTENTION_FUNCTIONS["fa_amd"] is flash_attention_mask
    finally:
        hf.register()
    assert ALL_MASK_ATTENTION_FUNCTIONS["fa_amd"] is hf.padding_mask


@pytest.mark.parametrize("model_kind", ["llama", "bert"])
def test_mask_without_padding_reaches_attention(model_kind, padded_route, monkeypatch):
    """A mask with no padding is not dropped (that would need a host read): every layer gets it, and the
    loss and gradients still equal eager's, dense (key mask) or packed (full-length sequences)."""
    from flash_attention_amd.integrations import hf

    seen = []
    forward = hf.attention_forward

    def recording(module, q, k, v, attention_mask, *a, **kw):
        seen.append(attention_mask)
        return forward(module, q, k, v, attention_mask, *a, **kw)

    monkeypatch.setattr(hf, "attention_forward", recording)
    monkeypatch.setattr(hf, "READ_ON", ())  # as on a GPU: the mask is not read
    hf.register()
    if model_kind == "llama":
        model, _ = _model("fa_amd")
        model.train()
    else:
        model = _bert()
    ids = torch.randint(0, 97, (2, 17))
    mask = torch.ones_like(ids)
    ref_loss, ref = _grads_and_loss(model, "eager", ids, mask, ids)
    loss, got = _grads_and_loss(model, "fa_amd", ids, mask, ids)
    monkeypatch.undo()
    hf.register()  # the real attention_forward registered again
    assert len(seen) == 2 and all(m is not None and m.shape == (2, 17) for m in seen)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], atol=2e-5, rtol=2e-4, msg=name)


def test_cpu_mask_without_padding_is_dropped():
    """On the CPU (reading a mask costs no synchronisation) a mask without padding is dropped as HF does,
    so the call stays dense without a key mask; one with padding is passed on."""
    from flash_attention_amd.integrations.hf import padding_mask

    ones = torch.ones(2, 9, dtype=torch.bool)
    assert padding_mask(kv_length=9, attention_mask=ones) is None
    padded = ones.clone()
    padded[1, 7:] = False
    assert padding_mask(kv_length=9, attention_mask=padded) is padded or torch.equal(
        padding_mask(kv_length=9, attention_mask=padded), padded)
    assert padding_mask(kv_length=5, attention_mask=padded).shape == (2, 5)


@pytest.mark.parametrize("side", ["none", "left", "right", "holes"])
def test_one_sequence_batch_runs_one_dense_call(side, monkeypatch):
    """A padded batch of one sequence (causal, packed route) runs as one dense causal call over the packed rows:
    loss and every gradient equal eager's, with a mask of ones as on a GPU (not read, not dropped) or padding
    on either side or in holes; the attention calls it makes carry no cu_seqlens."""
    from flash_attention_amd import core
    from flash_attention_amd.integrations import hf

    calls = []
    attention = core.attention

    def recording(q, k, v, *a, **kw):
        calls.append((q.dim(), kw.get("cu_seqlens_q")))
        return attention(q, k, v, *a, **kw)

    monkeypatch.setattr(hf, "PACK_MIN_SCORES", 0)  # the packed route at any size
    monkeypatch.setattr(hf, "READ_ON", ())  # a mask of ones reaches the attention (as on a GPU)
    model, _ = _model("fa_amd")
    model.train()
    ids = torch.randint(0, 97, (1, 21))
    mask = torch.ones_like(ids)
    if side == "left":
        mask[0, :6] = 0
    elif side == "right":
        mask[0, 15:] = 0
    elif side == "holes":
        mask[0, 2:5], mask[0, 11] = 0, 0
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, 1:] = labels[:, 1:].masked_fill(mask[:, :-1] == 0, -100)
    ref_loss, ref = _grads_and_loss(model, "eager", ids, mask, labels)
    monkeypatch.setattr(core, "attention", recording)
    loss, got = _grads_and_loss(model, "fa_amd", ids, mask, labels)
    assert calls and all(dim == 4 and cu is None for dim, cu in calls), calls
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], atol=2e-5, rtol=2e-4, msg=name)


def test_packed_position_ids_pass_one_cu_seqlens(monkeypatch):
    """HF's packed batches (position_ids, no mask: one cu_seq_lens tensor for queries and keys, int64) reach the
    attention as one int32 tensor for both (the Gluon forward's varlen path asks it), with the right values;
    two different tensors stay two."""
    from flash_attention_amd import core
    from flash_attention_amd.integrations import hf

    calls = []
    monkeypatch.setattr(core, "attention", lambda q, k, v, **kw: calls.append(kw) or torch.zeros_like(q))
    module = torch.nn.Module()
    q, k, v = (torch.randn(1, 2, 10, 8) for _ in range(3))
    cu = torch.tensor([0, 4, 10])
    hf.attention_forward(module, q, k, v, None, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=6, max_length_k=6)
    hf.attention_forward(module, q, k, v, None, cu_seq_lens_q=cu, cu_seq_lens_k=cu.clone(), max_length_q=6,
                         max_length_k=6)
    one, two = calls
    assert one["cu_seqlens_q"] is one["cu_seqlens_k"] and one["cu_seqlens_q"].dtype == torch.int32
    assert one["cu_seqlens_q"].tolist() == [0, 4, 10]
    assert two["cu_seqlens_q"] is not two["cu_seqlens_k"] and two["cu_seqlens_k"].tolist() == [0, 4, 10]


def test_one_sequence_call_equals_the_varlen_call():
    """The dense call on one packed sequence against the varlen call it replaces, at the attention function:
    the same outputs and input gradients (float64), exactly 0 in the rows after the sequence and in their
    gradients, for finite inputs there too."""
    from flash_attention_amd.integrations import hf

    torch.manual_seed(3)
    h, hk, s, d = 4, 2, 29, 16
    mask = torch.ones(1, s, dtype=torch.long)
    mask[0, :4], mask[0, 17:19] = 0, 0  # left padding and a hole
    module = torch.nn.Module()
    module.is_causal = True
    q, k, v = (torch.randn(1, n, s, d, dtype=torch.float64, requires_grad=True) for n in (h, hk, hk))
    dout = torch.randn(1, s, h, d, dtype=torch.float64)
    old = hf.PACK_MIN_SCORES
    try:
        hf.PACK_MIN_SCORES = 0
        out, _ = hf.attention_forward(module, q, k, v, mask)
        grads = torch.autograd.grad(out, (q, k, v), dout)
        pack = hf._packing(mask, s)
        qp, kp, vp = (t.transpose(1, 2).reshape(s, -1, d)[o] for t, o in ((q, pack.order_q), (k, pack.order_k),
                                                                          (v, pack.order_k)))
        ref_packed = hf.core.attention(qp, kp, vp, cu_seqlens_q=pack.cu_q, cu_seqlens_k=pack.cu_k, max_seqlen_q=s,
                                       max_seqlen_k=s, zero_tensors=True, causal=True)
        ref = ref_packed[pack.inverse_q][None]
        ref_grads = torch.autograd.grad(ref, (q, k, v), dout)
    finally:
        hf.PACK_MIN_SCORES = old
    keep = mask[0].bool()
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    assert torch.equal(out[0, ~keep], torch.zeros_like(out[0, ~keep]))
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, atol=1e-12, rtol=1e-10)
    assert not grads[0][0, :, ~keep].any() and not grads[1][0, :, ~keep].any()  # padding rows: no gradient


def _gemma2():
    """A tiny Gemma 2 (nothing downloaded): softcapped scores (attn_logit_softcapping, set low so that it
    changes them; larger initial weights than Gemma's, for scores of a few units), a sliding window on every
    other layer, GQA 2:1, head dim 32."""
    from flash_attention_amd.integrations import hf

    hf.register()
    config = transformers.Gemma2Config(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                       max_position_embeddings=128, sliding_window=6, attn_logit_softcapping=1.0,
                                       final_logit_softcapping=30.0, query_pre_attn_scalar=32,
                                       initializer_range=0.3, attn_implementation="eager")
    assert config.layer_types == ["sliding_attention", "full_attention"]
    torch.manual_seed(0)
    return transformers.Gemma2ForCausalLM(config).to(torch.float32)


@pytest.mark.parametrize("side", ["none", "left", "right", "holes"])
def test_gemma2_softcap_window_training_matches_eager(side, padded_route):
    """Gemma 2's softcap and sliding window reach the kernels (transformers has no sdpa path for it): loss and every
    parameter gradient equal eager's in fp32, without padding and with left / right padding or holes, dense or packed
    (a windowed call with holes packed measured its window over the packed positions until session 57: the fuzzer's
    seeds 743 and 1317)."""
    model = _gemma2().train()
    ids = torch.randint(0, 97, (3, 17))
    mask = _side_mask(ids, side)
    ref_loss, labels = _assert_training_matches_eager(model, ids, mask)
    # softcap and the window matter here: without them the loss moves
    model.config.attn_logit_softcapping = None
    for layer in model.model.layers:
        layer.self_attn.attn_logit_softcapping = None
    plain_loss, _ = _grads_and_loss(model, "fa_amd", ids, mask, labels)
    assert (plain_loss - ref_loss).abs() > 1e-3


@pytest.mark.parametrize("padded", [False, True])
def test_gemma2_generate_matches_eager(padded):
    """Greedy generation through HF's cache (its sliding-window layers included: the prompt and the new tokens
    outgrow the window) gives eager's tokens and, step by step, its logits (fp32), with and without left
    padding."""
    model = _gemma2().eval()
    ids = torch.randint(0, 97, (2, 9))
    mask = torch.ones_like(ids)
    if padded:
        mask[0, :4] = 0
    outs = []
    for impl in ("eager", "fa_amd"):
        model.set_attn_implementation(impl)
        outs.append(model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
                                   pad_token_id=0, output_logits=True, return_dict_in_generate=True))
    assert torch.equal(outs[1].sequences, outs[0].sequences)
    for got, ref in zip(outs[1].logits, outs[0].logits, strict=True):
        torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)


def _tiny(arch: str):
    """Tiny random models of other architectures the integration serves (nothing downloaded): Gemma 3 (a sliding
    window on one layer, full attention on the other, QK norm, a softmax scale other than head_dim ** -0.5),
    Mistral (a sliding window on every layer) and Qwen 3 (QK norm, GQA), with windows shorter than the test's
    sequences so that they matter."""
    from flash_attention_amd.integrations import hf

    hf.register()
    common = dict(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.3)
    if arch == "gemma3":
        config = transformers.Gemma3TextConfig(**common, head_dim=16, sliding_window=5, query_pre_attn_scalar=24,
                                               layer_types=["sliding_attention", "full_attention"])
        cls = transformers.Gemma3ForCausalLM
    elif arch == "mistral":
        config, cls = transformers.MistralConfig(**common, sliding_window=5), transformers.MistralForCausalLM
    else:
        config, cls = transformers.Qwen3Config(**common, head_dim=16), transformers.Qwen3ForCausalLM
    torch.manual_seed(0)
    return cls(config).to(torch.float32)


@pytest.mark.parametrize("arch", ["gemma3", "mistral", "qwen3"])
@pytest.mark.parametrize("side", ["none", "left", "right"])
def test_other_architectures_training_match_eager(arch, side, padded_route, monkeypatch):
    """Loss and every parameter gradient equal eager's (fp32) for Gemma 3, Mistral and Qwen 3, with and without
    padding, dense or packed; the sliding windows matter (dropping them changes the loss)."""
    model = _tiny(arch).train()
    ids = torch.randint(0, 97, (3, 15))
    mask = _side_mask(ids, side)
    ref_loss, labels = _assert_training_matches_eager(model, ids, mask)
    if arch != "qwen3":
        from flash_attention_amd.integrations import hf

        monkeypatch.setattr(hf, "_window", lambda sliding_window, key_length: (-1, -1))
        loss, _ = _grads_and_loss(model, "fa_amd", ids, mask, labels)
        assert (loss - ref_loss).abs() > 1e-4


@pytest.mark.parametrize("kind,padded", [("llama", True), ("llama", False), ("gemma2", True), ("mistral", True)])
def test_static_cache_generate_matches_eager(kind, padded):
    """A static cache (``cache_implementation="static"``, what compiled generation uses): the keys are the cache's
    slots, those not written yet included, and the queries sit at absolute positions, so HF's 2-D mask is shorter
    than the keys and flash_attn's causal alignment (queries at the keys' end) does not hold: the mask function
    gives HF's 4-D bool mask there, which the attention takes as it is (before, a ValueError on the mask's shape).
    Eager's tokens and logits (fp32), left padding or no mask at all, Gemma 2's sliding windows (every other layer)
    and Mistral's (every layer, shorter than the generation: its static cache's sliding layers) included."""
    model = {"llama": lambda: _model("fa_amd")[0], "gemma2": lambda: _gemma2().eval(),
             "mistral": lambda: _tiny("mistral").eval()}[kind]()
    ids = torch.randint(1, 97, (2, 9))
    mask = None
    if padded:
        mask = torch.ones_like(ids)
        mask[0, :4] = 0
    outs = []
    for impl in ("eager", "fa_amd"):
        model.set_attn_implementation(impl)
        outs.append(model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
                                   pad_token_id=0, output_logits=True, return_dict_in_generate=True,
                                   cache_implementation="static"))
    assert torch.equal(outs[1].sequences, outs[0].sequences)
    for got, ref in zip(outs[1].logits, outs[0].logits, strict=True):
        torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)
