"""Mixed societies: agents of one run using different models in chosen proportions, and model
switches (an agent that uses another model from a round on: an invader of another model).

A mix is ``{model spec: count}`` (``cooplab.run(..., model_mix={"openai:a": 2, "local": 2})``,
``cooplab run ... --model-mix openai:a=2 --model-mix local=2``); the counts add up to the
population. Which agent gets which model is a seeded draw (:func:`assign`): the list of specs,
each repeated by its count in the mix's order, permuted by the run's seed. The draw is written to
``llm.agent_models`` in config.json beside ``llm.model_mix``, so a resumed run, a replay and the
analysis read the assignment, never redraw it.

A switch is ``{"AGENT@ROUND": spec}`` (``llm.model_from``): from round ROUND on, agent AGENT's
calls go to ``spec`` (:meth:`cooplab.agents.decisions.LLMService.model_for`). Identifiers are
text: agent numbers are keys, never positions in a list.
"""

from __future__ import annotations

from typing import Any

from cooplab.limits import RULES, ConfigError, show

_MIX_COUNT_HI = RULES["mix-count"].hi
assert _MIX_COUNT_HI is not None, "the caps table bounds a mix's count"
MAX_COUNT = int(_MIX_COUNT_HI)  # the caps table's bound


def parse_mix(items: Any) -> dict[str, int]:
    """``--model-mix SPEC=COUNT`` items -> {spec: count} (a spec may itself hold ``=``: the count
    is what follows the last one). One line on a malformed item, a repeated spec or a count that
    is not a non-negative integer."""
    out: dict[str, int] = {}
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise ConfigError(f"--model-mix expects SPEC=COUNT (e.g. --model-mix local=2), got {show(item)}")
        spec, _, count = item.rpartition("=")
        spec, count = spec.strip(), count.strip()
        if not spec:
            raise ConfigError(f"--model-mix {item!r} names no model; use SPEC=COUNT")
        if not count.isdigit() or not count.isascii():
            raise ConfigError(
                f"--model-mix {spec}={count}: the count must be a whole number of agents 0..{MAX_COUNT}, got {count!r}"
            )
        if spec in out:
            raise ConfigError(f"--model-mix names {spec!r} twice; give each model once with its count")
        out[spec] = int(count)
    return out


def check_counts(mix: Any, where: str) -> dict[str, int]:
    """``mix`` as {spec: count}: an object of text keys and non-negative integer counts (not booleans)."""
    if not isinstance(mix, dict) or not mix:
        raise ConfigError(
            f"{where} must map model specs to agent counts, e.g. {{'local': 2, 'openai:gpt-4o-mini': 2}}, got "
            f"{show(mix)}"
        )
    for spec, count in mix.items():
        if not isinstance(spec, str) or not spec.strip():
            raise ConfigError(f"{where}: a model spec must be non-empty text, got {show(spec)}")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
            raise ConfigError(
                f"{where}[{spec!r}]: the count must be a whole number of agents 0..{MAX_COUNT}, got {show(count)}"
            )
    if not any(mix.values()):
        raise ConfigError(f"{where}: every count is 0; give at least one model a positive count")
    return {str(k): int(v) for k, v in mix.items()}


def check_mix(mix: dict[str, int] | None, agent_models: dict[int, str], n_agents: int, where: str) -> None:
    """A mix's counts add up to the population; with an assignment already drawn (a stored run)
    the assignment holds every agent and matches the counts."""
    if mix is None:
        return
    mix = check_counts(mix, where)
    total = sum(mix.values())
    if total != n_agents:
        shown = " + ".join(str(v) for v in mix.values())
        raise ConfigError(
            f"{where}: the counts add up to {total} ({shown}) but the society has {n_agents} agents; "
            f"make them add up to {n_agents}"
        )
    if agent_models:
        drawn = counts_of(agent_models)
        if set(map(int, agent_models)) != set(range(n_agents)) or drawn != {k: v for k, v in mix.items() if v}:
            raise ConfigError(
                f"{where}: the per-agent models (agent_models) do not match the mix {mix}; "
                "give a mix or per-agent models, not both"
            )


