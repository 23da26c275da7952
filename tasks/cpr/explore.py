"""The CPR run's page in the explorer (the task's ``explore`` hook): one society of the run's batch
(``?society=KEY``), the lake over rounds, every fisher's actions by round, who fined whom, norms and
beliefs; one round (``?round=R``: who did what, and what each fisher was asked and answered) or one
fisher across rounds (``?agent=ID``, 0-based ids: agent 1 is "Fisher 2"). And its key numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from cooplab.evals.explorer import history
from cooplab.evals.explorer.views.common import (
    Spec,
    agents_by_round,
    conversation,
    fines,
    parsed,
    per_agent_plot,
    pick_society,
    query_int,
    society_picker,
    whole,
)
from cooplab.evals.explorer.views.societies import known, mean_sem, page, rows_of
from cooplab.evals.values import cut, num
from cooplab.graphs import explore as ex

CPR = Spec(noun="Fisher", society=("society",), round="round", agent="agent")


def cpr_history(run: Any) -> tuple[pd.DataFrame | None, pd.DataFrame | None, str | None]:
    """(every fisher in every round, every fisher's belief after every round, a note) from the checkpoints."""
    rows, beliefs = [], []
    if run.file(history.CHECKPOINTS) is None:  # a link leaving the run folder: never opened
        return None, None, f"{history.CHECKPOINTS} leads outside the run folder and is not read"
    try:
        for updated, v in history.updates(run.out):
            alive = v.get("alive")
            if alive is None or "round" not in v:
                continue
            t = int(v["round"]) - 1
            if "beliefs" in updated or (not beliefs and isinstance(v.get("beliefs"), list)):
                when = t if "beliefs" in updated else 0
                for s, row in enumerate(v.get("beliefs") or []):
                    for i, b in enumerate(row):
                        beliefs.append({"society": s, "round": when, "agent": i, "belief": b})
            if "round" in updated and "history" in updated and t >= 1:  # the environment ended round t
                types = v.get("agent_types") or []
                # a rule run's arrays hold its running societies (their batch indices in ``rows``); those
                # that finished this round left them, their agents' arrays are in ``ended``
                blocks = [(v, v.get("rows"))]
                if "ended" in updated and v.get("ended"):
                    blocks.append((v["ended"], v["ended"]["rows"]))
                for arrays, ids in blocks:
                    ended_before = arrays.get("T_s")  # a society that had finished before round t: not in it
                    for r in range(arrays["alive"].shape[0]):
                        if ended_before is not None and 0 < int(ended_before[r]) < t:
                            continue
                        s = int(ids[r]) if ids is not None else r
                        for i in range(arrays["alive"].shape[1]):
                            rows.append(
                                {
                                    "society": s,
                                    "round": t,
                                    "agent": i,
                                    "type": types[s][i] if s < len(types) and i < len(types[s]) else None,
                                    "effort": float(arrays["effort"][r, i]),
                                    "harvest": float(arrays["h"][r, i]),
                                    "payoff": float(arrays["payoff"][r, i]),
                                    "wealth": float(arrays["P"][r, i]),
                                    "fined": int(arrays["V"][r, i]),
                                    "fined someone": int(arrays["B"][r, i]),
                                    "norm cap g": float(arrays["g"][r, i]),
                                    "alive": bool(arrays["alive"][r, i]),
                                }
                            )
    except history.HistoryError as exc:
        return None, None, str(exc)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        return (
            (pd.DataFrame(rows) if rows else None),
            None,
            f"the checkpoints hold an unexpected state ({cut(str(exc), 200)})",
        )
    return (pd.DataFrame(rows) if rows else None), (pd.DataFrame(beliefs) if beliefs else None), None


def cpr_rounds(run: Any) -> pd.DataFrame | None:
    """The rounds table with a ``society`` column (the batch index: societies in condition, replicate order)."""
    df = run.table("rounds")
    if df is None or not {"condition", "replicate", "round"} <= set(df.columns):
        return None
    keys = [(whole(c), whole(r)) for c, r in zip(df["condition"], df["replicate"], strict=False)]
    ok = [None not in k for k in keys]
    if not all(ok):
        run.notes.append(
            f"{len(ok) - sum(ok)} rows of the rounds table have no whole condition or replicate and are left out"
        )
    index = {p: s for s, p in enumerate(sorted({k for k, good in zip(keys, ok, strict=False) if good}))}
    df = df[ok].copy()
    df["society"] = [index[k] for k, good in zip(keys, ok, strict=False) if good]
    return df


def cpr_decisions(run: Any, phase: str) -> list[dict[str, Any]]:
    d = run.table("decisions")
    if d is None or not {"phase", "society", "agent", "round"} <= set(d.columns):
        return []
    out, bad = [], 0
    for _, r in d[d["phase"] == phase].iterrows():
        ids = {k: whole(r[k]) for k in ("society", "agent", "round")}
        if None in ids.values():
            bad += 1
            continue
        out.append({**parsed(r.get("parsed")), **ids})
    if bad:
        run.notes.append(f"{bad} {phase} decisions without a whole society, agent or round are left out")
    return out


def cpr_fines(run: Any, society: int) -> list[dict[str, Any]]:
    """Who fined whom (LLM runs: each fisher's punish decision names a fisher number)."""
    out = []
    for d in cpr_decisions(run, "punish"):
        k = d.get("punish")
        if d["society"] == society and isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 1_000_000:
            out.append({"round": d["round"], "punisher": d["agent"], "target": k - 1})
    return sorted(out, key=lambda p: (p["round"], p["punisher"]))


def view(run: Any, query: Mapping[str, str]) -> list[ex.Section]:
    llm = run.config.get("agents") == "llm"
    rounds = cpr_rounds(run)
    agents, beliefs, hist_note = cpr_history(run)
    keys = sorted(
        {
            str(s)
            for s in (rounds["society"] if rounds is not None else agents["society"] if agents is not None else [])
        },
        key=lambda k: int(k),
    )
    chosen = pick_society(keys, query)
    s = int(chosen) if chosen is not None else 0
    keep = {"society": chosen} if len(keys) > 1 else {}
    my = rows_of(agents, "society", s)
    my_beliefs = rows_of(beliefs, "society", s)
    pairs = cpr_fines(run, s) if llm else []

    lake: list[ex.Block] = society_picker(keys, chosen, "society")
    mine = rows_of(rounds, "society", s)
    if mine is not None and len(mine):
        lake.append(
            ex.Plot(
                mine["round"].tolist(),
                {
                    "stock at the start": mine["R"].tolist(),
                    "stock after the harvest": mine["R_plus"].tolist(),
                    "catch": mine["H"].tolist(),
                },
                title="the lake",
                xlabel="round",
                ylabel="tonnes",
                key="lake",
                caption="fish in the lake at the start of each round and after the harvest, and the round's total "
                "catch",
            )
        )
        cols = [
            c
            for c in ("round", "R", "H", "n_alive", "mean_effort", "n_punished", "compliance", "G")
            if c in mine.columns
        ]
        lake.append(
            ex.Table(
                mine[cols].rename(columns={"R": "stock", "H": "catch", "G": "group cap"}),
                title="round by round",
                links={"round": "round"},
                keep=keep,
            )
        )
    else:
        lake.append(ex.Note("no rounds table: the run wrote no per-round results"))

    agent_blocks: list[ex.Block] = []
    if hist_note:
        agent_blocks.append(ex.Note(hist_note))
    if my is not None and len(my):
        agent_blocks += agents_by_round(
            my,
            CPR,
            ["type", "effort", "harvest", "payoff", "wealth", "fined", "fined someone", "alive"],
            title="every fisher, every round",
            key_prefix="cpr",
            plots=["harvest", "wealth"],
            keep=keep,
        )

    punish: list[ex.Block]
    if llm:
        punish = fines(pairs, CPR, keep=keep)
    elif my is not None and len(my):
        punish = [
            ex.Note("rule-based fishers record who was fined, not by whom", level="info"),
            ex.Table(
                [{"round": r["round"], "fined": CPR.name(r["agent"])} for _, r in my[my["fined"] > 0].iterrows()],
                title="fined, round by round",
                links={"round": "round"},
                keep=keep,
            ),
        ]
    else:
        punish = [ex.Note("no per-fisher record of fines")]

    body = [
        ex.Section("The lake", lake, id="lake"),
        ex.Section("Fishers by round", agent_blocks, id="agents"),
        ex.Section("Punishments: who fined whom", punish, id="fines"),
        cpr_norms(run, s, keep),
        cpr_beliefs(my, my_beliefs, llm),
    ]
    focus = [cpr_round(run, query, s, my, pairs, rounds, keep), cpr_agent(run, query, s, my, pairs, my_beliefs, keep)]
    return page(run, key_numbers(run.summary), focus, body)


def cpr_norms(run: Any, s: int, keep: dict[str, Any]) -> ex.Section | None:
    blocks: list[ex.Block] = []
    props = [d for d in cpr_decisions(run, "propose") if d["society"] == s]
    if props:
        blocks.append(
            ex.Table(
                [
                    {
                        "round": d["round"],
                        "fisher": CPR.name(d["agent"]),
                        "proposed norm": d.get("proposal"),
                        "_id": d["agent"],
                    }
                    for d in props
                ],
                title="norms proposed",
                links={"fisher": ("agent", "_id"), "round": "round"},
                keep=keep,
            )
        )
    votes = [d for d in cpr_decisions(run, "vote") if d["society"] == s]
    if votes:
        blocks.append(
            ex.Table(
                [
                    {
                        "round": d["round"],
                        "fisher": CPR.name(d["agent"]),
                        "voted for option": d.get("vote"),
                        "_id": d["agent"],
                    }
                    for d in votes
                ],
                title="votes",
                links={"fisher": ("agent", "_id"), "round": "round"},
                keep=keep,
            )
        )
    adopted = rows_of(run.table("norms_adopted"), "society", s)
    if adopted is not None and len(adopted):
        cols = [c for c in ("round", "norm", "options", "votes", "tie") if c in adopted.columns]
        shown = adopted[cols].rename(columns={"norm": "adopted norm"})
        if "votes" in shown.columns:
            shown = shown.assign(votes=[votes_text(v) for v in shown["votes"]])
        blocks.append(ex.Table(shown, title="norms adopted", links={"round": "round"}, keep=keep))
    if not blocks:
        return None
    return ex.Section("Norms: proposed, voted, adopted", blocks, id="norms")


def votes_text(v: Any) -> Any:
    """A vote count as people read it: "option 1: 3, option 2: 2" from ``[[1, 3], [2, 2]]`` (JSON
    text or a list of (option, count) pairs); an empty list is a norm adopted without a vote (the
    fishers all proposed the same text); anything else as it is."""
    pairs = parsed_list(v)
    if pairs is None:
        return v
    if not pairs:
        return "no vote (a single proposal)"
    out = []
    for p in pairs[:50]:
        if not (
            isinstance(p, (list, tuple))
            and len(p) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in p)
        ):
            return v
        out.append(
            f"option {whole(p[0]) if whole(p[0]) is not None else p[0]}: "
            f"{whole(p[1]) if whole(p[1]) is not None else p[1]}"
        )
    return ", ".join(out)


