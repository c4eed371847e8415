"""What each GPU can do per second: dense tensor FLOP/s, HBM bandwidth, interconnect.

One row per GPU of :data:`runjob_core.estimator.gpus.GPUS` (same names, so one lookup finds
both the memory and the speed of a card). Every number is the vendor's *dense* figure (the
datasheets print "with sparsity" figures twice as large; no training or inference framework
runjob launches uses 2:4 sparsity). ``bf16`` is the tensor-core rate with FP32 accumulate,
which is what PyTorch's bf16/fp16 matmuls use; ``fp8`` is None where the card has no FP8
tensor cores. ``link_gb_s`` is the GPU-to-GPU bandwidth inside one machine as the vendor
quotes it (NVLink: both directions together; PCIe: one direction of an x16 link), and the
time model takes half of an NVLink figure as the bus bandwidth of an all-reduce.

``sms`` is the number of streaming multiprocessors (the CUDA device property
``multiProcessorCount``): the architecture papers and datasheets list it, or CUDA cores / cores per
SM (Ampere GA102 and Ada: 128, Turing: 64). The H20 has no public datasheet; 78 is what its device
reports (SGLang's and DeepEP's H20 settings use it). A decode kernel moves a bounded number of bytes
per SM, so ``sms`` caps the bandwidth decode reaches on a card with much HBM per SM
(:func:`runjob_core.estimator.decoding.decode_bandwidth`).

These are peaks. What a job reaches is a fraction of them: the time model
(:mod:`runjob_core.estimator.timing`) states that fraction as a prior per framework.
"""

from __future__ import annotations

import attrs

from runjob_core.estimator.gpus import lookup_gpu


@attrs.frozen
class GPUPeaks:
    name: str
    bf16_tflops: float
    fp8_tflops: float | None
    hbm_gb_s: float
    link_gb_s: float
    link: str
    source: str
    note: str = ""
    sms: int = 0


_H100_SHEET = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_A100_SHEET = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_ADA_PAPER = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_GA102_PAPER = "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"

PEAKS: tuple[GPUPeaks, ...] = (
    GPUPeaks("H200", 989.0, 1979.0, 4800.0, 900.0, "NVLink 4",
             "https://www.nvidia.com/en-us/data-center/h200/",
             "H200 SXM: BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity (halved here), 4.8 TB/s, NVLink 900 GB/s", sms=132),
    GPUPeaks("GH200", 989.0, 1979.0, 4000.0, 900.0, "NVLink 4",
             "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip",
             "GH200 96 GB HBM3: same Hopper GPU as the H100 SXM, 4 TB/s", sms=132),
    GPUPeaks("H20", 148.0, 296.0, 4000.0, 900.0, "NVLink 4",
             "https://www.nvidia.com/en-us/data-center/h100/ (Hopper family; H20 figures from NVIDIA's China product brief)",
             "H20: BF16 148 TFLOPS and FP8 296 TFLOPS dense, 4.0 TB/s HBM3, NVLink 900 GB/s; no public English datasheet", sms=78),
    GPUPeaks("H100-80GB", 989.0, 1979.0, 3350.0, 900.0, "NVLink 4", _H100_SHEET,
             "H100 SXM: BF16 1,979 / FP8 3,958 TFLOPS with sparsity, 3.35 TB/s. The PCIe card (an alias of this row in "
             "the memory table) is slower: 756 TFLOPS BF16 dense, 2.0 TB/s, which this row overstates", sms=132),
    GPUPeaks("A100-80GB", 312.0, None, 2039.0, 600.0, "NVLink 3", _A100_SHEET,
             "A100 80GB SXM: BF16 312 TFLOPS dense, 2,039 GB/s, NVLink 600 GB/s", sms=108),
    GPUPeaks("A100-40GB", 312.0, None, 1555.0, 600.0, "NVLink 3", _A100_SHEET,
             "A100 40GB SXM: BF16 312 TFLOPS dense, 1,555 GB/s, NVLink 600 GB/s", sms=108),
    GPUPeaks("L40S", 362.0, 733.0, 864.0, 32.0, "PCIe 4.0 x16",
             "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413",
             "L40S: BF16 733 / FP8 1,466 TFLOPS with sparsity, 864 GB/s GDDR6, no NVLink", sms=142),
    GPUPeaks("RTX-A6000", 154.8, None, 768.0, 56.0, "NVLink bridge (2 GPUs) / PCIe 4.0", _GA102_PAPER,
             "RTX A6000: FP16/BF16 tensor with FP32 accumulate 154.8 TFLOPS dense, 768 GB/s; NVLink bridge 112.5 GB/s "
             "for a pair of cards (both directions), taken as 56 GB/s", sms=84),
    GPUPeaks("RTX-4090", 165.2, 330.3, 1008.0, 32.0, "PCIe 4.0 x16", _ADA_PAPER,
             "RTX 4090: BF16 with FP32 accumulate 165.2 TFLOPS dense, FP8 330.3 TFLOPS dense, 1,008 GB/s; no NVLink", sms=128),
    GPUPeaks("RTX-3090", 71.0, None, 936.0, 32.0, "PCIe 4.0 x16", _GA102_PAPER,
             "RTX 3090: FP16/BF16 tensor with FP32 accumulate 71 TFLOPS dense (GeForce Ampere runs it at half the FP16-"
             "accumulate rate of 142), 936 GB/s", sms=82),
    GPUPeaks("V100-32GB", 125.0, None, 900.0, 300.0, "NVLink 2",
             "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf",
             "V100 SXM2/SXM3 32GB: mixed-precision FP16 tensor 125 TFLOPS, 900 GB/s HBM2, NVLink 300 GB/s; no BF16 "
             "(jobs run in fp16); the PCIe card (112 TFLOPS, PCIe 3.0) is an alias of this row", sms=80),
    GPUPeaks("T4", 65.0, None, 320.0, 16.0, "PCIe 3.0 x16",
             "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
             "T4: mixed-precision FP16 65 TFLOPS, 320 GB/s; no BF16 (jobs run in fp16)", sms=40),
    GPUPeaks("A2", 18.0, None, 200.0, 16.0, "PCIe 4.0 x8",
             "https://www.nvidia.com/content/dam/en-zz/solutions/data-center/a2/pdf/a2-datasheet.pdf",
             "A2: BF16/FP16 tensor 18 TFLOPS dense (36 with sparsity), 200 GB/s GDDR6, PCIe Gen4 x8", sms=10),
)

_BY_NAME = {p.name: p for p in PEAKS}

#: Between machines, per GPU: 400 Gb/s InfiniBand NDR or 400 GbE per GPU (DGX H100, the
#: common cloud H100 shapes) is 50 GB/s. A cluster with less (one 100 Gb/s link per node)
#: is slower than this assumes; the assumptions line says which figure was used.
NETWORK_GB_S_PER_GPU = 50.0


def peaks_for(gpu: str) -> GPUPeaks:
    """The peaks of *gpu*, by any name :func:`runjob_core.estimator.gpus.lookup_gpu` knows."""
    return _BY_NAME[lookup_gpu(gpu).name]
