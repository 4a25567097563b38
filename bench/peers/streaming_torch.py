"""StreamingLLM (Xiao et al. 2023): sinks + the most recent tokens; one decode step
of 32 layers in PyTorch, for the peer script (see eviction_peer.py)."""
from eviction_peer import make_policy_step, rows

ROWS = rows("streaming")


def make_step(device, dtype, **shape):
    return make_policy_step("streaming", device, dtype, **shape)
