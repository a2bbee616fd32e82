"""``python -m flash_attention_amd.tools.check_kernels``: the same as ``flash-attention-amd check-kernels``."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
