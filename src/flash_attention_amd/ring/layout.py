"""Which part of the whole sequence each rank holds, and what each ring step computes.

Layouts (W ranks, rank r, a sequence of L tokens; L divisible by W, by 2W for zigzag):

- ``ring``: rank r holds tokens ``[r * L/W, (r + 1) * L/W)``.
- ``zigzag``: the sequence is cut in 2W chunks of ``c = L / (2W)`` tokens; rank r holds chunk r
  then chunk 2W-1-r, concatenated: tokens ``[r*c, (r+1)*c)`` then ``[(2W-1-r)*c, (2W-r)*c)``.
  Under a causal mask every rank then has the same amount of work.
- ``varlen`` (ring over packed sequences): every sequence i of length ``L_i`` (divisible by W)
  is cut in W pieces of ``c_i = L_i / W`` tokens; rank r holds piece r of every sequence,
  packed in sequence order, so its local ``cu_seqlens`` is the global one divided by W (the
  same on every rank).

At ring step t rank r holds the keys/values of rank ``s = (r - t) mod W``. The local query rows
times the visiting key rows break into *pieces*: one call of ``core.forward_pass`` /
``core.backward_pass`` each, with the ``diag_offset`` that aligns the masks and ALiBi of the
piece to the whole sequence and the dropout offsets that give it the whole sequence's dropout
mask. Pieces that the masks hide completely are skipped; pieces whose masks and ALiBi do not
depend on the offset (fully visible, or a causal diagonal of a chunk with itself) get no offset
and merge into as few calls as possible (one per step for ``ring`` and ``zigzag`` under plain
causal attention, exactly ring-flash-attn's balanced zigzag schedule).

The helpers ``shard``, ``unshard`` and ``shard_varlen`` cut a whole tensor into these layouts
(tests, benchmarks, data loaders).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

LAYOUTS = ("ring", "zigzag")


class Chunk(NamedTuple):
    """Rows ``[local, local + length)`` of a rank's shard hold tokens ``[start, start + length)``
    of the whole sequence."""

    local: int
    length: int
    start: int


class Piece(NamedTuple):
    """One attention call of a ring step: local query rows [q0, q1) against rows [k0, k1) of
    the visiting keys. ``masked``: the caller's causal / window mask applies (else every key is
    visible). Varlen pieces carry their own cu_seqlens (``cu``) and ``max_seqlen``."""

    q0: int
    q1: int
    k0: int
    k1: int
    masked: bool
    diag_offset: int = 0
    dropout_offsets: tuple[int, int] = (0, 0)
    cu: torch.Tensor | None = None
    max_seqlen: int = 0


@dataclass(frozen=True)
class MaskSpec:
    """The mask options of a call as the API normalised them (causal => right = 0; -1 unbounded)."""

    causal: bool
    left: int
    right: int
    alibi: bool
    dropout: bool

    @property
    def plain(self) -> bool:
        """No option whose result depends on where a piece lies in the whole sequence, beyond
        the causal diagonal (no window bound, ALiBi or dropout)."""
        return self.left < 0 and (self.right < 0 or self.causal) and not self.alibi and not self.dropout


def chunks(layout: str, rank: int, world: int, local_len: int) -> list[Chunk]:
    """The chunks of rank ``rank``'s shard of ``local_len`` rows under ``layout``."""
    if layout == "ring":
        return [Chunk(0, local_len, rank * local_len)]
    if layout == "zigzag":
        c = local_len // 2
        return [Chunk(0, c, rank * c), Chunk(c, c, (2 * world - 1 - rank) * c)]
    raise ValueError(f"layout is {layout!r}; allowed: {', '.join(LAYOUTS)}")


def visibility(q_start: int, n: int, k_start: int, m: int, left: int, right: int) -> str:
    """"none", "full" or "partial": how much of keys [k_start, k_start + m) the queries
    [q_start, q_start + n) see under the window (left, right) (causal: right = 0), in whole-
    sequence positions (query i sees key j iff i - left <= j <= i + right, -1 unbounded)."""
    if n <= 0 or m <= 0:
        return "none"
    lo, hi = q_start, q_start + n - 1  # queries that see at least one of the keys
    if right >= 0:
        lo = max(lo, k_start - right)
    if left >= 0:
        hi = min(hi, k_start + m - 1 + left)
    if lo > hi:
        return "none"
    full = (right < 0 or k_start + m - 1 <= q_start + right) and (left < 0 or k_start >= q_start + n - 1 - left)
    return "full" if full else "partial"


