"""TreeKV (He et al.), Algorithm 1: the less important of the scope {idx, idx + 1}; one decode step
of 32 layers in PyTorch, for the peer script (see eviction_peer.py)."""
from eviction_peer import make_policy_step, rows

ROWS = rows("treekv")


def make_step(device, dtype, **shape):
    return make_policy_step("treekv", device, dtype, **shape)
