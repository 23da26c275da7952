"""The columns every run table shares: the agent key and the money.

**The agent key is ``agent_id``, text, in every table** that has a row per agent (or per call or
decision of an agent): the decisions, the ledger, the science teams' tool loops, and each task's
per-agent tables (CPR ``agents`` and ``beliefs_final``, the Diner's Dilemma's ``orders``,
``utilities`` and ``imitation``, the games' ``players`` and ``messages``). In a society it is
``"SOCIETY:AGENT"`` (``"0:2"``: the third agent of the first society; both count from 0, the
society being the run's own index, the same as the decisions' ``society`` column); a science team
member is its role (``"data.lead"``). It is the id the ledger charges and the traces name, so
``decisions.merge(ledger, on=["agent_id", "round", "phase"])`` lines them up. Where a table
also has the positions as numbers (``society``, ``agent``, a game's ``simulation`` and
``player``), they are there for plotting and arithmetic; the key is the text.

**Money is two columns**: ``cost_usd`` (a float, so ``.sum()`` adds and plots draw) and
``cost_usd_exact`` (the same amount as exact decimal text, as the ledger keeps it: sum it with
``decimal.Decimal`` to the cent). A table written before these columns existed (a ``cost`` text
column, the ledger's agent under ``agent``) is read back in this shape (:func:`upgrade`).
"""

from __future__ import annotations

from typing import Any, cast

import pandas as pd

AGENT_ID = "agent_id"  #: the agent key of every table (text)
COST = "cost_usd"  #: a row's cost in USD, float
EXACT_COST = "cost_usd_exact"  #: the same as exact decimal text

#: the tables whose money the runner and the tasks write in both columns, and whose agent is a text id
MONEY_TABLES = ("decisions", "ledger", "tool_loops")


def agent_id(society: Any, agent: Any) -> str:
    """The key of agent ``agent`` of society ``society`` (``"0:2"``)."""
    return f"{int(society)}:{int(agent)}"


def ids(societies: Any, agents: Any) -> list[str]:
    """The keys of whole-number society and agent positions, element by element (arrays of equal length)."""
    return [agent_id(s, a) for s, a in zip(societies, agents, strict=False)]


def _insert_after(df: pd.DataFrame, after: str | None, name: str, values: Any) -> pd.DataFrame:
    df = df.drop(columns=[name]) if name in df.columns else df.copy()
    at = list(df.columns).index(after) + 1 if after in df.columns else len(df.columns)
    df.insert(at, name, values)
    return df


def with_agent_ids(df: pd.DataFrame, society: str = "society", agent: str = "agent") -> pd.DataFrame:
    """``df`` with ``agent_id`` (text) right after its ``agent`` column, from its ``society`` and
    ``agent`` positions (rows without whole positions get None)."""
    if society not in df.columns or agent not in df.columns:
        return df.copy()

    def key(s: Any, a: Any) -> str | None:
        try:
            if float(s).is_integer() and float(a).is_integer():
                return agent_id(s, a)
        except (TypeError, ValueError, OverflowError):
            pass
        return None

    return _insert_after(
        df,
        agent,
        AGENT_ID,
        pd.Series(
            [key(s, a) for s, a in zip(df[society], df[agent], strict=False)], index=df.index, dtype=object
        ).infer_objects(),
    )


def with_costs(df: pd.DataFrame, source: str = "cost") -> pd.DataFrame:
    """``df`` with its exact cost column ``source`` (decimal text) renamed ``cost_usd_exact`` and the
    same amount as a float, ``cost_usd``, right before it (unreadable amounts: NaN)."""
    if source not in df.columns:
        return df.copy()
    exact = pd.Series(
        [None if v is None or (isinstance(v, float) and v != v) else str(v) for v in df[source]], index=df.index
    )
    df = df.drop(columns=[c for c in (COST, EXACT_COST) if c in df.columns and c != source])
    at = list(df.columns).index(source)
    df = df.drop(columns=[source])
    df.insert(at, EXACT_COST, exact)
    df.insert(
        at, COST, cast(pd.Series, pd.to_numeric(exact, errors="coerce")).astype(float)
    )  # a Series in, a Series out
    return df


def money_table(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """A decisions, ledger or tool-loops table as it is written: the money in both columns, the
    agent under ``agent_id`` (the ledger and the tool loops hold the text id the ledger charged;
    the decisions get it from their society and agent positions)."""
    if name == "decisions":
        df = with_agent_ids(df)
    elif "agent" in df.columns and AGENT_ID not in df.columns:
        df = df.rename(columns={"agent": AGENT_ID})
    return with_costs(df)


def upgrade(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """A table as read back from a run directory, in today's shape: a decisions, ledger or tool-loops
    table written before ``agent_id``, ``cost_usd`` and ``cost_usd_exact`` existed gets them (the
    converter registered in :mod:`cooplab.graphs.formats`; ``cooplab migrate`` writes it back)."""
    if not is_earlier(name, list(df.columns)):
        return df
    if "cost" in df.columns and EXACT_COST not in df.columns:
        df = with_costs(df)
    if AGENT_ID not in df.columns:
        df = with_agent_ids(df) if name == "decisions" else df.rename(columns={"agent": AGENT_ID})
    return df


def is_earlier(name: str, columns: list[str]) -> bool:
    """Whether a table with these columns was written before the agent key and the money columns
    (what :func:`upgrade` changes)."""
    if name not in MONEY_TABLES:
        return False
    if "cost" in columns and EXACT_COST not in columns:
        return True
    if AGENT_ID in columns:
        return False
    return ("society" in columns and "agent" in columns) if name == "decisions" else "agent" in columns
