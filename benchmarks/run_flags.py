"""pytest with the Gluon backward's A/B switch set (launch/bwd_gluon.py ROWS_TMA: "rows" on, anything else off), in
this process (no xdist workers, which would import the defaults):
``python run_flags.py rows -q tests/test_gluon_bwd.py``. (Session 35 ran it as ``rows+one`` with a second switch,
ONE_EMPTY, since removed.)"""
import sys

import pytest

import flash_attention_amd.launch.bwd_gluon as gluon_bwd

gluon_bwd.ROWS_TMA = "rows" in sys.argv[1]
sys.exit(pytest.main(sys.argv[2:]))
