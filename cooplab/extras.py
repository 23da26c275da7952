"""Optional parts of cooplab and the one-line error when one is missing.

``pip install cooplab`` is the light core (no compiler, no PyTorch); heavy parts are extras named
for what a user wants (README "Install")::

    local     the local model's runtime: llama-cpp-python (the SmolLM2-135M file itself is fetched by
              ``cooplab models fetch``, see ``cooplab.agents.model_files``)
    analysis  statistics (SciPy, statsmodels), sensitivity analysis (SALib) and what the
              norm-similarity embedder reads its files with (safetensors, tokenizers; no PyTorch)
    dev       pytest and Mesa (tests, the ABM benchmark)
    ray       the Ray executor of ``cooplab sweep`` (``--executor ray``)
    bayes     the Bayesian analyses of ``cooplab analyze profiles|science`` (NumPyro, JAX)
    viewer    OTLP export of traces to Phoenix, Langfuse or Jaeger (OpenTelemetry SDK, OTLP/HTTP
              exporter, OpenInference conventions, Phoenix's client)
    server    LangGraph's own development server and its client (``langgraph dev``, langgraph-sdk)
              for the graphs of langgraph.json
    view      the run explorer served by ``cooplab view`` and ``cooplab traces view`` (Starlette,
              uvicorn; its templates, Jinja2, are in the core for ``cooplab report``)
    anthropic Anthropic's models, ``anthropic:NAME`` (langchain-anthropic)
    google    Google's Gemini models, ``google_genai:NAME`` (langchain-google-genai)
    ollama    models served by Ollama, ``ollama:NAME`` (langchain-ollama)
    all       all of the above

Code that needs an extra calls :func:`require` before importing it: a missing package is then
:class:`MissingExtra` (a user-facing ``ConfigError``: ``cooplab: error: the local model needs 'pip
install cooplab[local]'``, exit 2), never an ``ImportError`` traceback. ``require`` only looks the
packages up (``importlib.util.find_spec``); it imports nothing.
"""

from __future__ import annotations

import importlib.util
import sys

from cooplab.limits import ConfigError

#: extra -> the importable packages it provides
EXTRAS: dict[str, tuple[str, ...]] = {
    "local": ("llama_cpp",),
    "analysis": ("scipy", "statsmodels", "SALib", "safetensors", "tokenizers"),
    "dev": ("pytest", "mesa"),
    # the Ray executor of cooplab sweep (--executor ray)
    "ray": ("ray",),
    # the Bayesian analyses (cooplab analyze profiles / science): NumPyro on JAX, CPU
    "bayes": ("numpyro", "jax"),
    # the hosted providers' LangChain integrations (cooplab.agents.providers)
    "anthropic": ("langchain_anthropic", "anthropic"),
    "google": ("langchain_google_genai",),
    "ollama": ("langchain_ollama", "ollama"),
    # OTLP export of traces (evals/otlp_export.py) and Phoenix's client (its tests read spans back)
    "viewer": (
        "opentelemetry.sdk",
        "opentelemetry.exporter.otlp.proto.http",
        "openinference.semconv",
        "phoenix.client",
    ),
    # langgraph dev serving langgraph.json's graphs (cooplab/runs/server_graphs.py), and the SDK its test drives it with
    "server": ("langgraph_cli", "langgraph_api", "langgraph_runtime_inmem", "langgraph_sdk"),
    # the run explorer served (cooplab view, cooplab traces view; evals/explorer/app.py): the web app and its server
    "view": ("starlette", "uvicorn"),
}


class MissingExtra(ConfigError):
    """A part of cooplab that is not installed (one line naming the extra to install)."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it). A module hidden by
    ``sys.modules[name] = None`` counts as missing, as Python's import does."""
    top = module.split(".")[0]
    if top in sys.modules and sys.modules[top] is None:
        return False
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):  # a broken or hidden package
        return False


def missing(extra: str, modules: tuple[str, ...] | None = None) -> list[str]:
    """The packages of ``extra`` (or ``modules`` of it) that are not installed."""
    return [m for m in (modules or EXTRAS[extra]) if not installed(m)]


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtra` unless the packages of ``extra`` (or just ``modules``) are
    installed. ``what``: the part that needs them, as the user would name it ("the local model")."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    gone = missing(extra, modules)
    if gone:
        raise MissingExtra(f"{what} needs 'pip install cooplab[{extra}]' (missing: {', '.join(gone)})")
