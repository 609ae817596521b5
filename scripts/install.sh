#!/bin/sh
# The one install recipe, shared by the Makefile (dev venv) and the Dockerfile (image venv).
#   scripts/install.sh PIP TORCH_REQUIREMENT MODE [TORCH_INDEX] [EXTRAS]
#   PIP: the pip executable of the target environment
#   TORCH_REQUIREMENT: e.g. "torch==2.13.0"; empty: pyproject.toml's torch range (the range CI
#     tests, with an upper bound), so a default install never resolves a torch CI has not run
#   MODE: "dev" = editable with the dev extras (tests, lint); "app" = the package alone
#   TORCH_INDEX: where torch alone comes from —
#     empty or "default": pip's own index (on Linux, PyPI's torch is the CUDA build, ~3 GB);
#     "cpu": PyTorch's CPU-only wheel index (about 200 MB, no CUDA libraries);
#     "auto": "cpu" on Linux when no NVIDIA driver is found, else "default";
#     anything else: an index URL.
#   EXTRAS: optional extras, comma-separated, e.g. "cluster" (PostgreSQL's driver for a course's
#     shared run store); empty: none (the embedded lab needs none)
# BSDEMO_INSTALL_DRY_RUN=1 prints the choice and the pip commands without running them.
set -eu
pip=$1
torch_req=$2
mode=$3
index=${4:-}
extras=${5:-}
cpu_index=${BSDEMO_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
cd "$(dirname "$0")/.."

case "$mode" in
  dev|app) ;;
  *) echo "install.sh: MODE must be dev or app, got '$mode'" >&2; exit 2 ;;
esac
case "$extras" in
  *[!a-z,]*) echo "install.sh: EXTRAS must be extras' names separated by commas (a-z), got '$extras'" >&2
             exit 2 ;;
esac

if [ -z "$torch_req" ]; then  # the project's own range: one place says which torch we test
  torch_req=$(sed -n 's/^ *"\(torch[<>=!~][^"]*\)".*/\1/p' pyproject.toml)
  [ -n "$torch_req" ] || { echo "install.sh: no torch requirement in pyproject.toml" >&2; exit 2; }
fi

why=""
if [ "$index" = "auto" ]; then
  if [ "$(uname -s)" != "Linux" ]; then
    index=default why="not Linux: pip's torch for this system has no CUDA libraries"
  elif command -v nvidia-smi >/dev/null 2>&1 || [ -e /proc/driver/nvidia/version ]; then
    index=default why="an NVIDIA driver is present: the CUDA build"
  else
    index=cpu why="no NVIDIA driver found: the CPU-only build; TORCH_INDEX=default for CUDA"
  fi
fi
case "$index" in
  ""|default) index="" where="pip's own index" ;;
  cpu) index=$cpu_index where="PyTorch's CPU wheel index" ;;
  *) where=$index ;;
esac
echo "install.sh: torch '$torch_req' from $where${why:+ ($why)}"

run() {
  if [ "${BSDEMO_INSTALL_DRY_RUN:-}" = "1" ]; then echo "would run: $*"; else "$@"; fi
}

# torch first, on its own: it is the big one, and its build choice must not be overridden
if [ -n "$index" ]; then
  run "$pip" install --quiet --no-cache-dir --index-url "$index" "$torch_req"
else
  run "$pip" install --quiet --no-cache-dir "$torch_req"
fi
if [ "$mode" = dev ]; then
  run "$pip" install --quiet -e ".[dev${extras:+,$extras}]"
else
  run "$pip" install --quiet --no-cache-dir ".${extras:+[$extras]}"
fi
if [ "${BSDEMO_INSTALL_DRY_RUN:-}" != "1" ]; then
  "$(dirname "$pip")/python" -c "import torch; print('install.sh: installed torch', \
torch.__version__, '(CUDA ' + torch.version.cuda + ')' if torch.version.cuda else '(no CUDA)')"
fi
