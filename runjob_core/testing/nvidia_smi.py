"""A stand-in ``nvidia-smi`` for tests on machines without a GPU.

:func:`install` writes an executable ``nvidia-smi`` into a folder (put it first on PATH)
and a ``nvidia-smi.json`` beside it that the stand-in reads on every call, so a test can
change the GPUs, their utilisation and memory while jobs run::

    {"gpus": [{"index": 0, "uuid": "GPU-...", "name": "NVIDIA H200", "memory_total": 143771,
               "memory_used": 0, "util": 0, "power": 70.0, "temperature": 31}],
     "apps": [{"gpu_uuid": "GPU-...", "pid": 1234, "used_memory": 2048}],
     "mode": "ok"}

``mode`` is ``ok``, ``hang`` (sleeps for an hour: the caller's time box must end it),
``garbage`` (prints text that is not its CSV) or ``fail`` (exit code 9, as with a driver
that is not loaded). It answers the three queries runjob makes: ``--query-gpu`` with the
inventory or telemetry fields (``-i`` lists the GPUs, ``-l N`` repeats every N seconds) and
``--query-compute-apps``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

_WRAPPER = """#!/bin/sh
NVIDIA_SMI_STANDIN='{config}' PYTHONPATH='{root}'"${{PYTHONPATH:+:$PYTHONPATH}}" exec '{python}' -m runjob_core.testing.nvidia_smi "$@"
"""


def gpu(index: int, *, name: str = "NVIDIA H200", memory_total: float = 143771, memory_used: float = 0,
        util: float = 0, power: float = 70.0, temperature: float = 31) -> dict:
    return {"index": index, "uuid": f"GPU-{index:08d}-0000-4000-8000-standin{index:05d}", "name": name,
            "memory_total": memory_total, "memory_used": memory_used, "util": util, "power": power,
            "temperature": temperature}


def install(folder: Path, gpus: list[dict], *, apps: list[dict] | None = None, mode: str = "ok") -> Path:
    """Write the stand-in into *folder*; returns the path of its config (rewrite it with :func:`configure`)."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "nvidia-smi"
    runjob_root = Path(__file__).resolve().parents[2]
    tool.write_text(_WRAPPER.format(config=folder.resolve() / "nvidia-smi.json", root=runjob_root, python=sys.executable))
    tool.chmod(0o755)
    return configure(folder, gpus, apps=apps, mode=mode)


def configure(folder: Path, gpus: list[dict], *, apps: list[dict] | None = None, mode: str = "ok") -> Path:
    config = folder / "nvidia-smi.json"
    tmp = config.with_suffix(".tmp")
    tmp.write_text(json.dumps({"gpus": gpus, "apps": apps or [], "mode": mode}))
    tmp.replace(config)  # the stand-in never reads half a file
    return config


_VALUES = {
    "index": lambda g: g["index"], "uuid": lambda g: g["uuid"], "name": lambda g: g["name"],
    "memory.total": lambda g: g["memory_total"], "memory.used": lambda g: g["memory_used"],
    "utilization.gpu": lambda g: g["util"], "power.draw": lambda g: g["power"],
    "temperature.gpu": lambda g: g["temperature"],
    "timestamp": lambda g: time.strftime("%Y/%m/%d %H:%M:%S") + f".{int(time.time() * 1000) % 1000:03d}",
}


def _option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(args):
            return args[i + 1]
    return None


def main(args: list[str]) -> int:
    config_path = Path(os.environ["NVIDIA_SMI_STANDIN"])
    loop = _option(args, "-l") or _option(args, "--loop")
    while True:
        config = json.loads(config_path.read_text())
        if config["mode"] == "hang":
            time.sleep(3600)
        if config["mode"] == "fail":
            print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
            return 9
        if config["mode"] == "garbage":
            print("Segmentation fault in libnvidia-ml.so: \x00\x01 unexpected")
            return 0
        if (query := _option(args, "--query-compute-apps")) is not None:
            fields = query.split(",")
            names = {"gpu_uuid": "gpu_uuid", "pid": "pid", "used_memory": "used_memory"}
            for app in config["apps"]:
                print(", ".join(str(app[names[f]]) for f in fields))
            return 0
        fields = (_option(args, "--query-gpu") or "").split(",")
        wanted = _option(args, "-i") or _option(args, "--id")
        gpus = config["gpus"]
        if wanted:
            ids = wanted.split(",")
            gpus = [g for g in gpus if str(g["index"]) in ids or g["uuid"] in ids]
            if not gpus:
                print(f"No devices were found matching {wanted}", file=sys.stderr)
                return 6
        for g in gpus:
            print(", ".join(str(_VALUES[f](g)) for f in fields))
        sys.stdout.flush()
        if not loop:
            return 0
        time.sleep(float(loop))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
