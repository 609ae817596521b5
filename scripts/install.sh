#!/bin/sh
# The one install recipe, shared by the Makefile (dev venv) and the Dockerfile (image venv).
#   scripts/install.sh PIP TORCH_REQUIREMENT MODE [TORCH_INDEX_URL]
#   PIP: the pip executable of the target environment
#   TORCH_REQUIREMENT: e.g. "torch" (the default build; CUDA on Linux) or "torch==2.13.0"
#   MODE: "dev" = editable with the dev extras (tests, lint); "app" = the package alone
#   TORCH_INDEX_URL: optional package index for torch alone (e.g. PyTorch's CPU-only wheels)
set -eu
pip=$1
torch_req=$2
mode=$3
index=${4:-}
cd "$(dirname "$0")/.."
# torch first, on its own: it is the big one, and its build choice must not be overridden
if [ -n "$index" ]; then
  "$pip" install --quiet --no-cache-dir --index-url "$index" "$torch_req"
else
  "$pip" install --quiet --no-cache-dir "$torch_req"
fi
case "$mode" in
  dev) "$pip" install --quiet -e ".[dev]" ;;
  app) "$pip" install --quiet --no-cache-dir . ;;
  *) echo "install.sh: MODE must be dev or app, got '$mode'" >&2; exit 2 ;;
esac
