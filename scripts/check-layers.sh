#!/usr/bin/env bash
# Fails when a grove header includes a header of a layer above its own (docs/CONVENTIONS.md,
# "Layers"). Usage: scripts/check-layers.sh [INCLUDE_DIR]   (default: include/ of this checkout)
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
    grove/parallel/train.hpp) echo joins ;;
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
    nn) echo "core tree random optim nn" ;;
    joins) echo "core tree random optim io parallel nn joins" ;;
    umbrella) echo "core tree random optim io parallel nn joins" ;;
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
[ $status -eq 0 ] && echo "check-layers: every header includes only its own layer and those below"
exit $status
