#!/usr/bin/env bash
# Fails when a grove header includes a header of a layer above its own, or names another layer's
# detail namespace (docs/CONVENTIONS.md, "Layers"). Usage: scripts/check-layers.sh [INCLUDE_DIR]   (default: include/ of this checkout)
set -euo pipefail
dir=${1:-"$(dirname "$0")/../include"}
cd "$dir"

# The layer of a header, by its path under include/.
layer_of() {
  case "$1" in
    grove/config.hpp | grove/error.hpp | grove/version.hpp | grove/detail/*) echo core ;;
    grove/tree.hpp | grove/tree/* | grove/vmap.hpp) echo tree ;;
    grove/random.hpp | grove/random/*) echo random ;;
    grove/optim.hpp | grove/optim/*) echo optim ;;
    grove/io/*) echo io ;;
    grove/data.hpp | grove/data/*) echo data ;;
    grove/parallel/train.hpp | grove/parallel/zero.hpp | grove/parallel/detail/overlap.hpp) echo joins ;;
    grove/mpi.hpp | grove/parallel.hpp | grove/parallel/*) echo parallel ;;
    grove/nn.hpp | grove/nn/*) echo nn ;;
    grove/grove.hpp) echo umbrella ;;
    *) echo unknown ;;
  esac
}

# The layers a layer may include (its own included).
allowed() {
  case "$1" in
    core) echo "core" ;;
    tree | random) echo "core $1" ;;
    optim | parallel) echo "core tree $1" ;;
    io) echo "core tree random io" ;;
    data) echo "core tree random io data" ;;
    nn) echo "core tree random optim nn" ;;
    joins) echo "core tree random optim io data parallel nn joins" ;;
    umbrella) echo "core tree random optim io data parallel nn joins" ;;
    *) echo "" ;;
  esac
}

status=0
while IFS= read -r header; do
  from=$(layer_of "$header")
  if [ "$from" = unknown ]; then
    echo "check-layers: $header: not in any layer of docs/CONVENTIONS.md" >&2
    status=1
    continue
  fi
  ok=" $(allowed "$from") "
  while IFS= read -r included; do
    to=$(layer_of "$included")
    case "$ok" in
      *" $to "*) ;;
      *)
        echo "check-layers: $header ($from) includes $included ($to)" >&2
        status=1
        ;;
    esac
  done < <(sed -nE 's@^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](grove/[^>"]+)[>"].*@\1@p' "$header")
done < <(find grove -name '*.hpp' | sort)

# A layer's internals (namespace grove::LAYER::detail) are its own: another layer calls its public
# hooks. The tree core's grove::detail is shared by every layer, as are core's headers.
for layer in random optim io data parallel nn; do
  while IFS= read -r hit; do
    echo "check-layers: ${hit%%:*} uses ${layer}::detail:: outside grove/$layer/ ($(echo "${hit#*:}" | sed -E 's/^[0-9]+:[[:space:]]*//'))" >&2
    status=1
  done < <(grep -rnE "(^|[^[:alnum:]_])${layer}::detail::" grove --include='*.hpp' |
             grep -v "^grove/${layer}/" | grep -v "^grove/${layer}\.hpp:" || true)
done
[ $status -eq 0 ] && echo "check-layers: every header includes only its own layer and those below," \
  "and uses no other layer's detail namespace"
exit $status
