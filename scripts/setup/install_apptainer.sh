#!/usr/bin/env bash
# Install Apptainer on a Debian 12 host that has no package for it (the project's build/test
# machines), so the project's own images can be built and run here. Clusters ship Apptainer: users
# do not need this. Idempotent: does nothing when `apptainer version` already works.
#   --if-possible   exit 0 with a note where it cannot be installed (not root, no apt-get): what
#                   `make test` uses; an installation that is attempted and fails still fails.
#
# Debian sid's apptainer binary runs with a private copy of sid's glibc (its interpreter and RPATH
# are patched to /opt/apptainer-glibc). Root without CAP_SYS_RESOURCE needs "capabilities = file"
# and a subuid/subgid range for --fakeroot builds.
set -euo pipefail
if command -v apptainer >/dev/null 2>&1 && apptainer version >/dev/null 2>&1; then
    echo "apptainer $(apptainer version) already installed"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    if [ "${1:-}" = --if-possible ]; then
        echo "install_apptainer.sh: not installing apptainer here (needs root and apt-get); the image tests will skip" >&2
        exit 0
    fi
    echo "install_apptainer.sh: needs root, apt-get and dpkg-deb" >&2
    exit 1
fi
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/lists/partial" "$W/archives/partial"
echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main' > "$W/sources.list"
APT=(-o "Dir::Etc::SourceList=$W/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$W/lists" -o "Dir::Cache::Archives=$W/archives"
     -o "Dir::Cache::pkgcache=$W/pkgcache.bin" -o "Dir::Cache::srcpkgcache=$W/srcpkgcache.bin")
apt-get "${APT[@]}" update -qq
(cd "$W" && apt-get "${APT[@]}" download apptainer libc6)
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    patchelf squashfs-tools uidmap debootstrap fuse2fs
dpkg-deb -x "$W"/apptainer_*_amd64.deb /
G=/opt/apptainer-glibc; mkdir -p "$G"; dpkg-deb -x "$W"/libc6_*_amd64.deb "$G"
L=$G/usr/lib/x86_64-linux-gnu
for b in /usr/bin/apptainer /usr/lib/x86_64-linux-gnu/apptainer/bin/starter; do
    patchelf --set-interpreter "$L/ld-linux-x86-64.so.2" "$b"
    patchelf --force-rpath --set-rpath "$L:/lib/x86_64-linux-gnu" "$b"   # RPATH, not RUNPATH
done
sed -i 's/^root default capabilities = full/root default capabilities = file/' /etc/apptainer/apptainer.conf
grep -q '^root:' /etc/subuid 2>/dev/null || echo 'root:100000:65536' >> /etc/subuid
grep -q '^root:' /etc/subgid 2>/dev/null || echo 'root:100000:65536' >> /etc/subgid
apptainer version
