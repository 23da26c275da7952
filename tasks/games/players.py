"""Reference players, vectorized over simulations: Nash, Pareto, uniform random and scripted.

A decision phase's policy slot takes either a *reference policy* ``(state, rng) -> array`` (these)
or an LLM policy (an async ``(state, rng, context, config) -> PolicyResult``, see
:mod:`cooplab.graphs.nodes`); the node is the same for both (:mod:`cooplab.tasks.games.society`).

- ``nash`` and ``pareto`` play the profiles of :func:`cooplab.tasks.games.equilibria.profile` in
  every simulation (no sanctions);
- ``random`` draws every action uniformly from its range (Public Goods: uniformly among the
  allocations (k, g, n) adding up to the endowment; sanctions: a total uniform in
  0..max_sanction spread uniformly over the other members of one's group);
- ``scripted`` plays the actions of a JSON file, round by round, the same in every simulation::

      {"game": "cpr-sanction",                        (optional; checked when given)
       "rounds": [{"actions": [0, 0, 0, 0, 10, 0, 0, 0, 0, 0], "sanctions": [[0, 4, 3]]},
                  {"actions": 2}]}

  ``rounds`` holds one entry per round, or a single entry played in every round. ``actions`` is
  one value per player (players numbered group by group) or one value for all; a Public Goods
  value is ``[keep, group, global]`` adding up to the endowment. ``sanctions`` (CPR with
  sanctioning only) lists ``[sanctioner, target, tokens]``; the target must be another member of
  the sanctioner's own group.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cooplab.tasks.games import equilibria as eq

State = Mapping[str, Any]
Policy = Callable[[State, np.random.Generator], np.ndarray]
KINDS = ("nash", "pareto", "random", "scripted")
MAX_SCRIPT_BYTES = 50_000_000


class ScriptError(ValueError):
    """A scripted players' file (or its copy in config.json) is wrong: one line naming the place."""


ACTION_FIELD = {
    "weakest-link": "max_effort",
    "cpr": "max_extract",
    "cpr-sanction": "max_extract",
    "collective-risk": "endowment",
    "o-ring": "max_withdraw",
    "public-goods": "endowment",
}


def action_range(P: Any) -> int:
    """The largest action of the game's decision (actions are 0..this)."""
    return int(getattr(P, ACTION_FIELD[P.GAME]))


def allocations(endowment: int) -> np.ndarray:
    """(M, 3) every allocation (keep, group, global) of ``endowment`` tokens, M = (E+1)(E+2)/2."""
    E = int(endowment)
    k, g = np.meshgrid(np.arange(E + 1), np.arange(E + 1), indexing="ij")
    ok = k + g <= E
    k, g = k[ok], g[ok]
    return np.stack([k, g, E - k - g], axis=1).astype(np.int64)


# --- decision policies -----------------------------------------------------------------------------
def profile_policy(actions: np.ndarray) -> Policy:
    """Play ``actions[round - 1]`` ((R, N) or (R, N, 3)) in every simulation."""
    actions = np.asarray(actions, dtype=np.int64)

    def policy(state: State, rng: np.random.Generator) -> np.ndarray:
        S = state["simulations"]
        row = actions[min(int(state["round"]), len(actions)) - 1]
        return np.broadcast_to(row, (S, *row.shape))

    return policy


def random_policy(P: Any) -> Policy:
    """Uniform actions (Public Goods: uniform over the allocations adding up to the endowment)."""
    N = P.n_players
    if P.GAME == "public-goods":
        table = allocations(P.endowment)

        def policy(state: State, rng: np.random.Generator) -> np.ndarray:
            return table[rng.integers(len(table), size=(state["simulations"], N))]

        return policy
    hi = action_range(P)

    def policy(state: State, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, hi + 1, size=(state["simulations"], N))

    return policy


