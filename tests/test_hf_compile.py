"""Hugging Face models with attn_implementation="fa_amd" under torch.compile(fullgraph=True): padded training steps
trace without a graph break and give eager's loss and gradients (tiny random models, fp32, CPU)."""
import pytest
import torch

transformers = pytest.importorskip("transformers")


def _model(kind: str):
    if kind == "bert":
        config = transformers.BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=128, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0, max_position_embeddings=64)
        cls = transformers.BertForMaskedLM
    else:
        config = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        cls = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    return cls(config).train()


def _step(model, ids, mask, labels, run=None):
    """One forward + backward of model (through run: its compiled form, where given) -> (loss, parameter grads)."""
    model.zero_grad(set_to_none=True)
    loss = (model if run is None else run)(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind,route,dynamic", [("bert", "dense", None), ("llama", "packed", None),
                                                ("bert", "dense", True), ("llama", "packed", True)])
def test_compiled_padded_training_matches_eager(kind, route, dynamic, monkeypatch):
    """The integration's per-mask caches (the key mask, the packing) are skipped while dynamo traces (it cannot read
    a tensor's version): before, every layer broke the graph there, and fullgraph=True raised. dynamic=True: every
    size symbolic while tracing (before, the default softmax scale's check raised under it)."""
    from flash_attention_amd.integrations import hf

    hf.register()
    # a dense call with a key mask on HF's [b, h, s, d] tensors, or packed varlen calls
    monkeypatch.setattr(hf, "PACK_MIN_SCORES", 0 if route == "packed" else 1 << 62)
    model = _model(kind)
    ids = torch.randint(0, 97, (3, 16))
    mask = torch.ones_like(ids)
    mask[1, 10:], mask[2, :11] = 0, 0  # right padding in row 1, left padding in row 2
    # a padding query's output differs from eager's (it sees no key: 0 here), so no label reads one
    labels = ids.masked_fill(mask == 0, -100)
    if kind == "llama":
        labels[:, 1:] = labels[:, 1:].masked_fill(mask[:, :-1] == 0, -100)
    model.set_attn_implementation("eager")
    ref_loss, ref = _step(model, ids, mask, labels)
    model.set_attn_implementation("fa_amd")
    torch._dynamo.reset()
    loss, got = _step(model, ids, mask, labels, torch.compile(model, fullgraph=True, dynamic=dynamic))
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    assert got.keys() == ref.keys()
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], atol=2e-5, rtol=2e-4, msg=name)
    # eager calls after the traced ones still use (and fill) the caches
    hf._last_keys.clear()
    hf._last.clear()
    loss, _ = _step(model, ids, mask, labels)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    assert (hf._last_keys if route == "dense" else hf._last)


def test_compiled_static_cache_decoding_matches_eager():
    """torch.compile(fullgraph=True) of a Llama's forward over a static cache (compiled generation's setup): the
    prompt, left-padded, then greedy steps one token at a time; logits equal eager HF's (fp32)."""
    from flash_attention_amd.integrations import hf

    hf.register()
    model = _model("llama").eval()
    ids = torch.randint(1, 97, (2, 12))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0

    def run(impl, compiled):
        model.set_attn_implementation(impl)
        torch._dynamo.reset()
        cache = transformers.StaticCache(config=model.config, max_cache_len=20)
        forward = torch.compile(model.forward, fullgraph=True) if compiled else model.forward
        logits, m = [], mask
        with torch.no_grad():
            out = forward(input_ids=ids, attention_mask=m, past_key_values=cache, cache_position=torch.arange(12))
            for step in range(3):
                logits.append(out.logits[:, -1])
                token = out.logits[:, -1].argmax(-1, keepdim=True)
                m = torch.cat([m, torch.ones_like(token)], 1)
                out = forward(input_ids=token, attention_mask=m, past_key_values=cache,
                              cache_position=torch.tensor([12 + step]))
        return torch.stack(logits)

    ref = run("eager", False)
    torch.testing.assert_close(run("fa_amd", True), ref, atol=1e-5, rtol=1e-5)


def test_compiled_bert_with_attention_dropout_and_checkpointing_matches_eager():
    """A BERT training step with attention dropout and gradient checkpointing (each layer's forward recomputed in
    the backward) under torch.compile: the same dropout masks as eager, layer by layer, recomputation included, so
    the same loss and gradients (fullgraph=False: HF's checkpointing logs a warning, which dynamo does not trace)."""
    from flash_attention_amd.integrations import hf

    hf.register()
    config = transformers.BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.2,
                                     max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(config).train()
    model.set_attn_implementation("fa_amd")
    model.gradient_checkpointing_enable()
    ids = torch.randint(0, 97, (3, 16))
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    torch.manual_seed(1)
    ref_loss, ref = _step(model, ids, mask, labels)
    torch._dynamo.reset()
    torch.manual_seed(1)
    loss, got = _step(model, ids, mask, labels, torch.compile(model, backend="aot_eager"))
    torch.testing.assert_close(loss, ref_loss, atol=1e-6, rtol=1e-6)
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], atol=1e-6, rtol=1e-5, msg=name)
