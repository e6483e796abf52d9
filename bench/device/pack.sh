#!/usr/bin/env bash
# Packs what the model benchmarks need on the GPU machine into .gpu-llm/ at the project's root (git-ignored):
#   node.xz             this machine's node binary (the GPU machine has no Node.js)
#   debs/               the Vulkan loader and GLVND libraries (the GPU machine has the NVIDIA driver only)
#   webgpu.tar.xz       Dawn (npm webgpu 0.6.2, linux-x64 only)
#   llamapack.tar.xz    llama.cpp's Vulkan build (node-llama-cpp 3.21.1, @node-llama-cpp/linux-x64-vulkan)
#   *.mjs               bench/llm.ts, bench/run.ts (its tfjs peer left out: run it with --no-peer) and the
#                       probes bundled with esbuild (Dawn left external);
#                       bench.mjs: tools/llama-oracle/bench.mjs
#   run.sh              the entry point there (bench/device/run.sh); table.sh: issue 20's model table; ab.sh:
#                       an A/B of two bundles of bench/llm.ts; forms.sh: more forms of it, in turn; h200.sh:
#                       the table and the forms an H200 has still to time; steps.sh: several of these in one
#                       call, each
#                       step's files gathered into one (a call returns a handful of files)
#   llm-base.mjs        with BASE=<commit>: bench/llm.ts as of that commit (its tree checked out apart), the
#                       A of an A/B against this tree's llm.mjs
# After `pnpm install`: `bash bench/device/pack.sh`, then the device tool with carry [".gpu-llm"] and e.g.
#   bash .gpu-llm/run.sh bash -c 'cd .gpu-llm && node llm.mjs models /tmp/m 1b-q4_0 && node llm.mjs run /tmp/m 1b-q4_0'
# The parts other than the bundles are kept between runs (delete .gpu-llm to rebuild them).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
out=.gpu-llm
grep -qx '/.gpu-llm/' .git/info/exclude 2>/dev/null || echo '/.gpu-llm/' >> .git/info/exclude
source bench/device/base.sh
pack_base $out
if [ ! -s $out/webgpu.tar.xz ]; then
  webgpu=$(readlink -f bench/node_modules/webgpu)
  tar --exclude='dist/darwin-*' --exclude='dist/win32-*' --exclude='dist/linux-arm64' -C "$(dirname "$webgpu")" \
    --transform 's,^webgpu,node_modules/webgpu,' -cf - webgpu | xz -T0 -6 > $out/webgpu.tar.xz
fi
if [ ! -s $out/llamapack.tar.xz ]; then
  tmp=$(mktemp -d)
  echo '{"private":true}' > "$tmp/package.json"
  (cd "$tmp" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --no-audit --no-fund --omit=optional \
    node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64-vulkan@3.21.1 >/dev/null)
  # without llama.cpp's git bundle (34 MB, for builds from source) and older CPU variants (the runs of
  # 2026-12-03/04 went without them): the carry stays under its 64 MiB
  v=node_modules/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan
  tar -C "$tmp" --exclude=node_modules/node-llama-cpp/llama/gitRelease.bundle \
    $(for c in alderlake cannonlake cascadelake cooperlake ivybridge piledriver sandybridge skylakex sse42; do
      echo "--exclude=$v/libggml-cpu-$c.so"; done) -cf - node_modules | xz -T0 -6 > $out/llamapack.tar.xz
  rm -rf "$tmp"
fi
# the package's own bin (a native binary after its install); pnpm's .bin shim runs it with node, which fails
esbuild=$(ls node_modules/.pnpm/esbuild@*/node_modules/esbuild/bin/esbuild | head -1)
bundle() {
  "$esbuild" "$1" --bundle --platform=node --format=esm --target=node20 --external:webgpu --external:'@tensorflow/*' --conditions=dawn \
    --log-level=warning --outfile="$out/$2" \
    --banner:js="import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);"
}
bundle bench/llm.ts llm.mjs
bundle bench/probes/kernel-check.ts check.mjs
bundle bench/probes/prefill-probe.ts prefill.mjs
bundle bench/probes/attention-probe.ts attention.mjs
bundle bench/probes/prompt-attention-probe.ts prompt-attention.mjs
bundle bench/probes/split-probe.ts split.mjs
bundle bench/probes/oracle-check.ts oracle.mjs
bundle bench/probes/mvq-raw.ts mvqraw.mjs
bundle bench/probes/mma8-raw.ts mma8.mjs
bundle bench/probes/copy-probe.ts copy.mjs
bundle bench/run.ts run.mjs
if [ -n "${BASE:-}" ]; then
  # the other tree borrows this one's installed packages (links to each entry of its node_modules), but its
  # workspace packages are its own: pnpm's relative links to them (@effect-gpu/*) are copied as they are
  base=$(mktemp -d)
  git worktree add -q --detach "$base/tree" "$BASE"
  for m in $(find . -maxdepth 3 -name node_modules -not -path './.gpu-llm/*' -not -path './node_modules/*'); do
    mkdir -p "$base/tree/$m"
    for e in "$m"/* "$m"/.[!.]*; do
      [ -e "$e" ] || [ -L "$e" ] || continue
      if [ "$(basename "$e")" = "@effect-gpu" ]; then cp -P -r "$e" "$base/tree/$m/"
      else ln -s "$root/$e" "$base/tree/$e"; fi
    done
  done
  (cd "$base/tree" && bundle bench/llm.ts llm-base.mjs && mv $out/llm-base.mjs "$root/$out/")
  git worktree remove --force "$base/tree"
  rm -rf "$base"
fi
cp tools/llama-oracle/bench.mjs bench/device/run.sh bench/device/common.sh bench/device/table.sh bench/device/ab.sh bench/device/forms.sh bench/device/h200.sh \
  bench/device/steps.sh bench/device/clocked.sh $out/
du -sh $out/* | sed 's/^/  /'
echo "total: $(du -sh $out | cut -f1) (a device run carries at most 64 MiB with the working tree)"
