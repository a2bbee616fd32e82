"""check-amd spec file (issue 13, session 48): the sm90 Gluon forward's plain rows with part of P's exponentials on
the FMA units (FLAGS' SPLIT 1 / 2, kernels/fwd_gluon.py ``_exp2_split``), causal or not, bf16: registers and spills
per ptxas, beside the same builds without it.

    PYTHONPATH=src python -m flash_attention_amd check-amd --arch sm90 --jobs 2 \\
        --specs benchmarks/check_exp_split_specs.py
"""
from flash_attention_amd.launch import fwd_gluon
from flash_attention_amd.launch.tiles import FWD_GLUON, Row, Tile


def compile_specs(arch):
    if arch != "sm90":
        return []
    rows = [r for r in FWD_GLUON["sm90"] if r.max_d in (64, 128)]
    rows.append(Row(64, Tile(128, 128, 4, 2, reason="bench"), causal=True))  # d=64 causal: no committed row
    variants = [(row, f"{'causal' if causal else 'plain'} split {split}", (False, causal, 0, 0, split))
                for row in rows for causal in ((False, True) if row.causal is None else (row.causal,))
                for split in (0, 1, 2)]
    return fwd_gluon.compile_specs(arch, variants, ("bf16",))