def parsed_list(v: Any) -> list[Any] | None:
    """A list from a list, an array or JSON text of one; None otherwise."""
    import json

    if hasattr(v, "tolist") and not isinstance(v, str):
        v = v.tolist()
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except (ValueError, RecursionError):
            return None
    return [x.tolist() if hasattr(x, "tolist") else x for x in v] if isinstance(v, (list, tuple)) else None


def cpr_beliefs(my: Any, beliefs: Any, llm: bool) -> ex.Section | None:
    blocks: list[ex.Block] = []
    if beliefs is not None and len(beliefs):
        wide = beliefs.pivot_table(index="agent", columns="round", values="belief", aggfunc="last")
        rows = []
        for a, r in wide.iterrows():
            rows.append(
                {
                    "fisher": CPR.name(a),
                    "_id": int(a),
                    **{("at the start" if c == 0 else f"after round {c}"): r[c] for c in wide.columns},
                }
            )
        blocks.append(
            ex.Table(
                rows,
                title="each fisher's personal norm in words, as it changed",
                links={"fisher": ("agent", "_id")},
                filterable=True,
            )
        )
    if not llm and my is not None and len(my) and "norm cap g" in my.columns and my["norm cap g"].notna().any():
        blocks.append(per_agent_plot(my, CPR, "norm cap g", "personal harvest cap g", key="cpr-g"))
    return ex.Section("Beliefs over time", blocks, id="beliefs") if blocks else None


