"""H2O (Zhang et al. 2023): evict the lowest accumulated attention, per kv head; one decode step
of 32 layers in PyTorch, for the peer script (see eviction_peer.py)."""
from eviction_peer import make_policy_step, rows

ROWS = rows("h2o")


def make_step(device, dtype, **shape):
    return make_policy_step("h2o", device, dtype, **shape)
