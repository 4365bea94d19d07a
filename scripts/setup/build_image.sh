#!/usr/bin/env bash
# Build one of the project's Apptainer images from the repository root:
#   scripts/setup/build_image.sh NAME [OUTPUT.sif] [extra apptainer build args...]
# builds containers/NAME.def into OUTPUT (default containers/NAME.sif).
#
# Environment:
#   APPTAINER            the apptainer (or singularity) binary (default: from PATH)
#   APPTAINER_BUILD_FLAGS  default --fakeroot
#   DEBIAN_MIRROR        a Debian mirror of the same suite, for hosts that cannot reach the
#                        definition's pinned snapshot.debian.org archive (the pin stays the default;
#                        the mirror used is recorded in the image's labels)
#   BUILD_CA             a CA bundle to trust inside %post (default: $PIP_CERT when it is a file),
#                        for builds behind a TLS-intercepting proxy; bound read-only at /mnt
set -euo pipefail
name=${1:?usage: build_image.sh NAME [OUTPUT.sif] [apptainer build args...]}
shift
out=${1:-containers/$name.sif}
[ $# -gt 0 ] && shift
def=containers/$name.def
[ -f "$def" ] || { echo "build_image.sh: no $def" >&2; exit 2; }
app=${APPTAINER:-$(command -v apptainer || command -v singularity || true)}
[ -n "$app" ] || { echo "build_image.sh: apptainer not found (scripts/setup/install_apptainer.sh on Debian)" >&2; exit 2; }
args=(${APPTAINER_BUILD_FLAGS---fakeroot} --force)
if [ -n "${DEBIAN_MIRROR:-}" ]; then
    args+=(--build-arg "DEBIAN_MIRROR=$DEBIAN_MIRROR")
elif grep -q '^Bootstrap: *debootstrap' "$def"; then
    pinned=$(sed -n 's/^ *DEBIAN_MIRROR=//p' "$def" | head -1)
    if ! curl -fsS -o /dev/null --max-time 20 "${pinned%/}/dists/$(sed -n 's/^OSVersion: *//p' "$def")/Release"; then
        echo "build_image.sh: the pinned Debian archive $pinned cannot be reached from here;" >&2
        echo "  set DEBIAN_MIRROR to a mirror of the same suite, e.g. DEBIAN_MIRROR=http://deb.debian.org/debian/" >&2
        exit 1
    fi
fi
ca=${BUILD_CA:-${PIP_CERT:-}}
if [ -n "$ca" ] && [ -f "$ca" ]; then
    args+=(--bind "$(dirname "$(readlink -f "$ca")"):/mnt:ro" --build-arg "PIP_CERT=/mnt/$(basename "$(readlink -f "$ca")")")
fi
mkdir -p "$(dirname "$out")"
echo "+ $app build ${args[*]} $* $out $def" >&2
exec "$app" build "${args[@]}" "$@" "$out" "$def"