def cpr_round(
    run: Any, query: Mapping[str, str], s: int, my: Any, pairs: list[dict[str, Any]], rounds: Any, keep: dict[str, Any]
) -> ex.Section | None:
    r = query_int(query, "round")
    if r is None:
        return None
    blocks: list[ex.Block] = []
    row = rows_of(rows_of(rounds, "society", s), "round", r)
    if row is not None and len(row):
        x = row.iloc[0]
        blocks.append(
            ex.KeyValues(
                {
                    "stock at the start": x.get("R"),
                    "catch": x.get("H"),
                    "fishers alive": x.get("n_alive"),
                    "fined": x.get("n_punished"),
                }
            )
        )
    rr = rows_of(my, "round", r)
    if rr is not None and len(rr):
        blocks += agents_by_round(
            rr,
            CPR,
            ["effort", "harvest", "payoff", "wealth", "fined"],
            title=f"the fishers in round {r}",
            key_prefix="cpr-round",
            plots=[],
            keep=keep,
        )
    if run.config.get("agents") == "llm":
        blocks += fines([p for p in pairs if p["round"] == r], CPR, keep=keep)[:1]
        adopted = rows_of(rows_of(run.table("norms_adopted"), "society", s), "round", r)
        if adopted is not None and len(adopted):
            blocks.append(ex.KeyValues({"norm adopted after the vote": adopted.iloc[0].get("norm")}))
        blocks.append(ex.Link(f"every model call of round {r} on the traces page", {"round": r}, trace=True))
    n = my["agent"].nunique() if my is not None and len(my) else 0
    for a in range(n) if n else []:
        talk = conversation(run, {"round": r, "agent": a, "society": s}, CPR)
        blocks.append(ex.Details(f"what {CPR.name(a)} was asked and answered in round {r}", talk))
    if not n:
        blocks += conversation(run, {"round": r, "society": s}, CPR)
    return ex.Section(f"Round {r}", blocks, id="round")


