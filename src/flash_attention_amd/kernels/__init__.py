"""``@triton.jit`` kernels. Imported only by the Triton backend (never at package import)."""
