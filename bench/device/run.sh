#!/usr/bin/env bash
# On the GPU machine: Node.js, the Vulkan loader, Dawn (npm webgpu) and llama.cpp's Vulkan build from
# .gpu-llm (bench/device/pack.sh), then the command.
set -euo pipefail
for f in .gpu-llm/debs/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /tmp/gpu-node && xz -dc .gpu-llm/node.xz > /tmp/gpu-node/node && chmod +x /tmp/gpu-node/node
export PATH=/tmp/gpu-node:$PATH XDG_RUNTIME_DIR=/tmp
[ -d .gpu-llm/node_modules/webgpu ] || (cd .gpu-llm && xz -dc webgpu.tar.xz | tar -xf -)
[ -d .gpu-llm/node_modules/node-llama-cpp ] || (cd .gpu-llm && xz -dc llamapack.tar.xz | tar -xf -)
[ -e /usr/share/vulkan/icd.d/nvidia_icd.json ] || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
exec "$@"