def cpr_agent(
    run: Any, query: Mapping[str, str], s: int, my: Any, pairs: list[dict[str, Any]], beliefs: Any, keep: dict[str, Any]
) -> ex.Section | None:
    a = query_int(query, "agent")
    if a is None:
        return None
    name = CPR.name(a)
    blocks: list[ex.Block] = []
    rows = rows_of(my, "agent", a)
    if rows is None or not len(rows):
        blocks.append(ex.Note(f"no rounds of {name} in this society"))
    else:
        blocks += agents_by_round(
            rows,
            CPR,
            ["type", "effort", "harvest", "payoff", "wealth", "fined", "fined someone", "alive"],
            title=f"{name}, round by round",
            key_prefix="cpr-agent",
            plots=[],
            keep=keep,
        )
        for col in ("harvest", "wealth"):
            blocks.append(
                ex.Plot(
                    rows["round"].tolist(),
                    {
                        name: rows[col].tolist(),
                        "society mean": my.groupby("round")[col].mean().reindex(rows["round"]).tolist(),
                    },
                    title=f"{name}'s {col}",
                    xlabel="round",
                    ylabel=col,
                )
            )
    mine = [p for p in pairs if a in (p["punisher"], p["target"])]
    if mine:
        blocks.append(
            ex.Table(
                [{"round": p["round"], "who": CPR.name(p["punisher"]), "fined": CPR.name(p["target"])} for p in mine],
                title=f"fines given and received by {name}",
                links={"round": "round"},
                keep=keep,
            )
        )
    props = [d for d in cpr_decisions(run, "propose") if d["society"] == s and d["agent"] == a]
    if props:
        blocks.append(
            ex.Table(
                [{"round": d["round"], "belief": d.get("belief"), "proposed norm": d.get("proposal")} for d in props],
                title=f"{name}'s beliefs and proposals",
                links={"round": "round"},
                keep=keep,
            )
        )
    blocks.append(
        ex.Details(f"everything {name} was asked and answered", conversation(run, {"agent": a, "society": s}, CPR))
    )
    return ex.Section(f"{name} across rounds", blocks, id="agent")


def key_numbers(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Survival time and efficiency (mean ± s.e.m.), rounds, societies and how many survived, the cost."""
    surv = summary.get("survival_time")
    out = known(
        {
            "survival time": mean_sem(summary, "survival_time"),
            "efficiency": mean_sem(summary, "efficiency"),
            "rounds": summary.get("rounds_completed"),
            "societies": surv.get("n") if isinstance(surv, Mapping) else None,
        },
        summary,
    )
    coll = summary.get("collapse")
    if isinstance(coll, Mapping):
        n = sum(int(v) for v in coll.values() if isinstance(v, int) and not isinstance(v, bool))
        cap = coll.get("none (round cap)")
        if n and isinstance(cap, int):
            out["survived"] = f"{cap}/{n}"
    if isinstance(surv, Mapping) and "survival time" not in out and num(surv.get("mean")) is not None:
        out["survival time"] = surv.get("mean")
    return out
