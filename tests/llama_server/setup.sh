#!/usr/bin/env bash
# Idempotent setup of the llama-server test peer (CPU only, no model download).
#  1. gets the llama-cpp-python 0.3.36 sdist from PyPI (it vendors llama.cpp),
#  2. unpacks it under $LLAMA_PEER_DIR (default: llama/ under the system temp dir),
#  3. builds only the llama-server target (7-11 minutes on 2 cores),
#  4. makes a venv with gguf+numpy+openai and writes the tiny models.
# Re-running skips every step whose output exists. Prints the binary path last.
# Env: LLAMA_PEER_DIR, JOBS (default: nproc), GGML_NATIVE (default ON).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=${LLAMA_PEER_DIR:-$(python3 -c "import tempfile; print(tempfile.gettempdir())")/llama}
VER=0.3.36
SDIST_NAME=llama_cpp_python-$VER.tar.gz
SRC=$ROOT/llama_cpp_python-$VER
BUILD=$ROOT/build
BIN=$BUILD/bin/llama-server
VENV=$ROOT/venv
JOBS=${JOBS:-$(nproc)}
mkdir -p "$ROOT" "$ROOT/dl"
log() { echo "[setup] $*" >&2; }

# 1. sdist
SDIST=""
for c in "$ROOT/dl/$SDIST_NAME"; do
  [ -s "$c" ] && SDIST=$c && break
done
if [ -z "$SDIST" ] && [ ! -x "$BIN" ]; then
  log "downloading $SDIST_NAME from PyPI"
  python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VER" -d "$ROOT/dl"
  SDIST=$ROOT/dl/$SDIST_NAME
fi

# 2-3. unpack + build
if [ ! -x "$BIN" ]; then
  command -v cmake >/dev/null && command -v g++ >/dev/null || {
    log "installing build tools"; apt-get update -qq && apt-get install -y -qq cmake g++ make; }
  if [ ! -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]; then
    log "unpacking $SDIST"
    tar -xzf "$SDIST" -C "$ROOT"
  fi
  GEN=()
  command -v ninja >/dev/null && GEN=(-G Ninja)
  log "configuring (log: $ROOT/configure.log)"
  cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" "${GEN[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE="${GGML_NATIVE:-ON}" -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    > "$ROOT/configure.log" 2>&1 || { tail -30 "$ROOT/configure.log" >&2; exit 1; }
  log "building llama-server with $JOBS jobs (log: $ROOT/build.log; 7-11 min on 2 cores)"
  t0=$(date +%s)
  cmake --build "$BUILD" --target llama-server -j "$JOBS" > "$ROOT/build.log" 2>&1 \
    || { tail -40 "$ROOT/build.log" >&2; exit 1; }
  log "built in $(( $(date +%s) - t0 )) s"
fi

# 4. venv + models
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import gguf, numpy, openai' 2>/dev/null; then
  log "installing gguf numpy openai into $VENV"
  "$VENV/bin/pip" install --quiet gguf numpy openai
fi
[ -s "$ROOT/tiny.gguf" ] || "$VENV/bin/python" "$HERE/make_model.py" "$ROOT/tiny.gguf" >&2
[ -s "$ROOT/tiny-random.gguf" ] || "$VENV/bin/python" "$HERE/make_model.py" "$ROOT/tiny-random.gguf" --pure-random >&2
log "model: $ROOT/tiny.gguf (scripted), $ROOT/tiny-random.gguf (pure random)"
echo "$BIN"
