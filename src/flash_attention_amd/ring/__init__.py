"""Ring attention (context parallelism) over torch.distributed: exact, forward and backward.

A sequence too long for one device is cut across the ranks of a process group; each rank keeps
its queries and passes its keys/values around the ring (``batch_isend_irecv``, overlapped with
the attention of the block at hand), merging the partial results by their log-sum-exp in fp32.
The result on each rank is its rows of the attention one device would compute on the whole
sequence, to rounding; the backward gives its dq, dk, dv (dk/dv accumulators travel the ring
with the K/V blocks). Every option of ``flash_attn_func`` but ``return_attn_probs``'s
probabilities works: causal, sliding window, ALiBi, softcap, dropout (the whole sequence's
dropout mask, seed agreed across ranks), GQA/MQA, ``softmax_scale``, ``deterministic``; each
step runs on whatever backend the dispatcher picks (Triton kernels on GPUs).

Functions (arguments as ``flash_attn_func``, plus ``group``: any process group, NCCL / RCCL on
GPUs, gloo on the CPU; ``None`` = the default group, or world size 1 when torch.distributed is
not initialised, which is a plain attention call):

- ``ring_flash_attn_func``: rank r holds the r-th contiguous chunk of the sequence.
- ``zigzag_ring_flash_attn_func``: the sequence in 2·world chunks, rank r holds chunks r and
  2·world−1−r (balanced causal work; the layout to use with ``causal=True``).
- ``ring_flash_attn_varlen_func``: packed sequences, rank r holds the r-th of world equal
  pieces of every sequence, with the local ``cu_seqlens``.

``return_attn_probs=True`` returns ``(out, lse, None)``: lse is the whole sequence's LSE of the
local rows (differentiable); the probability matrix is never formed.

Shape legend: b batch, n local tokens per rank (sequence length / world), h query heads,
hk key/value heads (h % hk == 0), d head dim (dv for v), total local packed tokens (varlen).
Dense q [b, n, h, d], k/v [b, n, hk, d|dv] -> out [b, n, h, dv], lse [b, h, n] (fp32; fp64 for
fp64 inputs). Varlen q [total, h, d], k/v [total, hk, d|dv] -> out [total, h, dv], lse [h, total].

Example (``torchrun --nproc_per_node 4 train.py``)::

    import torch, torch.distributed as dist
    from flash_attention_amd.ring import zigzag_ring_flash_attn_func, shard
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    x = torch.randn(1, 131072, 32, 128, device="cuda", dtype=torch.bfloat16)  # the whole sequence
    q = shard(x, rank, world, "zigzag").requires_grad_()                     # [1, 32768, 32, 128]
    k, v = (shard(x, rank, world, "zigzag").requires_grad_() for _ in range(2))
    out = zigzag_ring_flash_attn_func(q, k, v, causal=True)                   # this rank's rows
    out.sum().backward()                                                      # q.grad, k.grad, v.grad

Every rank must call with the same shapes and options (varlen: the same ``cu_seqlens``) and
run the backward through its output (the transfers are collective: a rank that skips them
leaves the others waiting). Not supported: ``torch.compile`` tracing through the ring (it runs
eagerly), cross-attention (q and k are the same tokens), paged K/V, a zigzag varlen layout.

Files: ``api.py`` (the functions, validation), ``layout.py`` (who holds which tokens, the
pieces of each step and their offsets; ``shard`` helpers), ``engine.py`` (the forward and
backward loops, autograd), ``merge.py`` (LSE merging), ``comm.py`` (ring neighbours, seed).
"""
from .api import ring_flash_attn_func, ring_flash_attn_varlen_func, zigzag_ring_flash_attn_func
from .layout import shard, shard_varlen, unshard, unshard_varlen

__all__ = [
    "ring_flash_attn_func",
    "ring_flash_attn_varlen_func",
    "shard",
    "shard_varlen",
    "unshard",
    "unshard_varlen",
    "zigzag_ring_flash_attn_func",
]
