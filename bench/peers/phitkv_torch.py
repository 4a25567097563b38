"""PHITKV's selection step in PyTorch for kvc-bench (see window_selection_torch.py)."""
try:
    from .window_selection_torch import make_window_step
except ImportError:
    from window_selection_torch import make_window_step


# kvc-bench's select_phitkv row: (name, shape, dtype, make_step arguments).
ROWS = [("select_phitkv", "layers=32 qh=32 kvh=8 d=128 w=32 prefix=32768 budget=1024", "f16", {})]


def make_step(device, dtype, **shape):
    return make_window_step(device, dtype, "hits", True, **shape)
