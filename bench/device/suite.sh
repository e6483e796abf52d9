#!/usr/bin/env bash
# The WebGPU test suites on the GPU machine, where the subgroup-matrix kernels lavapipe lacks run.
#   here:   bash bench/device/suite.sh pack   (after `pnpm install`) fills .gpu-suite/ (git-ignored): node,
#           the Vulkan loader and the workspace's node_modules without its lint, docs, tfjs and browser
#           packages and type declarations, so that it and the working tree stay under a call's 64 MiB
#   there:  the device tool with carry [".gpu-suite"] and `bash .gpu-suite/suite.sh run [PROJECTS...]`
#           (default: @effect-gpu/webgpu @effect-gpu/testing); vitest's report comes back as $OUT/vitest.txt
set -euo pipefail
root=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
cd "$root"
out=.gpu-suite
if [ "${1:-pack}" = "run" ]; then
  shift
  for f in $out/debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
  mkdir -p /tmp/gpu-node && xz -dc $out/node.xz > /tmp/gpu-node/node && chmod +x /tmp/gpu-node/node
  export PATH=/tmp/gpu-node:$PWD/node_modules/.bin:$PATH XDG_RUNTIME_DIR=/tmp
  [ -d node_modules/vitest ] || xz -dc $out/node_modules.tar.xz | tar -xf -
  [ -e /usr/share/vulkan/icd.d/nvidia_icd.json ] || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
  projects=("${@:-@effect-gpu/webgpu}")
  [ $# -gt 0 ] || projects+=(@effect-gpu/testing)
  status=0
  CI=true vitest run $(printf -- '--project %s ' "${projects[@]}") > "${OUT:-/tmp}/vitest.txt" 2>&1 || status=$?
  sed 's/\x1b\[[0-9;]*m//g' "${OUT:-/tmp}/vitest.txt" | grep -E '^ (FAIL|Test Files|Tests|Duration)' || true
  exit $status
fi
grep -qx '/.gpu-suite/' .git/info/exclude 2>/dev/null || echo '/.gpu-suite/' >> .git/info/exclude
source bench/device/base.sh
pack_base $out
mapfile -t dirs < <(find ./node_modules ./packages/*/node_modules -maxdepth 0 -type d | sort)
left_out=(typescript prettier @effect+docgen eslint @typescript-eslint @tensorflow playwright-core @dprint @babel
  @vue @effect+cluster)
tar --exclude='*/webgpu/dist/darwin-*' --exclude='*/webgpu/dist/win32-*' --exclude='*/webgpu/dist/linux-arm64' \
  --exclude='*.map' --exclude='*.d.ts' $(for p in "${left_out[@]}"; do echo "--exclude=node_modules/.pnpm/$p*"; done) \
  -cf - "${dirs[@]}" | xz -T0 -3 > $out/node_modules.tar.xz
cp bench/device/suite.sh $out/suite.sh
du -sh $out/* | sed 's/^/  /'
echo "total: $(du -sh $out | cut -f1) (a device run carries at most 64 MiB with the working tree)"
