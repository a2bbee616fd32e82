"""Hugging Face transformers: ``attn_implementation="fa_amd"``.

Example::

    import flash_attention_amd.integrations.hf as fa_hf
    fa_hf.register()  # once
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="fa_amd")

- No mask: dense calls. Dense calls take HF's [b, h, s, d] tensors into one autograd node
  (``core.attention_heads_first``: the layout change inside it, not three transposes before it).
- A 2-D padding mask [b, sk] (``padding_mask``, the mask function ``register()`` installs: the
  model's mask as it is, never read on the host), two ways, chosen per call by its size
  (``PACK_MIN_SCORES``):
  - small calls (host-bound: BERT-sized batches, generation steps): one dense call with the mask
    as a key mask (``attn_bias`` bool [b, 1, 1, sk], read with stride 0 over heads and queries),
    as HF's eager and sdpa paths compute them: padding keys are left out (the kernels skip the key
    blocks the mask keeps none of: KEY_MASK), padding query rows are computed (and ignored by the
    model's loss), a row that sees no valid key gives 0. No copies.
  - large calls (GPU-bound: long padded batches): the valid tokens are packed into varlen calls,
    so no work is spent on padding. The packing (a stable sort of the mask, cu_seqlens) is
    computed once per forward pass, for the mask tensor every layer shares, with fixed-size GPU
    ops only (no host synchronisation). Packed tensors keep the padded size (b * s rows): the
    valid tokens first, then rows that belong to no sequence, which the kernels write as zeros
    (``zero_tensors``), so padding positions get 0 outputs and 0 gradients.
  Any 2-D mask works both ways, holes included (tokens keep their order); with a sliding window only the
  first way (packing closes the holes up, and a window counts positions). A batch of one sequence,
  causal, packs the same way and then runs as one dense causal call over the packed rows
  (``_one_sequence``: exact for its valid rows, 0 after them), so that a dense kernel can serve it.
- Packed batches without padding (HF's ``cu_seq_lens_q`` / ``cu_seq_lens_k`` /
  ``max_length_q`` / ``max_length_k`` keyword arguments, batch 1): varlen calls as given.
- A static cache (``cache_implementation="static"``: keys are the cache's slots, written or not, and queries sit at
  absolute positions): ``padding_mask`` returns HF's own 4-D bool mask [b, 1, sq, sk] (``sdpa_mask``), which the
  attention takes as it is (a dense call with it as ``attn_bias``, no causal flag, no window).
- Sliding window, softcap and attention sinks (``s_aux``, gpt-oss: one learnable logit per
  head, taken as fp32 ``sinks``) are passed through; ``output_attentions`` raises instead of
  being ignored.
"""
from __future__ import annotations

import torch

from .. import core

# transformers treats any name containing "flash" as a hub kernel to download, hence the short name.
NAME = "fa_amd"


def _window(sliding_window, key_length: int) -> tuple[int, int]:
    # HF's convention for flash kernels: a window of `sliding_window` tokens including the current one.
    if sliding_window is None or key_length <= sliding_window:
        return (-1, -1)
    return (sliding_window - 1, sliding_window - 1)


class _Packing:
    """How one 2-D padding mask packs a padded [b, s] batch into varlen rows, for q and for k/v.

    order_*: [b * s] int64, the padded positions in packed order (valid tokens of sequence 0,
    of sequence 1, ..., then the padding); inverse_q: packed row of each padded query position;
    cu_*: (b + 1,) int32 cumulative valid lengths.
    """

    __slots__ = ("mask", "version", "sq", "order_q", "order_k", "inverse_q", "inverse_k", "cu_q", "cu_k", "_first")

    def __init__(self, mask: torch.Tensor, sq: int):
        # traced (torch.compile): no version (dynamo cannot read it; a traced packing is never cached)
        self.mask, self.sq = mask, sq
        self.version = None if torch.compiler.is_compiling() else mask._version
        keep_k = mask.bool()
        keep_q = keep_k[:, -sq:]
        self.order_k, self.cu_k = self._order(keep_k)
        if keep_q.shape[1] == keep_k.shape[1]:
            self.order_q, self.cu_q = self.order_k, self.cu_k
        else:
            self.order_q, self.cu_q = self._order(keep_q)
        self.inverse_q = self._inverse(self.order_q)
        self.inverse_k = self.inverse_q if self.order_k is self.order_q else self._inverse(self.order_k)
        self._first = None

    def first_sequence_rows(self) -> torch.Tensor:
        """[b * sq, 1, 1] bool: the packed rows of sequence 0 (rows < cu_q[1]), made once per mask on the
        device (no synchronisation)."""
        if self._first is None:
            rows = torch.arange(self.order_q.numel(), device=self.order_q.device)
            self._first = (rows < self.cu_q[1])[:, None, None]
        return self._first

    @staticmethod
    def _inverse(order: torch.Tensor) -> torch.Tensor:
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        return inverse

    @staticmethod
    def _order(keep: torch.Tensor):
        # a stable sort of "is padding" over the flattened batch: valid tokens first, in order
        order = torch.sort((~keep).flatten().to(torch.int8), stable=True).indices
        lens = keep.sum(1, dtype=torch.int32)
        cu = torch.nn.functional.pad(lens.cumsum(0, dtype=torch.int32), (1, 0))
        return order, cu

    def matches(self, mask: torch.Tensor, sq: int) -> bool:
        return self.mask is mask and self.version == mask._version and self.sq == sq