def _piece(qc: Chunk, kc: Chunk, vis: str, spec: MaskSpec) -> Piece:
    masked = vis == "partial"
    # bottom-right offset of the call is m - n; the whole sequence's is qc.start - kc.start
    diag = (qc.start - kc.start) - (kc.length - qc.length)
    if not (masked or spec.alibi):
        diag = 0  # nothing depends on it: no offset, so every backend can serve the call
    drop = (qc.start, kc.start) if spec.dropout else (0, 0)
    return Piece(qc.local, qc.local + qc.length, kc.local, kc.local + kc.length, masked, diag, drop)


def _contiguous(cs: list[Chunk]) -> bool:
    return all(a.local + a.length == b.local for a, b in zip(cs, cs[1:]))


def _increasing(cs: list[Chunk]) -> bool:
    return all(a.start + a.length <= b.start for a, b in zip(cs, cs[1:]))


def step_pieces(q_chunks: list[Chunk], k_chunks: list[Chunk], spec: MaskSpec, same_rank: bool) -> list[Piece]:
    """The calls of one ring step (dense layouts): every (query chunk, key chunk) pair that
    sees something, merged into one call where the merged call is exact without offsets."""
    pairs = [(qc, kc, visibility(qc.start, qc.length, kc.start, kc.length, spec.left, spec.right))
             for qc in q_chunks for kc in k_chunks]
    pairs = [p for p in pairs if p[2] != "none"]
    if not pairs:
        return []
    if spec.plain and len(pairs) > 1:
        qs = sorted({p[0] for p in pairs}, key=lambda c: c.local)
        ks = sorted({p[1] for p in pairs}, key=lambda c: c.local)
        if all(p[2] == "full" for p in pairs) and len(pairs) == len(qs) * len(ks) \
                and _contiguous(qs) and _contiguous(ks):
            # a rectangle of fully visible pairs: one unmasked call
            return [Piece(qs[0].local, qs[-1].local + qs[-1].length, ks[0].local, ks[-1].local + ks[-1].length,
                          False)]
        if same_rank and spec.causal and q_chunks == k_chunks and _contiguous(q_chunks) \
                and _increasing(q_chunks) and q_chunks[0].local == 0:
            # local order = global order: the causal mask of the shard with itself is the whole
            # sequence's restricted to it (zigzag's first step)
            end = q_chunks[-1].local + q_chunks[-1].length
            return [Piece(0, end, 0, end, True)]
    return [_piece(qc, kc, vis, spec) for qc, kc, vis in pairs]


def dense_plan(layout: str, rank: int, world: int, local_len: int, spec: MaskSpec) -> list[list[Piece]]:
    """Pieces of each ring step t = 0 .. world-1 (keys of rank (rank - t) mod world)."""
    mine = chunks(layout, rank, world, local_len)
    return [step_pieces(mine, chunks(layout, (rank - t) % world, world, local_len), spec, t == 0)
            for t in range(world)]