def counts_of(agent_models: dict[Any, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for spec in agent_models.values():
        out[spec] = out.get(spec, 0) + 1
    return out


def assign(mix: dict[str, int], n_agents: int, seed: int) -> dict[int, str]:
    """The seeded assignment of a mix: agent number -> spec. The same seed and mix give the same
    assignment; the draw has its own stream (``phase_rng(seed, 0, "model_mix")``) so no phase's
    numbers move."""
    from cooplab.graphs.rng import phase_rng

    specs = [spec for spec, count in mix.items() for _ in range(count)]
    if len(specs) != n_agents:
        raise ConfigError(f"model_mix: the counts add up to {len(specs)} but the society has {n_agents} agents")
    order = phase_rng(seed, 0, "model_mix").permutation(n_agents)
    return {a: specs[int(order[a])] for a in range(n_agents)}


def resolve(llm: Any, n_agents: int, seed: int, where: str = "model_mix") -> Any:
    """``llm`` (LLMSettings) with its mix drawn into ``agent_models`` and ``model`` the mix's first
    model (every agent has its own, so ``model`` only names the run): what config.json records.
    Without a mix, ``llm`` unchanged."""
    if llm.model_mix is None:
        return llm
    mix = check_counts(llm.model_mix, where)
    check_mix(mix, {}, n_agents, where)
    if llm.agent_models:  # drawn already (a stored configuration run again): it must be the mix's
        check_mix(mix, llm.agent_models, n_agents, where)
        return llm
    if llm.model != "local" and llm.model not in mix:
        raise ConfigError(f"{where} gives every agent its model; leave out --model (got {llm.model!r}, not in the mix)")
    first = next(spec for spec, count in mix.items() if count)
    return llm.model_copy(update={"model_mix": mix, "agent_models": assign(mix, n_agents, seed), "model": first})


def parse_switch(key: Any, where: str) -> tuple[int, int]:
    """``"AGENT@ROUND"`` -> (agent, round), or one line."""
    text = str(key)
    agent, sep, round_ = text.partition("@")
    if not sep or not agent.isdigit() or not round_.isdigit() or not agent.isascii() or not round_.isascii():
        raise ConfigError(f"{where}: a switch is 'AGENT@ROUND' (e.g. '3@5'), got {show(text)}")
    return int(agent), int(round_)


def check_model_from(model_from: dict[str, str], n_agents: int, where: str) -> None:
    for key, spec in model_from.items():
        agent, round_ = parse_switch(key, where)
        if not 0 <= agent < n_agents:
            raise ConfigError(f"{where}[{key!r}]: agent must be in 0..{n_agents - 1}, got {agent}")
        if round_ < 1:
            raise ConfigError(f"{where}[{key!r}]: the round must be 1 or later, got {round_}")
        if not isinstance(spec, str) or not spec.strip():
            raise ConfigError(f"{where}[{key!r}] must be a model spec, got {show(spec)}")


def switches(model_from: dict[str, str]) -> dict[str, list[tuple[int, str]]]:
    """{agent (text): [(round, who), ...] latest round first}: who is the key of the model in the service."""
    out: dict[str, list[tuple[int, str]]] = {}
    for key in model_from:
        agent, round_ = parse_switch(key, "model_from")
        out.setdefault(str(agent), []).append((round_, str(key)))
    return {a: sorted(v, reverse=True) for a, v in out.items()}


def model_of(llm: dict[str, Any], agent: int | str, round_: int | None = None) -> str:
    """The spec agent ``agent`` used (in ``round_``, switches counted) by a run's stored llm block."""
    per = {str(k): v for k, v in (llm.get("agent_models") or {}).items()}
    spec = per.get(str(agent)) or llm.get("model")
    if round_ is not None:
        for r, who in switches(llm.get("model_from") or {}).get(str(agent), []):
            if round_ >= r:
                return llm["model_from"][who]
    return str(spec)
