#!/usr/bin/env bash
# Builds the test oracles' Python environment (the real jax, optax, flax, optree, safetensors,
# numpy and ml_dtypes, pinned in tests/oracle/requirements.txt) in DIR, only when it is missing or
# was built from another requirements file, and prints its interpreter's path on standard output.
# Debian's /usr/bin/python3 (python3-venv) makes it, so that the environment does not depend on
# whichever python3 comes first on PATH.
#
# Usage: scripts/oracle-env.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
  echo "usage: scripts/oracle-env.sh DIR" >&2
  exit 2
fi
dir=$1
requirements=tests/oracle/requirements.txt
stamp=$dir/grove-requirements.txt
if [ -x "$dir/bin/python" ] && cmp -s "$requirements" "$stamp"; then
  echo "$dir/bin/python"
  exit 0
fi
rm -rf "$dir"
echo "grove: building the test oracles' environment in $dir from $requirements" >&2
/usr/bin/python3 -m venv "$dir" >&2
# A short timeout and few retries: an unreachable index should fail in seconds, not minutes.
if ! "$dir/bin/python" -m pip install --disable-pip-version-check --quiet --timeout 30 --retries 2 \
     -r "$requirements" >&2; then
  rm -rf "$dir"
  cat >&2 <<MSG
grove: could not install the test oracles (tests/oracle/requirements.txt) from the Python Package
Index: is it reachable from this machine? The tests that compare grove with the real JAX, optax,
flax, optree and safetensors need them. To run every other test without them:
  GROVE_OFFLINE=1 scripts/test.sh
(they are then reported as skipped).
MSG
  exit 1
fi
cp "$requirements" "$stamp"
echo "$dir/bin/python"