def no_sanctions(state: State, rng: np.random.Generator) -> np.ndarray:
    """Nash and Pareto players never sanction."""
    N = len(state["group"])
    return np.broadcast_to(np.zeros((1, 1, 1), dtype=np.int8), (state["simulations"], N, N))


def random_sanctions(P: Any) -> Policy:
    """Each player spends a total uniform in 0..max_sanction, spread uniformly (multinomially) over
    the other members of its group."""
    from cooplab.tasks.games.model import same_group

    dt = np.int8 if P.max_sanction <= 127 else np.int16 if P.max_sanction <= 32_767 else np.int32

    def policy(state: State, rng: np.random.Generator) -> np.ndarray:
        S, group = state["simulations"], state["group"]
        N = len(group)
        allowed = same_group(group)
        total = rng.integers(0, P.max_sanction + 1, size=(S, N))
        out = np.zeros((S, N, N), dtype=dt)
        for i in range(N):  # players in a loop, simulations vectorized
            idx = np.nonzero(allowed[i])[0]
            if len(idx):
                out[:, i, idx] = rng.multinomial(total[:, i], np.full(len(idx), 1.0 / len(idx)))
        return out

    return policy


def script_sanctions(script: Mapping[str, Any], N: int) -> Policy:
    """The sanctions of a script, round by round, in every simulation."""
    mats = []
    for entry in script["rounds"]:
        m = np.zeros((N, N), dtype=np.int64)
        for i, j, t in entry.get("sanctions") or []:
            m[i, j] += t
        mats.append(m)

    def policy(state: State, rng: np.random.Generator) -> np.ndarray:
        m = mats[min(int(state["round"]), len(mats)) - 1]
        return np.broadcast_to(m, (state["simulations"], N, N))

    return policy


def policies(kind: str, P: Any, script: Mapping[str, Any] | None = None) -> dict[str, Policy]:
    """The reference policies of ``kind`` for the game's decision phases: {"decide": ...} plus
    {"sanction": ...} for CPR with sanctioning."""
    sanctioning = P.GAME == "cpr-sanction"
    if kind in ("nash", "pareto"):
        out: dict[str, Policy] = {"decide": profile_policy(eq.profile(kind, P))}
        if sanctioning:
            out["sanction"] = no_sanctions
    elif kind == "random":
        out = {"decide": random_policy(P)}
        if sanctioning:
            out["sanction"] = random_sanctions(P)
    elif kind == "scripted":
        if script is None:
            raise ScriptError("scripted players need a script")
        out = {"decide": profile_policy(script_actions(script, P))}
        if sanctioning:
            out["sanction"] = script_sanctions(script, P.n_players)
    else:
        raise ValueError(f"players must be one of {', '.join(KINDS)}, got {kind!r}")
    return out


