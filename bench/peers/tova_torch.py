"""TOVA (Oren et al. 2024): evict the lowest attention of the current query, per layer; one decode step
of 32 layers in PyTorch, for the peer script (see eviction_peer.py)."""
from eviction_peer import make_policy_step, rows

ROWS = rows("tova")


def make_step(device, dtype, **shape):
    return make_policy_step("tova", device, dtype, **shape)
