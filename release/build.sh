#!/usr/bin/env bash
# Builds promoter's release: static (musl) binaries, one archive per platform (the binary and the
# licence, what krew/promoter.yaml installs), SHA256SUMS, and the krew manifest with its sha256s
# filled in.
#
#   release/build.sh [--profile PROFILE] [--out DIR] [--binaries-only] [PLATFORM...]
#
# PLATFORM: amd64, arm64 (Docker's TARGETARCH names; linux is implied), default both.
# --profile: cargo profile, default release (fat LTO, stripped); CI passes dev to check the script
#   without the optimised build.
# --out: default target/dist. Written there:
#   linux-<arch>/promoter                        the binary (what the image packs)
#   promoter_v<version>_linux_<arch>.tar.gz      promoter and LICENSE, reproducible (sorted, mtime
#                                                of the last commit, owner 0)
#   SHA256SUMS                                   sha256sum's format, for `sha256sum -c`
#   promoter.yaml                                krew/promoter.yaml for these archives
# --binaries-only: only linux-<arch>/promoter (the image build).
#
# The C code (ring, the vendored Lua) and the link need a C toolchain for each target: musl-gcc
# (Debian's musl-tools) for the build machine's own architecture, else cargo-zigbuild with zig
# (PyPI: pip install cargo-zigbuild ziglang). Every binary is checked to be static; one of the build
# machine's architecture is also run. PROMOTER_RELEASE_URL is where the archives are published
# (default: the GitHub release of the version's tag).
#
# Not built: macOS, which links Apple's Security and CoreFoundation frameworks (rustls-native-certs
# and rustls-platform-verifier, under kube's TLS) and so needs the macOS SDK, which no registry here
# ships (zig brings only libSystem's stubs); Windows, for which promoter does not compile (the SIGPIPE
# handler of the CLI, setrlimit and sysconf of the health-check workers are Unix calls). The krew
# manifest therefore names linux/amd64 and linux/arm64 only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profile=release
out=target/dist
binaries_only=false
platforms=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --binaries-only) binaries_only=true; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "release/build.sh: unknown option $1" >&2; exit 1 ;;
    *) platforms+=("$1"); shift ;;
  esac
done
[ ${#platforms[@]} -gt 0 ] || platforms=(amd64 arm64)

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
tag="v${version}"
base_url="${PROMOTER_RELEASE_URL:-https://github.com/promoter-dev/promoter/releases/download/${tag}}"
# cargo's directory for a profile: dev builds land in debug/.
profile_dir="${profile}"
[ "${profile}" = dev ] && profile_dir=debug
host_arch="$(uname -m)"
target_dir="${CARGO_TARGET_DIR:-target}"

triple_of() {
  case "$1" in
    amd64) echo x86_64-unknown-linux-musl ;;
    arm64) echo aarch64-unknown-linux-musl ;;
    *) echo "release/build.sh: unknown platform $1 (amd64 or arm64)" >&2; return 1 ;;
  esac
}

# `cargo build` when musl-gcc builds for this target (the build machine's architecture), else
# `cargo zigbuild`.
cargo_command_for() {
  local triple="$1"
  if [ "${triple%%-*}" = "${host_arch}" ] && command -v musl-gcc >/dev/null 2>&1; then
    echo build
  elif command -v cargo-zigbuild >/dev/null 2>&1; then
    echo zigbuild
  else
    echo "release/build.sh: cannot build ${triple} here: it needs musl-gcc (apt-get install musl-tools) on a ${triple%%-*} machine, or cargo-zigbuild and zig (pip install cargo-zigbuild ziglang)" >&2
    return 1
  fi
}

mkdir -p "${out}"
for platform in "${platforms[@]}"; do
  triple="$(triple_of "${platform}")"
  if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx "${triple}"; then
    rustup target add "${triple}"
  fi
  how="$(cargo_command_for "${triple}")"
  echo "== ${triple}: cargo ${how} --profile ${profile}"
  cargo "${how}" --locked --profile "${profile}" --target "${triple}" -p promoter --bin promoter
  binary="${target_dir}/${triple}/${profile_dir}/promoter"
  # Static: no program interpreter and no shared library needed (readelf reads any architecture).
  if readelf -lW "${binary}" | grep -q 'Requesting program interpreter' \
    || readelf -dW "${binary}" | grep -q '(NEEDED)'; then
    echo "${binary} is not static:" >&2
    readelf -dW "${binary}" | grep '(NEEDED)' >&2 || true
    exit 1
  fi
  if [ "${triple%%-*}" = "${host_arch}" ]; then
    "${binary}" --version
  fi
  mkdir -p "${out}/linux-${platform}"
  cp "${binary}" "${out}/linux-${platform}/promoter"
  echo "${out}/linux-${platform}/promoter: static, $(du -h "${binary}" | cut -f1) (${profile})"
done
${binaries_only} && exit 0

# Reproducible archives: the same sources give the same bytes.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
archives=()
for platform in "${platforms[@]}"; do
  name="promoter_${tag}_linux_${platform}"
  stage="${out}/${name}"
  rm -rf "${stage}"
  mkdir -p "${stage}"
  cp "${out}/linux-${platform}/promoter" LICENSE "${stage}/"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${epoch}" \
    -C "${stage}" -cf - promoter LICENSE | gzip -n > "${out}/${name}.tar.gz"
  rm -rf "${stage}"
  archives+=("${name}.tar.gz")
done
(cd "${out}" && sha256sum "${archives[@]}" > SHA256SUMS)

# The krew manifest: each platform built gets its URL and sha256; the others are left out (a
# platform is one `- selector:` item of spec.platforms, the manifest's last field).
awk -v version="${tag}" -v base="${base_url}" -v sums="${out}/SHA256SUMS" '
  BEGIN { while ((getline line < sums) > 0) { split(line, f, "  "); sha[f[2]] = f[1] } }
  function flush() {
    if (block != "" && (archive == "" || archive in sha)) {
      if (archive != "") gsub(/\$\{SHA256\}/, sha[archive], block)
      printf "%s", block
    }
    block = ""; archive = ""
  }
  /^#/ { next }
  /^  - selector:/ || /^[^ ]/ { flush() }
  {
    line = $0
    gsub(/\$\{VERSION\}/, version, line)
    gsub(/\$\{BASE_URL\}/, base, line)
    if (match(line, /promoter_v[^\/"]*\.tar\.gz/)) archive = substr(line, RSTART, RLENGTH)
    block = block line "\n"
  }
  END { flush() }
' krew/promoter.yaml > "${out}/promoter.yaml"
# shellcheck disable=SC2016 # a literal ${, a placeholder left
if grep -q '\${' "${out}/promoter.yaml"; then
  echo "release/build.sh: ${out}/promoter.yaml still has a placeholder" >&2
  exit 1
fi
echo "== ${out}"
(cd "${out}" && ls -l "${archives[@]}" SHA256SUMS promoter.yaml && cat SHA256SUMS)
