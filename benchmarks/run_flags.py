"""pytest with the Gluon backward's A/B switches set (launch/bwd_gluon.py: ROWS_TMA on where the first argument
holds "rows", HEAVY_FIRST on where it holds "heavy"), in this process (no xdist workers, which would import the
defaults): ``python run_flags.py rows+heavy -q tests/test_gluon_bwd.py``. (Session 35 ran it as ``rows+one`` with a
second switch, ONE_EMPTY, since removed.)"""
import sys

import pytest

import flash_attention_amd.launch.bwd_gluon as gluon_bwd

gluon_bwd.ROWS_TMA = "rows" in sys.argv[1]
gluon_bwd.HEAVY_FIRST = "heavy" in sys.argv[1]
sys.exit(pytest.main(sys.argv[2:]))
