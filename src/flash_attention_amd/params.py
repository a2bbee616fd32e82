"""The normalised description of one attention call, shared by every backend.

``AttnParams`` carries everything but q, k, v (what a backend needs to compute);
``Problem`` carries only metadata (what a backend needs to decide whether it can).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch


class AttnParams(NamedTuple):
    """Options of one call after validation and normalisation (a NamedTuple: cheap to build per call).

    Masks are bottom-right aligned (offset ``seqlen_k - seqlen_q`` per sequence).
    ``window_left``/``window_right`` use -1 for unbounded; ``causal`` implies
    ``window_right == 0`` (normalised that way by the API layer).
    """

    softmax_scale: float
    causal: bool = False
    window_left: int = -1
    window_right: int = -1
    softcap: float = 0.0
    dropout_p: float = 0.0
    alibi_slopes: torch.Tensor | None = None  # (nheads,) or (batch, nheads), fp32
    cu_seqlens_q: torch.Tensor | None = None  # (batch + 1,) int32, varlen only
    cu_seqlens_k: torch.Tensor | None = None
    max_seqlen_q: int = 0
    max_seqlen_k: int = 0
    # 64-bit Philox key of the dropout mask (see philox.py); in calls compiled on a GPU for the triton backend, an int64
    # tensor [] on q's device holding it (ops.py: so that CUDA graphs replay its draw)
    seed: int | torch.Tensor = 0
    deterministic: bool = False
    return_lse: bool = False
    # varlen rows outside every sequence (past cu_seqlens[-1]) of out / dq / dk / dv are written
    # as zeros (flash_attn's zero_tensors; the Hugging Face integration packs into a fixed size)
    zero_tensors: bool = False
    # A chunk of a longer sequence (ring attention): diag_offset is added to seqlen_k - seqlen_q,
    # the bottom-right offset of the masks and of ALiBi's distances (key j is visible from query i
    # iff j <= i + seqlen_k - seqlen_q + diag_offset under causal, ...); dropout_offset_q/_k are
    # added to the query row and key column counters of the Philox mask (this chunk's first
    # row and key in the whole sequence), so the mask is the one of the whole sequence.
    diag_offset: int = 0
    dropout_offset_q: int = 0
    dropout_offset_k: int = 0
    # Beyond flash_attn (CONTRACT.md): a bias added to the scores after ALiBi and before the masks,
    # as a 4-D view broadcastable to [b, h, sq, sk] (size-1 dims broadcast through stride 0; bool =
    # a mask, True visible), and learnable sinks, fp32 [h], one extra logit per head in the softmax
    # denominator.
    attn_bias: torch.Tensor | None = None
    sinks: torch.Tensor | None = None
    # FP8 (e4m3) q, k, v: per-(batch, KV head) fp32 descale factors [b, hk] (FA3's names); the
    # scores use q * q_descale and k * k_descale, the output v * v_descale (CONTRACT.md "Beyond").
    q_descale: torch.Tensor | None = None
    k_descale: torch.Tensor | None = None
    v_descale: torch.Tensor | None = None
    # Other GPU work runs beside this call (ring attention's transfers, on NCCL's stream): the forward takes a grid
    # of one program per tile, never a persistent one, which holds every SM until it ends and so locks the transfer
    # kernels out (launch/fwd_gluon.py persistent).
    shares_gpu: bool = False

    @property
    def has_offsets(self) -> bool:
        return bool(self.diag_offset or self.dropout_offset_q or self.dropout_offset_k)

    @property
    def is_varlen(self) -> bool:
        return self.cu_seqlens_q is not None

    @property
    def has_window(self) -> bool:
        """True when some key is hidden by a window bound other than plain causal."""
        return self.window_left >= 0 or (self.window_right >= 0 and not self.causal)

    @property
    def window_only(self) -> bool:
        """A window and no other option of the options tier (no ALiBi, no softcap): launch/tiles.py WINDOW."""
        return self.has_window and self.alibi_slopes is None and self.softcap == 0

    @property
    def softcap_only(self) -> bool:
        """Softcap and no other option of the options tier, nor sinks: launch/tiles.py SOFTCAP."""
        return self.softcap > 0 and not self.has_window and self.alibi_slopes is None and self.sinks is None

    @property
    def alibi_only(self) -> bool:
        """ALiBi and no other option of the options tier, nor sinks: launch/tiles.py ALIBI."""
        return self.alibi_slopes is not None and not self.has_window and self.softcap == 0 and self.sinks is None


@dataclass(frozen=True)
class Problem:
    """Metadata of a call: what ``Backend.supports`` looks at. No tensors."""

    device_type: str  # "cuda" (also ROCm), "cpu", ...
    is_rocm: bool
    arch: str | None  # "sm90", "sm80", "gfx942", "gfx90a", "gfx1100", ... None on CPU
    dtype: torch.dtype
    batch: int
    seqlen_q: int  # max over sequences when varlen
    seqlen_k: int
    nheads: int
    nheads_k: int
    headdim: int
    headdim_v: int
    is_varlen: bool = False
    causal: bool = False
    window_left: int = -1
    window_right: int = -1
    softcap: float = 0.0
    has_alibi: bool = False
    dropout_p: float = 0.0
    needs_grad: bool = False
    return_lse: bool = False
    deterministic: bool = False
    compiling: bool = False  # traced by torch.compile
    offsets: bool = False  # AttnParams.diag_offset / dropout offsets set (a chunk of a longer sequence)
    bias: str = ""  # "" (none), "float" (added to the scores) or "bool" (a mask, True = visible)
    bias_shape: tuple = ()  # the bias's 4-D shape (size-1 dims broadcast)
    bias_grad: bool = False  # the float bias requires a gradient
    has_sinks: bool = False
    zero_tensors: bool = False  # varlen rows past the last sequence are written as zeros (AttnParams)
    fp8: bool = False  # q, k, v in FP8 (e4m3) with descale factors; output bf16, forward only
    kind: str = "attn"  # "attn" or "kvcache"
    extra: tuple = field(default=())  # kind-specific facts, e.g. (("paged", True),)
    window_dropped: tuple = ()  # (left, right, causal) as asked, where a bound of them hid no key (core._unbounded)
    unaligned: bool = False  # a stride of q, k or v but the last is not a multiple of 16 elements (symbolic: not read)

    @property
    def has_window(self) -> bool:
        return self.window_left >= 0 or (self.window_right >= 0 and not self.causal)

    @property
    def window_only(self) -> bool:
        """A window and no other option of the options tier (no ALiBi, no softcap): launch/tiles.py WINDOW."""
        return self.has_window and not self.has_alibi and self.softcap == 0

    @property
    def softcap_only(self) -> bool:
        """Softcap and no other option of the options tier, nor sinks: launch/tiles.py SOFTCAP."""
        return self.softcap > 0 and not self.has_window and not self.has_alibi and not self.has_sinks

    @property
    def alibi_only(self) -> bool:
        """ALiBi and no other option of the options tier, nor sinks: launch/tiles.py ALIBI."""
        return self.has_alibi and not self.has_window and self.softcap == 0 and not self.has_sinks

    def describe(self) -> str:
        opts = [self.kind, str(self.dtype).replace("torch.", ""), self.device_type]
        if self.arch:
            opts.append(self.arch)
        opts.append(
            f"b={self.batch} sq={self.seqlen_q} sk={self.seqlen_k} h={self.nheads}/{self.nheads_k} d={self.headdim}"
            + (f"/{self.headdim_v}" if self.headdim_v != self.headdim else "")
        )
        for flag, on in (
            ("varlen", self.is_varlen),
            ("causal", self.causal),
            (f"window=({self.window_left},{self.window_right})", self.has_window),
            (f"softcap={self.softcap}", self.softcap > 0),
            ("alibi", self.has_alibi),
            (f"dropout={self.dropout_p}", self.dropout_p > 0),
            ("grad", self.needs_grad),
            ("lse", self.return_lse),
            ("deterministic", self.deterministic),
            ("offsets", self.offsets),
            (f"{self.bias}-bias{list(self.bias_shape)}{'+grad' if self.bias_grad else ''}", bool(self.bias)),
            ("sinks", self.has_sinks),
            ("fp8-descale", self.fp8),
        ):
            if on:
                opts.append(flag)
        opts.extend(f"{k}={v}" for k, v in self.extra)
        if self.window_dropped:
            left, right, causal = self.window_dropped
            opts.append(f"(window_size=({left},{right}){' causal' if causal else ''}: a bound that hides no key at "
                        "these lengths is dropped)")
        return " ".join(opts)


def device_arch(device: torch.device) -> tuple[bool, str | None]:
    """(is_rocm, arch name) of a device: ("sm90"), ("gfx942"), or (False, None) off-GPU."""
    if device.type != "cuda":
        return False, None
    is_rocm = torch.version.hip is not None
    props = torch.cuda.get_device_properties(device)
    if is_rocm:
        return True, getattr(props, "gcnArchName", "gfx").split(":")[0]
    return False, f"sm{props.major}{props.minor}"
