"""Whether an explicitly named device can be there, asked without torch (pure Python), so the
CLI refuses `--device cuda` on a machine with no NVIDIA driver in one line before it spends
seconds importing torch. Where the platform cannot tell (a driver that is there but no GPU
it can use), torch decides later and says so in the same one-line form."""

from __future__ import annotations

import os
import platform
import sys

from bsdemo.errors import ConfigError

NVIDIA_MARKERS = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0")


def check_device(name: str) -> None:
    """A ConfigError when `name` (cuda or mps) certainly is not on this machine."""
    if (
        name == "cuda"
        and sys.platform.startswith("linux")
        and not any(os.path.exists(p) for p in NVIDIA_MARKERS)
    ):
        raise ConfigError("device", name, "auto or cpu (no NVIDIA driver on this machine, so no CUDA device)")
    if name == "mps" and not (sys.platform == "darwin" and platform.machine() == "arm64"):
        raise ConfigError("device", name, "auto or cpu (Apple MPS needs a Mac with Apple silicon)")