# --- scripts -----------------------------------------------------------------------------------------
def _int(where: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ScriptError(f"{where} must be an integer in {lo}..{hi}, got {json.dumps(v)[:60]}")
    return v


def _action(where: str, v: Any, P: Any) -> Any:
    if P.GAME == "public-goods":
        E = P.endowment
        if not isinstance(v, list) or len(v) != 3:
            raise ScriptError(f"{where} must be [keep, group, global] adding up to {E}, got {json.dumps(v)[:60]}")
        parts = [_int(f"{where}[{k}]", x, 0, E) for k, x in enumerate(v)]
        if sum(parts) != E:
            raise ScriptError(f"{where} must add up to the endowment {E}, got {parts} (sum {sum(parts)})")
        return parts
    return _int(where, v, 0, action_range(P))


def check_script(data: Any, P: Any, where: str = "script") -> dict[str, Any]:
    """Validate a script against the game and its groups; the normalized script: one entry per
    round, ``actions`` one value per player, ``sanctions`` a list of [i, j, tokens]."""
    from cooplab.tasks.games.model import same_group

    if not isinstance(data, dict) or not isinstance(data.get("rounds"), list):
        raise ScriptError(
            f"{where} must be a JSON object with a list 'rounds' (one entry per round, or one for all rounds)"
        )
    extra = set(data) - {"game", "rounds"}
    if extra:
        raise ScriptError(f"{where} has unknown keys {sorted(extra)}; use 'game' and 'rounds'")
    if "game" in data and data["game"] != P.GAME:
        raise ScriptError(f"{where} is for the game {data['game']!r}, not {P.GAME!r}")
    rounds = data["rounds"]
    R, N = P.rounds, P.n_players
    if len(rounds) not in (1, R):
        raise ScriptError(
            f"{where}: rounds must have 1 entry (played every round) or {R} (one per round), got {len(rounds)}"
        )
    allowed = same_group(eq.groups_of(P))
    out = []
    for r, entry in enumerate(rounds):
        at = f"{where}: rounds[{r}]"
        if not isinstance(entry, dict) or "actions" not in entry:
            raise ScriptError(f"{at} must be an object with 'actions'")
        keys = set(entry) - {"actions", "sanctions"}
        if keys or ("sanctions" in entry and P.GAME != "cpr-sanction"):
            raise ScriptError(f"{at} has keys the game {P.GAME!r} does not use: {sorted(keys or {'sanctions'})}")
        acts = entry["actions"]
        per_player = isinstance(acts, list) and (P.GAME != "public-goods" or all(isinstance(a, list) for a in acts))
        if per_player:
            if len(acts) != N:
                raise ScriptError(
                    f"{at}.actions must have one value per player ({N}: groups {P.group_sizes}), got {len(acts)}"
                )
            acts = [_action(f"{at}.actions[{i}]", v, P) for i, v in enumerate(acts)]
        else:
            acts = [_action(f"{at}.actions", acts, P)] * N
        sanctions = []
        spent = [0] * N
        for k, s in enumerate(entry.get("sanctions") or []):
            sat = f"{at}.sanctions[{k}]"
            if not isinstance(s, list) or len(s) != 3:
                raise ScriptError(f"{sat} must be [sanctioner, target, tokens]")
            i, j = _int(f"{sat}[0]", s[0], 0, N - 1), _int(f"{sat}[1]", s[1], 0, N - 1)
            t = _int(f"{sat}[2]", s[2], 0, P.max_sanction)
            if not allowed[i, j]:
                raise ScriptError(
                    f"{sat}: player {i} cannot sanction player {j}: sanctions are only possible within one's own group "
                    f"(and not on oneself)"
                )
            spent[i] += t
            if spent[i] > P.max_sanction:
                raise ScriptError(
                    f"{sat}: player {i} spends {spent[i]} sanction tokens in this round, more than max_sanction "
                    f"({P.max_sanction})"
                )
            sanctions.append([i, j, t])
        e: dict[str, Any] = {"actions": acts}
        if P.GAME == "cpr-sanction":
            e["sanctions"] = sanctions
        out.append(e)
    if len(out) == 1 and R > 1:
        out = out * R
    return {"game": P.GAME, "rounds": out}


def load_script(path: str | Path, P: Any) -> dict[str, Any]:
    """Read and validate a scripted players' file (ScriptError naming the file on any problem)."""
    p = Path(path).expanduser()
    try:
        if p.stat().st_size > MAX_SCRIPT_BYTES:
            raise ScriptError(f"{p} is larger than {MAX_SCRIPT_BYTES:,} bytes")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScriptError(f"scripted players' file {p} not found") from None
    except IsADirectoryError:
        raise ScriptError(f"scripted players' file {p} is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptError(f"cannot read {p}: {type(exc).__name__}") from None
    from cooplab.limits import parse_json

    return check_script(parse_json(text, str(p), error=ScriptError), P, where=str(p))


def script_actions(script: Mapping[str, Any], P: Any) -> np.ndarray:
    """(R, N) (Public Goods: (R, N, 3)) actions of a normalized script."""
    return np.array([e["actions"] for e in script["rounds"]], dtype=np.int64)
