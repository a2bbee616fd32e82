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
def test_llama_logits_match_eager(padded):
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
