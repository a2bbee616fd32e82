"""Developer tools shipped with the package (no GPU needed): ``check_kernels``, the static
compile check behind ``flash-attention-amd check-kernels``."""
