"""fa8 from Python. `fa8.capi` mirrors the C API through ctypes (pointers in, pointers out); the PyTorch
binding (fa8.attention as an autograd Function) builds on it in a later issue."""
from . import capi  # noqa: F401
