"""The dropout mask's random numbers: Philox-4x32 (7 rounds), the PyTorch twin.

Every backend that implements dropout draws the mask from the same counter-based
function, so a mask is never stored: the backward pass regenerates it, and the Triton
kernels and the PyTorch path agree bit for bit (tests check this). Element (b, h, i, j)
(sequence b, query head h, query row i and key column j, counted inside the sequence)
is kept when word ``i % 4`` of Philox with counter ``(j, i // 4, b * nheads + h, 0)`` and key
``(seed & 0xffffffff, seed >> 32)`` is ``>= dropout_threshold(p)``: four neighbouring query rows
share one Philox evaluation (the kernels evaluate it once per four rows). Calls with ALiBi or
softcap draw the classic mask instead: word 0 of counter ``(j, i, b * nheads + h, 0)`` (``quad_mask``).

The Triton twins are ``kernels/common.py:dropout_keep`` and ``philox_keep``.
"""
from __future__ import annotations

import torch

PHILOX_ROUNDS = 7
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF


def dropout_threshold(p: float) -> int:
    """uint32 threshold: a word below it drops the element (probability p)."""
    return min(int(p * 4294967296.0), _MASK32)


def new_seed(generator: torch.Generator | None = None) -> int:
    """A fresh 63-bit Philox key from torch's CPU generator (reproducible under torch.manual_seed)."""
    # one draw and one conversion (two cost 3x the host time); below 2**63, so that the seed fits the
    # int64 tensors it travels in (flash_attn's rng_state, the ring's broadcast)
    return int(torch.randint(0, 2**63 - 1, (), generator=generator, dtype=torch.int64))


def device_seed(device: torch.device) -> torch.Tensor:
    """A fresh 63-bit Philox key drawn on ``device`` by its generator (reproducible under torch.manual_seed), as an
    int64 tensor [] there: the key of a call compiled by torch.compile on a GPU, which a CUDA graph replays with a new
    draw each time (the kernels read it there: ``kernels/common.py philox_key``)."""
    return torch.randint(0, 2**63 - 1, (), dtype=torch.int64, device=device)


def _mulhilo(a: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) 32-bit words of a * m for uint32 values held in int64, without overflow."""
    m_lo, m_hi = m & 0xFFFF, m >> 16
    p_lo = a * m_lo  # < 2**48
    p_hi = a * m_hi  # < 2**48
    mid = p_hi + (p_lo >> 16)  # a * m >> 16, < 2**49
    hi = mid >> 16
    lo = ((mid & 0xFFFF) << 16) | (p_lo & 0xFFFF)
    return hi & _MASK32, lo & _MASK32


def philox_words(seed: int | torch.Tensor, c0, c1, c2) -> tuple[torch.Tensor, ...]:
    """The four output words of Philox-4x32-7 for counters (c0, c1, c2, 0), as int64 in [0, 2**32). seed: the key,
    an int or an int64 tensor [] (a key drawn on the device: read there, no synchronisation)."""
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    c0, c1, c2 = (torch.as_tensor(c).to(torch.int64) & _MASK32 for c in (c0, c1, c2))
    c0, c1, c2 = torch.broadcast_tensors(c0, c1, c2)
    c3 = torch.zeros_like(c0)
    for _ in range(PHILOX_ROUNDS):
        hi0, lo0 = _mulhilo(c0, _M0)
        hi1, lo1 = _mulhilo(c2, _M1)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    return c0, c1, c2, c3


def quad_mask(alibi: bool, softcap: float) -> bool:
    """Whether a call draws the four-row mask: every call without ALiBi and softcap (the kernels'
    ``drop_mode``; their builds with ALiBi or softcap keep the classic per-element mask, whose every-
    option builds fit the registers where the four-row one spilled)."""
    return not (alibi or softcap > 0)


def dropout_keep_mask(
    seed: int | torch.Tensor, p: float, bh: torch.Tensor | int, rows: torch.Tensor, cols: torch.Tensor,
    quads: bool = True
) -> torch.Tensor:
    """Bool keep mask for rows x cols (broadcast), bh = b * nheads + h (broadcastable). quads: the
    four-row mask (word rows % 4 of counters (cols, rows // 4, bh)), else the classic one (word 0 of
    (cols, rows, bh)); ``quad_mask`` says which a call draws."""
    rows = torch.as_tensor(rows).to(torch.int64)
    bh = torch.as_tensor(bh, device=rows.device)
    if not quads:
        return philox_words(seed, cols, rows, bh)[0] >= dropout_threshold(p)
    words = philox_words(seed, cols, rows // 4, bh)
    word = torch.stack(words, -1).gather(-1, (rows % 4).expand(words[0].shape).unsqueeze(-1)).squeeze(-1)
    return word >= dropout_threshold(p)
