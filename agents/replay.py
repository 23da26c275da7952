"""A call answered from the response cache, traced like any other model call.

A replayed call reaches no model, so LangChain would report nothing: the traces of a rerun, a
resumed or a forked run would hold phases in which nobody said anything. :func:`trace_replay`
reports it through the call's own callbacks as the live call was reported: an ``llm`` run with the
same name, inputs (the messages sent), invocation parameters and model labels (``ls_provider``,
``ls_model_name``, taken from the model that answered first), whose output is the stored answer.
Every callback handler the call has sees it: the run's ``traces.jsonl`` (:class:`~cooplab.graphs.tracing.JsonlTracer`),
live LangSmith tracing, a handler of the user's own.

What tells a replay apart (:func:`cooplab.graphs.tracing.labels.replay_config`): the metadata
``cached: true`` and the tag ``cached``; the cost zero (the answer's ``usage_metadata`` carries
``total_cost: 0``, as LangChain's own cache marks a hit, so LangSmith prices it at nothing);
and, as metadata, what the original call took: ``original_latency_s``, ``original_usage`` (the
tokens it was charged) and ``cached_at`` (when its answer was stored).

Tracing never breaks a run: a failure to report a replay is logged and the call goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cached_property
from typing import Any

from langchain_core.callbacks.manager import AsyncCallbackManager
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableBinding, RunnableConfig, ensure_config
from pydantic import ConfigDict

from cooplab.agents.cache import CachedResponse
from cooplab.graphs.tracing.labels import replay_config

logger = logging.getLogger("cooplab.agents.replay")


class ReplayChatModel(BaseChatModel):
    """A chat model that answers ``message`` and describes itself as ``original`` (the model the
    answer came from): the same serialized form, invocation parameters and LangSmith labels, so its
    run reads as the original call's. Never cached by LangChain, never rate limited."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    original: Any = None
    message: AIMessage

    @property
    def _llm_type(self) -> str:
        return self.original._llm_type if isinstance(self.original, BaseChatModel) else "cooplab-replay"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return dict(self.original._identifying_params) if isinstance(self.original, BaseChatModel) else {}

    @cached_property
    def _serialized(self) -> dict[str, Any]:  # type: ignore[override]
        if isinstance(self.original, BaseChatModel):
            return self.original._serialized
        return {"lc": 1, "type": "not_implemented", "id": ["cooplab", "ReplayChatModel"]}

    def _get_invocation_params(self, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        if isinstance(self.original, BaseChatModel):
            return self.original._get_invocation_params(stop=stop, **kwargs)
        return super()._get_invocation_params(stop=stop, **kwargs)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        if isinstance(self.original, BaseChatModel):
            return self.original._get_ls_params(stop=stop, **kwargs)
        return super()._get_ls_params(stop=stop, **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.message)])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.message)])


def replay_message(
    text: str, response: CachedResponse, from_text: Callable[[str], BaseMessage] | None = None
) -> AIMessage:
    """The answer of a replayed call as the model's message: ``from_text(text)`` (how its caller
    reads a stored answer back, e.g. a tool loop's tool calls), else the text; its usage the tokens
    stored with it, its cost zero, its ``response_metadata`` saying it was cached."""
    msg = from_text(text) if from_text is not None else AIMessage(content=text)
    if not isinstance(msg, AIMessage):
        msg = AIMessage(content=text)
    usage = {
        "input_tokens": response.input_tokens,
        "output_tokens": response.output_tokens,
        "total_tokens": response.input_tokens + response.output_tokens,
        "input_cost": 0,
        "output_cost": 0,
        "total_cost": 0,
    }  # as LangChain's cache marks a hit: priced at nothing
    # model_copy: usage_metadata's type has no cost keys, and a validated copy would drop them
    return msg.model_copy(
        update={"usage_metadata": usage, "response_metadata": {**msg.response_metadata, "cached": True}}
    )


def _unbound(
    runnable: Any, config: RunnableConfig | None, kwargs: dict[str, Any]
) -> tuple[Any, RunnableConfig | None, dict[str, Any]]:
    """The model inside ``runnable`` (a model with tools bound, say), with the config and call
    keywords it would have been invoked with."""
    while isinstance(runnable, RunnableBinding):
        kwargs = {**runnable.kwargs, **kwargs}
        config = runnable._merge_configs(config)
        runnable = runnable.bound
    return runnable, config, kwargs


def _handlers(model: Any, config: RunnableConfig | None) -> list:
    """The callback handlers a call of ``model`` with ``config`` would report to (those of the config
    or of the running graph, the model's own, and LangSmith's when tracing is switched on)."""
    cfg = ensure_config(config)
    own = model.callbacks if isinstance(model, BaseChatModel) else None
    return AsyncCallbackManager.configure(
        cfg.get("callbacks"), own, inheritable_tags=cfg.get("tags"), inheritable_metadata=cfg.get("metadata")
    ).handlers


async def trace_replay(
    *,
    runnable: Any,
    messages: list[BaseMessage],
    kwargs: dict[str, Any],
    config: RunnableConfig | None,
    response: CachedResponse,
    from_text: Callable[[str], BaseMessage] | None = None,
) -> None:
    """Report a call answered from the cache through its callbacks (see the module docstring):
    ``runnable``, ``messages``, ``kwargs`` and ``config`` are what the live call would have been
    invoked with, ``response`` the stored answer."""
    try:
        model, config, kwargs = _unbound(runnable, config, dict(kwargs))
        if not _handlers(model, config):
            return  # nobody listens (no tracer given, none switched on): nothing to report
        replay = ReplayChatModel(
            original=model,
            message=replay_message(response.text, response, from_text),
            cache=False,
            **(
                {"callbacks": model.callbacks, "tags": model.tags, "metadata": model.metadata, "verbose": model.verbose}
                if isinstance(model, BaseChatModel)
                else {}
            ),
        )
        await replay.ainvoke(
            messages,
            config=replay_config(
                config,
                latency=response.latency,
                input_tokens=response.input_tokens,
                output_tokens=response.output_tokens,
                usage_error=response.usage_error,
                created=response.created,
            ),
            **kwargs,
        )
    except Exception as exc:  # noqa: BLE001 - a trace is never worth a run
        logger.warning("could not trace a call replayed from the cache: %r", exc)


__all__ = ["ReplayChatModel", "replay_message", "trace_replay"]