_last: list[_Packing] = []  # the packing of the last mask seen (one forward pass shares it)
_last_keys: list = []  # (mask, its version, the key mask [b, 1, 1, sk] bool) of the last mask seen

# A padded call with at least this many scores (b * h * sq * sk) is packed into varlen calls; a
# smaller one is a dense call with a key mask. Packing costs host time per layer (three gathers
# and a scatter, forward and backward); the dense call spends GPU time on the padding. Chosen on
# the e2e suite's models (H100; benchmarks/results/): BERT-base up to b=8 s=1024 (1e8 scores) runs
# faster dense, the padded Llama b=4 s=2048 row (32 heads, 5.4e8) packed.
PACK_MIN_SCORES = 1 << 28


class _Permute(torch.autograd.Function):
    """x [n, ...] -> its rows in the order ``order`` (a permutation of 0 .. n - 1). The backward
    gathers the gradient with the inverse permutation: index_select's own backward adds the rows
    into a zero-filled buffer with atomics (a fill and a scatter, not bitwise reproducible)."""

    @staticmethod
    def forward(ctx, x, order, inverse):
        ctx.save_for_backward(inverse)
        return x.index_select(0, order)

    @staticmethod
    def backward(ctx, grad):
        (inverse,) = ctx.saved_tensors
        return grad.index_select(0, inverse), None, None


