"""GPU table: what CUDA reports as total device memory, not the marketing number.

``torch.cuda.get_device_properties(i).total_memory`` / ``torch.cuda.mem_get_info()[1]``
(what vLLM calls ``total_gpu_memory`` and PyTorch's OOM message calls "total capacity")
is the board's memory minus what the driver reserves (ECC, page tables): an "80 GB" H100
reports about 79.2 GiB. The values come from reports pasted in public issue threads; the
driver version moves them by about +-0.1 GiB. Two entries (H200, RTX A6000) are derived
from the ``nvidia-smi`` total because no PyTorch/vLLM report was found; their note says so.
"""

from __future__ import annotations

import re

import attrs

from runjob_core.errors import RunjobError

GIB = 1 << 30


@attrs.frozen
class GPUSpec:
    name: str
    marketing_gb: int
    total_bytes: int
    source: str
    note: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB


def _gib(x: float) -> int:
    return int(round(x * GIB))


GPUS: tuple[GPUSpec, ...] = (
    GPUSpec(
        "H200", 141, _gib(139.8),
        "nvidia-smi reports 143771MiB for an H200 141GB",
        "estimated: nvidia-smi total minus the ~0.5-0.7 GiB the driver withholds on H100/GH200; "
        "no PyTorch report found",
        ("h200", "h200sxm", "h200141gb", "h200nvl"),
    ),
    GPUSpec(
        "GH200", 96, _gib(94.88),
        "https://github.com/Lightning-AI/litgpt/issues/1892",
        "OOM message: 'GPU 0 has a total capacity of 94.88 GiB' (nvidia-smi 97871MiB)",
        ("gh200", "gh20096gb", "gh200480gb", "gracehopper"),
    ),
    GPUSpec(
        "H20", 96, _gib(94.88),
        "nvidia-smi reports 97871MiB for an H20 96GB (HBM3), as for a GH200 96GB",
        "estimated: same board memory as the GH200 96GB, whose PyTorch total is 94.88 GiB; "
        "no PyTorch report for an H20 found",
        ("h20", "h2096gb"),
    ),
    GPUSpec(
        "H100-80GB", 80, 85029158912,
        "https://github.com/vllm-project/vllm/issues/27508",
        "85029158912 bytes = 79.19 GiB (aiconfigurator systems/h800_sxm.yaml mem_capacity, same "
        "board memory); vLLM/PyTorch logs show 79.11-79.15 GiB depending on the driver",
        ("h100", "h10080gb", "h100sxm", "h100sxm580gb", "h100pcie", "h10080gbhbm3", "h800"),
    ),
    GPUSpec(
        "A100-80GB", 80, _gib(79.25),
        "https://github.com/HiDream-ai/VAREdit/issues/6",
        "OOM message: 'GPU 0 has a total capacity of 79.25 GiB' on an A100 80GB",
        ("a10080gb", "a100sxm480gb", "a10080gbpcie", "a100sxm80gb", "a800"),
    ),
    GPUSpec(
        "A100-40GB", 40, _gib(39.50),
        "https://github.com/TianheWu/CoSeR/issues/10",
        "OOM message: 'GPU 0 has a total capacity of 39.50 GiB' on an A100 40GB",
        ("a10040gb", "a100sxm440gb", "a10040gbpcie"),
    ),
    GPUSpec(
        "L40S", 48, _gib(44.42),
        "https://github.com/stepfun-ai/Step-Video-T2V/issues/8",
        "OOM message on 8xL40S: 'total capacity of 44.42 GiB' (nvidia-smi 46068MiB)",
        ("l40s", "l40", "l4048gb"),
    ),
    GPUSpec(
        "RTX-A6000", 48, _gib(47.54),
        "nvidia-smi reports 49140MiB for an RTX A6000",
        "estimated: nvidia-smi total minus ~0.45 GiB driver reserve; no PyTorch report found",
        ("a6000", "rtxa6000", "a600048gb"),
    ),
    GPUSpec(
        "RTX-4090", 24, _gib(23.55),
        "https://github.com/vllm-project/vllm/issues/13061",
        "vLLM: total_gpu_memory x 0.98 = 23.08 GiB, i.e. 23.55 GiB; PyTorch OOM messages show "
        "23.61-23.68 GiB with other drivers",
        ("4090", "rtx4090", "geforcertx4090", "409024gb"),
    ),
    GPUSpec(
        "RTX-3090", 24, _gib(23.58),
        "https://github.com/vllm-project/vllm/issues/10517",
        "vLLM log: 'total_gpu_memory=23.58GiB' on an RTX 3090 (PyTorch OOM messages: 23.69-23.70)",
        ("3090", "rtx3090", "geforcertx3090", "309024gb"),
    ),
    GPUSpec(
        "V100-32GB", 32, _gib(31.72),
        "https://github.com/deepspeedai/DeepSpeed/blob/master/docs/assets/images/oom_dp8_1.5B_log.png",
        "OOM message in DeepSpeed's ZeRO tutorial (V100-SXM3 32GB): 'GPU 1; 31.72 GiB total capacity' "
        "(nvidia-smi 32480MiB)",
        ("v10032gb", "v100sxm332gb", "v100sxm232gb", "v100pcie32gb"),  # not bare "v100": 16 GB cards exist
    ),
    GPUSpec(
        "T4", 16, _gib(14.75),
        "https://github.com/hpcaitech/Open-Sora/issues/697",
        "OOM message on a Colab T4: 'GPU 0 has a total capacity of 14.75 GiB' (nvidia-smi 15360MiB)",
        ("t4", "teslat4", "t416gb"),
    ),
    GPUSpec(
        "A2", 16, _gib(14.75),
        "https://www.nvidia.com/content/dam/en-zz/solutions/data-center/a2/pdf/a2-datasheet.pdf",
        "estimated: the datasheet's 16 GB GDDR6 with ECC, the T4's board memory (PyTorch total 14.75 GiB); "
        "no PyTorch report for an A2 found",
        ("a2", "a216gb", "a2tensorcore"),
    ),
)


def gpu_key(name: str) -> str:
    """*name* as the catalog compares GPU names: lower case, letters and digits only, without
    a vendor or line prefix ("NVIDIA H100 80GB HBM3" -> "h10080gbhbm3"): for plugins matching
    the names a machine reports (nvidia-smi) against the user's ``gpu_type``."""
    n = re.sub(r"[^a-z0-9]", "", name.lower())
    for prefix in ("nvidia", "geforce", "tesla"):
        if n.startswith(prefix):
            n = n[len(prefix):]
    return n


_INDEX: dict[str, GPUSpec] = {}
for _g in GPUS:
    for _k in (_g.name, *_g.aliases):
        _INDEX.setdefault(gpu_key(_k), _g)


def lookup_gpu(name: str) -> GPUSpec:
    """Find a GPU by name, case- and punctuation-insensitively ("h100", "A100-80GB", "RTX 4090")."""
    k = gpu_key(name)
    if k in _INDEX:
        return _INDEX[k]
    if k.startswith("rtx") and k[3:] in _INDEX:
        return _INDEX[k[3:]]
    if k in ("a100", "a100sxm4", "a100pcie"):
        raise RunjobError(
            f"GPU {name!r} is ambiguous: use A100-80GB or A100-40GB"
        )
    names = ", ".join(g.name for g in GPUS)
    raise RunjobError(f"unknown GPU {name!r}; known GPUs: {names}")
