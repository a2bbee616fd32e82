"""A pytest plugin for benchmarks/session48_d.sh (``-p _split_plugin``, benchmarks/ on PYTHONPATH): every test process
(xdist workers too) runs the Gluon forward with SPLIT = $EXP_SPLIT (kernels/fwd_gluon.py ``_exp2_split``) and, with
$SPLIT_CAUSAL_ROW=1, a d=64 causal row (128-key blocks, 2 slots), so that causal d=64 calls take the Gluon kernel."""
import os

from flash_attention_amd.launch import fwd_gluon, tiles

fwd_gluon.EXP_SPLIT = int(os.environ.get("EXP_SPLIT", "1"))
if os.environ.get("SPLIT_CAUSAL_ROW") == "1":
    tiles.FWD_GLUON["sm90"].append(tiles.Row(64, tiles.Tile(128, 128, 4, 2, reason="bench"), causal=True,
                                             min_seqlen_k=1024))