def _permute(x: torch.Tensor, order: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    if torch.is_grad_enabled() and x.requires_grad:
        return _Permute.apply(x, order, inverse)
    return x.index_select(0, order)


def _key_mask(mask: torch.Tensor) -> torch.Tensor:
    """The padding mask as a bool [b, 1, 1, sk] key mask (True = a valid key), once per mask (eager: the layers of
    a forward pass share it; traced by torch.compile, the graph computes it, as dynamo cannot read a version)."""
    if torch.compiler.is_compiling():
        return mask.bool()[:, None, None, :]
    if _last_keys and _last_keys[0] is mask and _last_keys[1] == mask._version:
        return _last_keys[2]
    keys = mask.bool()[:, None, None, :]
    _last_keys[:] = [mask, mask._version, keys]
    return keys


def _packing(mask: torch.Tensor, sq: int) -> _Packing:
    if torch.compiler.is_compiling():  # traced: the graph packs (no cache: see _key_mask)
        return _Packing(mask, sq)
    if _last and _last[0].matches(mask, sq):
        return _last[0]
    packing = _Packing(mask, sq)
    _last[:] = [packing]
    return packing


def _checked(mask: torch.Tensor, b: int, sk: int) -> torch.Tensor:
    """mask, if it is HF's 2-D padding mask [b, sk]; else a ValueError naming its shape."""
    if mask.dim() != 2 or tuple(mask.shape) != (b, sk):
        raise ValueError(f"attention_mask has shape {tuple(mask.shape)}; the flash_attention_amd integration takes "
                         f"HF's 2-D padding mask ({b}, {sk}) (register() installs the matching mask function)")
    return mask


# Dense calls take HF's [b, h, s, d] tensors into one autograd node (core.attention_heads_first) instead of three
# transposes and the call: a module attribute for benchmarks/bert_gap.py and hf_attention_host.py (on / off in one
# process), not a user setting.
HEADS_FIRST = True


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      sliding_window: int | None = None, softcap: float | None = None,
                      is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """HF attention interface: query [b, h, sq, d], key/value [b, hk, sk, d] -> ([b, sq, h, d], None)."""
    if kwargs.get("output_attentions"):
        raise ValueError("output_attentions=True is not available with flash_attention_amd; use 'eager'")
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    b, h, sq = query.shape[:3]
    sk = key.shape[2]
    dropout_p, window, softcap = dropout if module.training else 0.0, _window(sliding_window, sk), softcap or 0.0
    sinks = kwargs.get("s_aux")
    if sinks is not None:
        sinks = sinks.float()
    if attention_mask is not None and attention_mask.dim() == 4:  # padding_mask's static-cache mask: it says it all
        if attention_mask.dtype != torch.bool or attention_mask.shape[0] not in (1, b) or attention_mask.shape[2:] != (
                sq, sk):
            raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)} and dtype {attention_mask.dtype};"
                             f" a 4-D mask must be bool [b|1, 1|h, {sq}, {sk}] (True = visible)")
        return core.attention_heads_first(query, key, value, dropout_p, scaling, False, (-1, -1), softcap,
                                          attention_mask, sinks), None
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    dense = cu_q is None or cu_k is None or b != 1
    if HEADS_FIRST and dense and (attention_mask is None or b * h * sq * sk < PACK_MIN_SCORES or window != (-1, -1)):
        # dense calls on HF's [b, h, s, d] tensors as they are (core.attention_heads_first)
        mask = None if attention_mask is None else _key_mask(_checked(attention_mask, b, sk))
        return core.attention_heads_first(query, key, value, dropout_p, scaling, causal, window, softcap, mask,
                                          sinks), None
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [b, s, h, d]
    options = dict(dropout_p=dropout_p, softmax_scale=scaling, causal=causal, window_size=window, softcap=softcap)
    if sinks is not None:
        options["sinks"] = sinks
    if attention_mask is None and not dense:
        max_q, max_k = kwargs.get("max_length_q") or sq, kwargs.get("max_length_k") or sk
        cu_q32 = cu_q.to(torch.int32)
        # one tensor for both when HF passes one (self-attention over packed sequences): the Gluon forward's
        # varlen path takes such calls (launch/fwd_gluon.py), two int32 copies of one int64 tensor it would not
        cu_k32 = cu_q32 if cu_k is cu_q else cu_k.to(torch.int32)
        out = core.attention(q[0], k[0], v[0], cu_seqlens_q=cu_q32, cu_seqlens_k=cu_k32,
                             max_seqlen_q=int(max_q), max_seqlen_k=int(max_k), **options)
        return out[None], None
    if attention_mask is None:
        return core.attention(q, k, v, **options), None
    _checked(attention_mask, b, sk)
    if b * h * sq * sk < PACK_MIN_SCORES or window != (-1, -1):
        # a sliding window is measured in positions, which packing would shift where the mask has holes (the valid
        # tokens close up): such calls stay dense (session 57's fuzzer, tests/fuzz_hf.py)
        return core.attention(q, k, v, attn_bias=_key_mask(attention_mask), **options), None
    pack = _packing(attention_mask, sq)
    q_packed = _permute(q.reshape(b * sq, *q.shape[2:]), pack.order_q, pack.inverse_q)  # [b * sq, h, d]
    k_packed = _permute(k.reshape(b * sk, *k.shape[2:]), pack.order_k, pack.inverse_k)  # [b * sk, hk, d]
    v_packed = _permute(v.reshape(b * sk, *v.shape[2:]), pack.order_k, pack.inverse_k)  # [b * sk, hk, dv]
    if b == 1 and causal and pack.order_k is pack.order_q:
        out_packed = _one_sequence(q_packed, k_packed, v_packed, pack, options)
    else:
        out_packed = core.attention(q_packed, k_packed, v_packed, cu_seqlens_q=pack.cu_q, cu_seqlens_k=pack.cu_k,
                                    max_seqlen_q=sq, max_seqlen_k=sk, zero_tensors=True, **options)
    out = _permute(out_packed, pack.inverse_q, pack.order_q).view(b, sq, *out_packed.shape[1:])
    return out, None


