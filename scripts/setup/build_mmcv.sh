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
  # A precompiled header for the CPU build: 77 of the op sources open with
  # ops/csrc/common/pytorch_cpp_helper.hpp (torch/types.h), and parsing torch's headers is most of
  # each file's time (nms.cpp alone: 8.9 s, 2.4 s with the header precompiled). The compiler is a
  # wrapper that, at the first compile, precompiles that header with that compile's own flags into
  # pytorch_cpp_helper.hpp.gch beside it; gcc then uses it for every source that includes it first
  # and checks that it matches (a header it cannot use is parsed as before). Not for FORCE_CUDA
  # (nvcc's host compiles would see the .gch too), nor without flock (two compiles would write it).
  if [ "$FLAVOUR" = cpu ] && command -v flock >/dev/null 2>&1; then
    HDR="$WORK/mmcv-$VER/mmcv/ops/csrc/common/pytorch_cpp_helper.hpp"
    test -f "$HDR"
    cat >"$WORK/c++" <<'WRAP'
#!/usr/bin/env bash
# build_mmcv.sh's compiler: precompile PMCFLOW_PCH_HEADER once with the first compile's flags
read -r -a real <<<"$PMCFLOW_REAL_CXX"  # CXX may be a command line ("ccache g++")
compile=0 skip=0 flags=()
for a in "$@"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  case "$a" in
    -c) compile=1 ;;
    -o | -MF | -MT | -MQ) skip=1 ;;
    -MMD | -MD) ;;
    *.cpp | *.cc | *.cxx | *.c) ;;
    *) flags+=("$a") ;;
  esac
done
if [ "$compile" = 1 ] && [ ! -e "$PMCFLOW_PCH_HEADER.gch" ] && [ ! -e "$PMCFLOW_PCH_HEADER.failed" ]; then
  (
    flock 9
    if [ ! -e "$PMCFLOW_PCH_HEADER.gch" ] && [ ! -e "$PMCFLOW_PCH_HEADER.failed" ]; then
      if "${real[@]}" "${flags[@]}" -x c++-header "$PMCFLOW_PCH_HEADER" -o "$PMCFLOW_PCH_HEADER.gch.part"; then
        mv "$PMCFLOW_PCH_HEADER.gch.part" "$PMCFLOW_PCH_HEADER.gch"
      else
        rm -f "$PMCFLOW_PCH_HEADER.gch.part"
        touch "$PMCFLOW_PCH_HEADER.failed"  # compile without it, and do not try again
      fi
    fi
  ) 9>"$PMCFLOW_PCH_HEADER.lock"
fi
exec "${real[@]}" "$@"
WRAP
    chmod +x "$WORK/c++"
    export PMCFLOW_REAL_CXX="${CXX:-c++}" PMCFLOW_PCH_HEADER="$HDR"
    if "$WORK/c++" --version >/dev/null 2>&1; then
      export CXX="$WORK/c++"
    else  # a temporary directory mounted noexec: compile as before
      echo "build_mmcv: note: $WORK is not executable here; compiling without the precompiled header" >&2
      touch "$HDR.failed"
    fi
  fi
  echo "build_mmcv: compiling mmcv $VER ops ($FLAVOUR) for torch $TORCH_VER; this takes 3-7 min on 2 cores"
  MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} "$PY" -m pip wheel -q --no-build-isolation --no-deps \
    -w "$WORK/dist" "$WORK/mmcv-$VER"
  if [ -n "${HDR:-}" ] && [ ! -e "$HDR.gch" ]; then
    echo "build_mmcv: note: the precompiled header was not made; the ops were compiled without it" >&2
  fi
  mv "$WORK"/dist/mmcv-"$VER"-*.whl "$DEST/"
fi
"$PY" -m pip install -q --no-deps "$DEST"/mmcv-"$VER"-*.whl
"$PY" -c 'import mmcv, mmcv.ops; from mmcv.ops import nms; print("mmcv", mmcv.__version__, "ops OK")'
