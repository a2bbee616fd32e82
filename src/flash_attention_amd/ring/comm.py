"""The ring's neighbours in a torch.distributed process group, and what the ranks agree on.

No communication layer of its own: every transfer is a ``torch.distributed.batch_isend_irecv``
of ``P2POp`` (NCCL on NVIDIA, RCCL on ROCm, gloo on the CPU), every agreement a
``torch.distributed.broadcast``. Without an initialised default group (or with a group of one
rank) the world size is 1 and nothing is communicated.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..philox import new_seed


class Ring:
    """Rank ``rank`` of ``world`` in ``group``; sends to the next rank, receives from the previous.

    ``send_recv(send, recv)`` posts one isend per tensor of ``send`` to the next rank and one
    irecv per tensor of ``recv`` from the previous rank, all in one ``batch_isend_irecv``, and
    returns the requests (``wait`` them before reading ``recv`` or writing ``send``).
    """

    def __init__(self, group: dist.ProcessGroup | None = None):
        if not (dist.is_available() and dist.is_initialized()):
            if group is not None:
                raise ValueError("group is given but torch.distributed is not initialised")
            self.group, self.world, self.rank = None, 1, 0
            return
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise ValueError("this process is not a member of the given group")
        g = group if group is not None else dist.group.WORLD
        self.next = dist.get_global_rank(g, (self.rank + 1) % self.world)
        self.prev = dist.get_global_rank(g, (self.rank - 1) % self.world)
        self.root = dist.get_global_rank(g, 0)

    def send_recv(self, send: list[torch.Tensor], recv: list[torch.Tensor]) -> list:
        ops = [dist.P2POp(dist.isend, t, self.next, self.group) for t in send]
        ops += [dist.P2POp(dist.irecv, t, self.prev, self.group) for t in recv]
        return dist.batch_isend_irecv(ops)

    def agreed_seed(self, device: torch.device) -> int:
        """A fresh 64-bit dropout seed, drawn on rank 0 and broadcast (the same on every rank)."""
        if self.world == 1:
            return new_seed()
        t = torch.tensor([new_seed() if self.rank == 0 else 0], dtype=torch.int64, device=device)
        dist.broadcast(t, src=self.root, group=self.group)
        return int(t.item())


def wait_all(requests: list | None) -> None:
    for req in requests or ():
        req.wait()