def _one_sequence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pack: _Packing, options: dict) -> torch.Tensor:
    """The packed varlen call of a batch of one sequence, causal self-attention, as one dense causal call.

    Its valid tokens are the first rows of q, k and v (the packing puts them first, in order), so over all
    the rows a dense causal call computes each valid row exactly as the varlen call does (a valid row sees
    only keys before it: valid ones, at the same positions). The rows after them belong to no sequence:
    they get 0, as the varlen call's ``zero_tensors`` gives them, so their gradient is 0 too and they add
    nothing to dK / dV. The dense call may take a dense kernel where no varlen one matches it (SDPA's cuDNN
    kernel for causal GQA on Hopper: the Llama-style row of the e2e suite with a mask of ones, whose mask
    the sync-free mask function cannot drop). It goes through the dispatcher like any call (forcing and
    explain() as usual). Inputs with NaN / inf in the rows after the sequence would reach the valid keys'
    gradients through those rows' scores (the varlen call never reads them): HF's padding positions hold
    finite hidden states."""
    out = core.attention(q[None], k[None], v[None], **options)[0]  # [b * sq, h, dv]
    return torch.where(pack.first_sequence_rows(), out, 0.0)


# Device types whose masks padding_mask reads on the host (a CPU tensor: no synchronisation)
READ_ON = ("cpu",)


def padding_mask(*args, kv_length: int | None = None, attention_mask: torch.Tensor | None = None, **kwargs):
    """The mask function ``register()`` installs by default: HF's 2-D padding mask [b, kv_length] (its last
    kv_length columns, as HF's own flash mask function slices it), passed on without reading its values
    on a GPU.

    HF's ``flash_attention_mask`` also drops a mask that has no padding (``attention_mask.all()``): one
    host synchronisation per forward pass on a GPU, and a graph break under torch.compile. Here a GPU
    mask without padding reaches ``attention_forward`` like any other (small calls: a key mask; large
    calls: packed into varlen calls of full length), with the same results. A CPU mask (``READ_ON``) is
    read as HF does, outside torch.compile: no synchronisation there, and a batch without padding stays
    a plain dense call."""
    if kv_length is None or (attention_mask is not None and attention_mask.dim() != 2):
        return attention_mask
    if _static_cache(attention_mask, kv_length, kwargs):
        # keys past the written ones are empty slots, and the queries sit at absolute positions, not at the end of the
        # keys (flash_attn's causal alignment): HF's own 4-D bool mask [b, 1, sq, kv_length] says it all
        from transformers.masking_utils import sdpa_mask

        return sdpa_mask(*args, kv_length=kv_length, attention_mask=attention_mask, **{
            **kwargs, "allow_is_causal_skip": False})
    if attention_mask is None:
        return None
    mask = attention_mask[:, -kv_length:]
    if (mask.device.type in READ_ON and mask.shape[1] == kv_length and not torch.compiler.is_compiling()
            and bool(mask.all())):
        return None
    return mask


def _static_cache(attention_mask, kv_length, kwargs: dict) -> bool:
    """Whether a mask function call is over a static cache's slots: HF passes a tensor q_offset for those (reading it
    would synchronise), or the queries do not end where the keys end (q_offset + q_length against kv_offset +
    kv_length: the prompt's call), or the 2-D mask is shorter than the keys (transformers versions that pass no
    q_offset)."""
    q_offset, q_length = kwargs.get("q_offset"), kwargs.get("q_length")
    if isinstance(q_offset, torch.Tensor):
        return True
    if q_offset is not None and q_length is not None and q_offset + q_length != kwargs.get("kv_offset", 0) + kv_length:
        return True
    return attention_mask is not None and attention_mask.shape[1] < kv_length


def register(name: str = NAME, sync_free: bool = True) -> None:
    """Register ``attn_implementation=name`` ("fa_amd": attention and mask functions) with transformers.

    sync_free (default): the mask function is ``padding_mask`` (no host synchronisation, nothing that
    breaks a torch.compile graph). False: HF's own ``flash_attention_mask``, which reads the mask once
    per forward pass (a synchronisation) and drops it when it has no padding, so that such a batch's
    large calls stay dense (SDPA's cuDNN kernel on Hopper) instead of being packed."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, padding_mask if sync_free else flash_attention_mask)
