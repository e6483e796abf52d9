# Sourced by pack.sh and suite.sh on this machine: `pack_base DIR` puts what every run on the GPU machine
# needs into DIR (kept between packs): this machine's node binary (the GPU machine has no Node.js) and the
# Vulkan loader and GLVND libraries (it has the NVIDIA driver only).
pack_base() {
  mkdir -p "$1/debs"
  [ -s "$1/node.xz" ] || xz -T0 -6 -c "$(readlink -f "$(command -v node)")" > "$1/node.xz"
  if ! ls "$1"/debs/libvulkan1_*.deb >/dev/null 2>&1; then
    mkdir -p /tmp/amd64-lists/partial
    local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64-lists'
    # shellcheck disable=SC2086 # o is apt's options, one a word
    apt-get $o update >/dev/null
    # shellcheck disable=SC2086
    (cd "$1/debs" && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 2>/dev/null)
  fi
}