def varlen_plan(cu_seqlens: torch.Tensor, max_seqlen: int, total: int, rank: int, world: int,
                spec: MaskSpec) -> list[list[Piece]]:
    """Pieces of each ring step for the ``varlen`` layout (local ``cu_seqlens``, same on every rank).

    Plain masks: one call per step over every sequence with the given cu_seqlens (the causal
    diagonal at step 0, unmasked calls from lower ranks, nothing from higher ranks). Otherwise
    the masks, ALiBi and dropout depend on each sequence's length, so each run of consecutive
    sequences of equal length is one call, whose cu_seqlens makes every other sequence empty so
    that batch indices (ALiBi slopes per sequence, dropout mask) are the sequences' own. Reads the
    cu_seqlens values (a host synchronisation) only in that second case.
    """
    steps: list[list[Piece]] = []
    if spec.plain:
        for t in range(world):
            s = (rank - t) % world
            if spec.causal and s > rank:
                steps.append([])
                continue
            steps.append([Piece(0, total, 0, total, spec.causal and s == rank, cu=cu_seqlens, max_seqlen=max_seqlen)])
        return steps
    values = [int(x) for x in cu_seqlens.tolist()]
    runs: list[tuple[int, int, int]] = []  # (first sequence, end sequence, local length)
    for i in range(len(values) - 1):
        c = values[i + 1] - values[i]
        if runs and runs[-1][2] == c and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1, c)
        else:
            runs.append((i, i + 1, c))
    run_cu = {}
    for a, b, c in runs:
        if c > 0:
            # the run's sequences between empty ones: batch indices and batch size stay the call's
            cu = [0] * a + [c * n for n in range(b - a + 1)] + [c * (b - a)] * (len(values) - 1 - b)
            run_cu[a] = torch.tensor(cu, dtype=torch.int32, device=cu_seqlens.device)
    for t in range(world):
        s = (rank - t) % world
        pieces = []
        for a, b, c in runs:
            if c == 0:
                continue
            qc, kc = Chunk(values[a], c, rank * c), Chunk(values[a], c, s * c)
            vis = visibility(qc.start, c, kc.start, c, spec.left, spec.right)
            if vis == "none":
                continue
            p = _piece(qc, kc, vis, spec)
            pieces.append(p._replace(q1=values[b], k1=values[b], cu=run_cu[a], max_seqlen=c))
        steps.append(pieces)
    return steps


# ----------------------------------------------------------------------------- sharding helpers

def shard(x: torch.Tensor, rank: int, world: int, layout: str = "ring", dim: int = 1) -> torch.Tensor:
    """Rank ``rank``'s shard of a whole-sequence tensor (sequence along ``dim``) under ``layout``."""
    n = x.shape[dim]
    if layout == "ring":
        if n % world:
            raise ValueError(f"sequence length {n} is not divisible by world size {world}")
        return x.narrow(dim, rank * (n // world), n // world)
    if layout == "zigzag":
        if n % (2 * world):
            raise ValueError(f"sequence length {n} is not divisible by 2 * world size = {2 * world}")
        c = n // (2 * world)
        return torch.cat([x.narrow(dim, rank * c, c), x.narrow(dim, (2 * world - 1 - rank) * c, c)], dim)
    raise ValueError(f"layout is {layout!r}; allowed: {', '.join(LAYOUTS)}")


def unshard(shards: list[torch.Tensor], layout: str = "ring", dim: int = 1) -> torch.Tensor:
    """The whole-sequence tensor from every rank's shard (``shards[r]`` of rank r)."""
    if layout == "ring":
        return torch.cat(shards, dim)
    if layout == "zigzag":
        world = len(shards)
        halves = [s.chunk(2, dim) for s in shards]
        return torch.cat([halves[r][0] for r in range(world)] + [halves[r][1] for r in reversed(range(world))], dim)
    raise ValueError(f"layout is {layout!r}; allowed: {', '.join(LAYOUTS)}")


def shard_varlen(x: torch.Tensor, cu_seqlens: torch.Tensor, rank: int, world: int,
                 dim: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Rank ``rank``'s tokens of packed sequences ``x`` (tokens along ``dim``) for the varlen
    layout -> (local x, local cu_seqlens int32, local max_seqlen)."""
    values = [int(v) for v in cu_seqlens.tolist()]
    parts = []
    for a, b in zip(values, values[1:]):
        if (b - a) % world:
            raise ValueError(f"a sequence of length {b - a} is not divisible by world size {world}")
        c = (b - a) // world
        parts.append(x.narrow(dim, a + rank * c, c))
    local_cu = torch.tensor([v // world for v in values], dtype=torch.int32, device=cu_seqlens.device)
    lens = [b - a for a, b in zip(values, values[1:])]
    return torch.cat(parts, dim), local_cu, max(lens, default=0) // world


def unshard_varlen(shards: list[torch.Tensor], cu_seqlens: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """The packed whole-sequence tensor from every rank's varlen shard (inverse of shard_varlen)."""
    world = len(shards)
    values = [int(v) // world for v in cu_seqlens.tolist()]
    parts = []
    for a, b in zip(values, values[1:]):
        parts.extend(s.narrow(dim, a, b - a) for s in shards)
    return torch.cat(parts, dim)
