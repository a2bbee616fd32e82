"""Models the bench trains and runs: Hugging Face transformers models built from configs (random
weights, nothing downloaded) and, without transformers, a small BERT-shaped encoder of our own."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import flash_attn_func
from .attn import standard


def have_transformers() -> bool:
    try:
        import transformers  # noqa: F401
    except Exception:
        return False
    return True


def register_hf() -> None:
    from ..integrations import hf

    hf.register()


# ---------------------------------------------------------------------- configs
BERT_BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072)
# CPU sizes: attention dropout off (SDPA's CPU kernels have no dropout; the tables say so)
BERT_SMALL = dict(vocab_size=1024, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
                  attention_probs_dropout_prob=0.0)
BERT_TINY = dict(vocab_size=256, hidden_size=64, num_hidden_layers=1, num_attention_heads=2, intermediate_size=128,
                 attention_probs_dropout_prob=0.0)

# Llama-style: 8 layers, hidden 2048, 32 query heads over 8 KV heads (d = 64), the call-path issue's model.
LLAMA_8L = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                num_attention_heads=32, num_key_value_heads=8)
# Llama 3.1 8B's shape (random weights), for the serving row on a large GPU.
LLAMA_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0)
LLAMA_SMALL = dict(vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2)
LLAMA_TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                  num_attention_heads=4, num_key_value_heads=2)
# Gemma 2's attention (random weights): head dim 256, scores softcapped at 50, a sliding window on every other
# layer (2048 here: Gemma 2 takes 4096 at an 8k context), GQA 2:1; 8 layers, hidden 2048, vocab cut to 32000.
GEMMA2_8L = dict(vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=8,
                 num_attention_heads=8, num_key_value_heads=4, head_dim=256, sliding_window=2048,
                 attn_logit_softcapping=50.0, final_logit_softcapping=30.0, query_pre_attn_scalar=256)
GEMMA2_SMALL = dict(vocab_size=2048, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=1, head_dim=128, sliding_window=256,
                    attn_logit_softcapping=50.0, final_logit_softcapping=30.0, query_pre_attn_scalar=128)
GEMMA2_TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=16,
                   attn_logit_softcapping=50.0, final_logit_softcapping=30.0, query_pre_attn_scalar=32)

# GPT-OSS's attention (random weights): head dim 64, 64/8 heads in the real models (32/4 here, the same 8:1 group), a
# sliding window of 128 on every other layer, one learnable sink logit per head (s_aux); its MoE cut to 4 experts
# of which 2 per token, 8 layers, hidden 2048, vocab cut to 32000.
_GPTOSS = dict(head_dim=64, sliding_window=128, num_local_experts=4, num_experts_per_tok=2)
GPTOSS_8L = dict(_GPTOSS, vocab_size=32000, hidden_size=2048, intermediate_size=2048, num_hidden_layers=8,
                 num_attention_heads=32, num_key_value_heads=4)
GPTOSS_SMALL = dict(_GPTOSS, vocab_size=2048, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                    num_attention_heads=8, num_key_value_heads=1, head_dim=32, sliding_window=64)
GPTOSS_TINY = dict(_GPTOSS, vocab_size=256, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=1, head_dim=16, sliding_window=8)


def describe(cfg: dict) -> str:
    h, layers, heads = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads")
    return (f"{layers} layers, hidden {h}, {heads}{'/' + str(kv) if kv and kv != heads else ''} heads "
            f"(d={cfg.get('head_dim') or h // heads}), vocab {cfg['vocab_size']}")


def _build(cls, config, device, dtype):
    """cls(config) with its weights created on `device` in `dtype` (no float32 copy of a large model)."""
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        with torch.device(device):
            model = cls(config)
    finally:
        torch.set_default_dtype(old)
    return model.to(device=device, dtype=dtype)


def hf_bert(cfg: dict, max_len: int, device, dtype):
    import transformers

    config = transformers.BertConfig(**cfg, max_position_embeddings=max(512, max_len))
    return _build(transformers.BertForMaskedLM, config, device, dtype).train()


def hf_llama(cfg: dict, max_len: int, device, dtype, init_std: float | None = None):
    import transformers

    extra = {} if init_std is None else {"initializer_range": init_std}
    config = transformers.LlamaConfig(**cfg, max_position_embeddings=max(2048, max_len), **extra)
    return _build(transformers.LlamaForCausalLM, config, device, dtype)


def hf_gemma2(cfg: dict, max_len: int, device, dtype):
    import transformers

    config = transformers.Gemma2Config(**cfg, max_position_embeddings=max(2048, max_len))
    return _build(transformers.Gemma2ForCausalLM, config, device, dtype)


def hf_gpt_oss(cfg: dict, max_len: int, device, dtype):
    import transformers

    layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(cfg["num_hidden_layers"])]
    config = transformers.GptOssConfig(**cfg, layer_types=layer_types, max_position_embeddings=max(4096, max_len))
    return _build(transformers.GptOssForCausalLM, config, device, dtype)


def set_impl(model, impl: str) -> None:
    """attn_implementation of an HF model: "eager", "sdpa" or "fa_amd" (registered first)."""
    if impl == "fa_amd":
        register_hf()
    try:
        model.set_attn_implementation(impl)
    except (AttributeError, TypeError):  # older transformers: the attention functions read the config
        for m in model.modules():
            if getattr(m, "config", None) is not None:
                m.config._attn_implementation = impl


# ---------------------------------------------------------------------- our own BERT-shaped encoder
class _Layer(nn.Module):
    def __init__(self, hidden, heads, inter, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv, self.out = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, inter), nn.Linear(inter, hidden)

    def forward(self, x, impl, attn_dropout):
        b, s, hid = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, hid // self.heads).unbind(2)  # [b, s, h, d]
        p = attn_dropout if self.training else 0.0
        if impl == "standard":
            qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
            if p:  # standard with dropout: on the materialised probabilities
                scores = torch.matmul(qh, kh.transpose(-2, -1)) * qh.shape[-1] ** -0.5
                a = torch.matmul(F.dropout(torch.softmax(scores, -1), p), vh)
            else:
                a = standard(qh, kh, vh)
            a = a.transpose(1, 2)
        else:
            a = flash_attn_func(q, k, v, dropout_p=p)
        x = self.ln1(x + F.dropout(self.out(a.reshape(b, s, hid)), self.dropout, self.training))
        return self.ln2(x + F.dropout(self.fc2(F.gelu(self.fc1(x))), self.dropout, self.training))


class MiniBert(nn.Module):
    """BERT-shaped masked-LM encoder (post-LN layers, GELU MLP, dropout 0.1) with a pluggable
    attention: "standard" or our flash_attn_func (whatever backend is forced around the call)."""

    def __init__(self, vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
                 max_len=512, dropout=0.1, attention_probs_dropout_prob=0.1):
        super().__init__()
        self.attn_dropout = attention_probs_dropout_prob
        self.impl = "standard"
        self.tok = nn.Embedding(vocab_size, hidden_size)
        self.pos = nn.Embedding(max_len, hidden_size)
        self.ln = nn.LayerNorm(hidden_size)
        self.layers = nn.ModuleList(_Layer(hidden_size, num_attention_heads, intermediate_size, dropout)
                                    for _ in range(num_hidden_layers))
        self.head = nn.Linear(hidden_size, vocab_size)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, input_ids, labels=None, attention_mask=None):
        s = input_ids.shape[1]
        x = self.ln(self.tok(input_ids) + self.pos(torch.arange(s, device=input_ids.device)))
        for layer in self.layers:
            x = layer(x, self.impl, self.attn_dropout)
        logits = self.head(x)
        loss = None if labels is None else F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
        return _Out(loss, logits)


class _Out:
    def __init__(self, loss, logits):
        self.loss, self.logits = loss, logits


def own_bert(cfg: dict, max_len: int, device, dtype) -> MiniBert:
    with torch.device(device):
        model = MiniBert(**cfg, max_len=max(512, max_len))
    return model.to(dtype).train()


OOM = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


# ---------------------------------------------------------------------- batches and steps
def padded_batch(batch: int, seqlen: int, vocab: int, device, padded: bool, side: str = "right",
                 min_frac: float = 0.25, seed: int = 0) -> dict:
    """input_ids / attention_mask / labels as a tokenizer pads a batch to its longest member:
    lengths uniform in [min_frac * seqlen, seqlen], the longest exactly seqlen; labels -100 on padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seqlen), generator=g)
    if padded:
        lo = max(1, int(seqlen * min_frac))
        lens = torch.randint(lo, seqlen + 1, (batch,), generator=g)
        lens[0] = seqlen
        pos = torch.arange(seqlen)
        mask = pos[None, :] < lens[:, None] if side == "right" else pos[None, :] >= (seqlen - lens)[:, None]
        mask = mask.long()
    else:
        mask = torch.ones(batch, seqlen, dtype=torch.long)
    labels = ids.masked_fill(mask == 0, -100)
    out = dict(input_ids=ids, attention_mask=mask, labels=labels)
    return {k: v.to(device) for k, v in out.items()}


def real_tokens(batch: dict) -> int:
    return int(batch["attention_mask"].sum())


def train_step(model, batch: dict, optimizer, pass_mask: bool = True):
    """One training step: forward with labels, backward, AdamW step, grads reset to None."""
    inputs = dict(batch) if pass_mask else {k: v for k, v in batch.items() if k != "attention_mask"}

    def step():
        loss = model(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def adamw(model):
    # foreach: one fused pass over the parameters where available (torch's default on GPUs)
    return torch.optim.AdamW(model.parameters(), lr=1e-5)


def bytes_to_mib(n: float) -> float:
    return n / 2**20


def fmt_params(n: int) -> str:
    return f"{n / 1e6:.0f}M" if n < 1e9 else f"{n / 1e9:.1f}B"


def nparams(model) -> int:
    return sum(p.numel() for p in model.parameters())


def isqrt(n: int) -> int:
    return int(math.isqrt(n))
