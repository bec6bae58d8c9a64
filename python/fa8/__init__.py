"""fa8 from Python. `fa8.capi` mirrors the C API through ctypes (pointers in, pointers out; numpy or raw pointers,
no torch needed). `fa8.attention` (and attention_with_stats, dispatch_names, set_library) come from `fa8.torch`,
the PyTorch binding: imported on first use, so `import fa8` alone does not import torch (docs/pytorch.md)."""
from . import capi  # noqa: F401

_TORCH_NAMES = ("attention", "attention_with_stats", "dispatch_names", "set_library", "check_supported",
                "Fa8ValueError", "DELTA_MODES")


def __getattr__(name):   # PEP 562: load the torch binding lazily
    if name in _TORCH_NAMES or name == "torch":
        import importlib
        binding = importlib.import_module(__name__ + ".torch")   # not `from . import`: that asks getattr again
        return binding if name == "torch" else getattr(binding, name)
    raise AttributeError(f"module 'fa8' has no attribute {name!r}")
