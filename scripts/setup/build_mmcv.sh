#!/usr/bin/env bash
# Build mmcv (full, with compiled ops) from its PyPI sdist, reproducibly, and cache the wheel.
#
# Why: PyPI has no mmcv wheels and the OpenMMLab wheel host is not reachable from many clusters.
# mmdet 3.3.0 needs mmcv>=2.0.0rc4,<2.2.0 with its C++ ops (mmcv-lite is not enough).
# Against torch 2.14 the ops must be compiled as C++20 (torch's ATen headers refuse C++17), and
# mmcv's setup.py imports pkg_resources (setuptools<81) and torch (--no-build-isolation).
#
# Usage: scripts/setup/build_mmcv.sh [PYTHON]      (default: .venv/bin/python)
# Env:   PMCFLOW_WHEEL_CACHE  where wheels are cached (default: ~/.cache/pmcflow/wheels)
#        MMCV_VERSION         (default 2.1.0)   MAX_JOBS (default: nproc)
#        FORCE_CUDA=1 TORCH_CUDA_ARCH_LIST="9.0"  on a GPU host with nvcc matching torch's CUDA
set -euo pipefail
PY=${1:-.venv/bin/python}
VER=${MMCV_VERSION:-2.1.0}
CACHE=${PMCFLOW_WHEEL_CACHE:-$HOME/.cache/pmcflow/wheels}
TORCH_VER=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
PYTAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
FLAVOUR=cpu
[ "${FORCE_CUDA:-0}" = "1" ] && FLAVOUR=cuda
# The wheel only fits this torch/python/arch: keep them apart in the cache.
DEST="$CACHE/mmcv-$VER-torch$TORCH_VER-$PYTAG-$(uname -m)-$FLAVOUR"
mkdir -p "$DEST"
if ls "$DEST"/mmcv-"$VER"-*.whl >/dev/null 2>&1; then
  echo "build_mmcv: cached wheel found in $DEST"
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  "$PY" -m pip install -q 'setuptools<81' wheel ninja
  "$PY" -m pip download -q --no-deps --no-binary :all: --no-build-isolation -d "$WORK" "mmcv==$VER"
  tar xzf "$WORK/mmcv-$VER.tar.gz" -C "$WORK"
  # C++20 for torch's headers; and no debug info (-g0 after Python's own -g) for the C++ ops:
  # gcc spends half of each file's time writing DWARF for the ATen templates (measured on
  # ops/csrc/pytorch/nms.cpp: 40-48 s with -g, 21-26 s with -g0), and the wheel shrinks from
  # 32 MB. Only the host compiler's flags: nvcc's are left as they are.
  sed -i -e "s/\['cxx'\] = \['-std=c++17'\]/['cxx'] = ['-std=c++20', '-g0']/" \
    -e 's/-std=c++17/-std=c++20/g' "$WORK/mmcv-$VER/setup.py"
  grep -q "'-std=c++20', '-g0'" "$WORK/mmcv-$VER/setup.py"  # the patch must have applied
  echo "build_mmcv: compiling mmcv $VER ops ($FLAVOUR) for torch $TORCH_VER; this takes 5-12 min on 2 cores"
  MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} "$PY" -m pip wheel -q --no-build-isolation --no-deps \
    -w "$WORK/dist" "$WORK/mmcv-$VER"
  mv "$WORK"/dist/mmcv-"$VER"-*.whl "$DEST/"
fi
"$PY" -m pip install -q --no-deps "$DEST"/mmcv-"$VER"-*.whl
"$PY" -c 'import mmcv, mmcv.ops; from mmcv.ops import nms; print("mmcv", mmcv.__version__, "ops OK")'
