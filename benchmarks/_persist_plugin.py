"""A pytest plugin for benchmarks/session47_a.sh (``-p _persist_plugin``, benchmarks/ on PYTHONPATH): every test
process (xdist workers too) runs the Gluon forward's softcap and window calls in persistent programs at every
length, the forms that session's A/B times."""
from flash_attention_amd.launch import fwd_gluon

fwd_gluon.PERSISTENT_WINDOW = fwd_gluon.PERSISTENT_FIXED_SOFTCAP = True
fwd_gluon.PERSISTENT_OPTIONS_MAX = 1 << 30
