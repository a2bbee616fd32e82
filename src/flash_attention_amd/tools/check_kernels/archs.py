"""The target architectures of the check and the occupancy each kernel gets on them.

``ARCHS``: static facts of every target (register file, allocation granule, wave / warp limits,
LDS / shared memory), with their sources below. ``occupancy_amd`` (waves per SIMD) and
``occupancy_nvidia`` (warps per SM sub-partition) turn a compiled kernel's registers and shared
memory into occupancy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ArchInfo:
    """Static facts of one target. AMD: per SIMD; NVIDIA: per SM (4 sub-partitions)."""

    name: str  # the name launchers use: "gfx942", "sm90"
    backend: str  # "hip" | "cuda"
    target_arch: Any  # GPUTarget.arch: "gfx942" | 90
    warp_size: int
    family: str
    required: bool  # False: skipped with a note when the installed Triton/LLVM lacks it
    regs_total: int  # AMD: VGPRs per lane per SIMD (AGPRs included); NVIDIA: 32-bit regs per SM
    reg_granule: int  # AMD: VGPRs per allocation block; NVIDIA: registers per warp allocation
    max_waves: int  # AMD: waves per SIMD; NVIDIA: warps per SM
    lds_per_cu: int  # bytes of LDS / shared memory per CU (WGP on RDNA) / SM
    lds_per_group: int  # bytes one workgroup / block may allocate
    simds: int = 4  # SIMDs per CU (or WGP); NVIDIA: SM sub-partitions
    max_blocks: int = 32  # NVIDIA: resident blocks per SM


# AMD figures: LLVM AMDGPU backend, llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.cpp,
# IsaInfo::getVGPRAllocGranule / getTotalNumVGPRs / getMaxWavesPerEU /
# getNumWavesPerEUWithNumVGPRs (gfx90a-class: granule 8, 512 unified VGPR+AGPR, 8 waves;
# gfx11/gfx12 with the 1.5x register file: granule 24, 1536 VGPRs in wave32, 16 waves);
# LDS sizes from getLocalMemorySize / AMD's CDNA3, CDNA4, RDNA3 ISA guides (64 KiB per CU on
# CDNA2/3, 160 KiB on CDNA4, 128 KiB per WGP on RDNA3/4 with 64 KiB per workgroup).
# NVIDIA figures: CUDA C Programming Guide, "Technical Specifications per Compute Capability"
# (64K registers and 64 warps per SM, register allocation unit 256 per warp, shared memory
# per SM 164 KiB / 228 KiB and per block 163 KiB / 227 KiB on sm80 / sm90, 1 KiB reserved
# per block).
ARCHS: dict[str, ArchInfo] = {
    a.name: a
    for a in (
        ArchInfo("gfx90a", "hip", "gfx90a", 64, "CDNA2 MI200", True, 512, 8, 8, 65536, 65536),
        ArchInfo("gfx942", "hip", "gfx942", 64, "CDNA3 MI300", True, 512, 8, 8, 65536, 65536),
        ArchInfo("gfx950", "hip", "gfx950", 64, "CDNA4 MI350", False, 512, 8, 8, 163840, 163840),
        ArchInfo("gfx1100", "hip", "gfx1100", 32, "RDNA3 RX 7900", True, 1536, 24, 16, 131072, 65536),
        ArchInfo("gfx1201", "hip", "gfx1201", 32, "RDNA4 RX 9070", False, 1536, 24, 16, 131072, 65536),
        ArchInfo("sm80", "cuda", 80, 32, "Ampere A100", True, 65536, 256, 64, 167936, 166912),
        ArchInfo("sm90", "cuda", 90, 32, "Hopper H100", True, 65536, 256, 64, 233472, 232448),
    )
}
QUICK_ARCHS = ("gfx90a", "gfx942", "gfx1100")  # --quick (CI); NVIDIA kernels also run on the team's H100


def occupancy_amd(info: ArchInfo, vgprs: int, lds_bytes: int, num_warps: int) -> tuple[int, int, int]:
    """(waves per SIMD, VGPR-limited, LDS-limited) for one workgroup of num_warps waves.

    VGPR limit (LLVM's getNumWavesPerEUWithNumVGPRs): min(max_waves, regs_total //
    roundup(vgprs, granule)), max_waves below one granule. ``vgprs`` is ``.vgpr_count``, which
    on gfx90a+ already counts the AGPRs (arch VGPRs rounded to 4, then + AGPRs).
    LDS limit: workgroups per CU = lds_per_cu // lds_bytes, their waves spread over the SIMDs.
    """
    if vgprs < info.reg_granule:
        by_vgpr = info.max_waves
    else:
        rounded = -(-vgprs // info.reg_granule) * info.reg_granule
        by_vgpr = min(info.max_waves, max(1, info.regs_total // rounded))
    if lds_bytes <= 0:
        by_lds = info.max_waves
    else:
        groups = info.lds_per_cu // lds_bytes
        by_lds = min(info.max_waves, (groups * num_warps) // info.simds)
    return min(by_vgpr, by_lds), by_vgpr, by_lds


def occupancy_nvidia(info: ArchInfo, regs: int, smem_bytes: int, num_warps: int) -> tuple[int, int, int]:
    """(warps per SM sub-partition, register-limited, smem-limited), CUDA occupancy rules.

    Registers are allocated per warp in units of 256 (regs * 32 rounded up); resident warps
    = 65536 // that, whole blocks only. Shared memory: blocks = smem_per_SM // (smem + 1 KiB).
    Reported per sub-partition (SM / 4) to compare with AMD's waves per SIMD (max 16).
    """
    per_warp = max(1, -(-regs * info.warp_size // info.reg_granule)) * info.reg_granule
    blocks_reg = min(info.max_blocks, (info.regs_total // per_warp) // num_warps)
    blocks_smem = info.max_blocks if smem_bytes <= 0 else info.lds_per_cu // (smem_bytes + 1024)
    blocks_warps = info.max_waves // num_warps
    cap = blocks_warps * num_warps // info.simds
    by_reg = min(cap, blocks_reg * num_warps // info.simds)
    by_smem = min(cap, blocks_smem * num_warps // info.simds)
    return min(by_reg, by_smem), by_reg, by_smem
