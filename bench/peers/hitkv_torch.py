"""HITKV's selection step in PyTorch for kvc-bench (see window_selection_torch.py)."""
try:
    from .window_selection_torch import make_window_step
except ImportError:
    from window_selection_torch import make_window_step


def make_step(device, dtype, **shape):
    return make_window_step(device, dtype, "hits", False, **shape)
