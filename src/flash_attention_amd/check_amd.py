"""The old name of ``flash_attention_amd.tools.check_kernels`` (``flash-attention-amd check-kernels``,
formerly ``check-amd``), kept so that imports and ``python -m flash_attention_amd.check_amd`` work."""
import sys

from .tools.check_kernels import *  # noqa: F403
from .tools.check_kernels import __all__  # noqa: F401
from .tools.check_kernels.cli import main

if __name__ == "__main__":
    sys.exit(main(name="check-amd"))
