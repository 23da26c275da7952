"""The ledger's string agent ids, team and round fields, non-token charges, old audit trails, and
its defences against hostile values (seeded property tests)."""

from __future__ import annotations

import random
import threading
from decimal import Decimal

import pytest

from cooplab.graphs.ledger import BudgetExhausted, Entry, Ledger

OLD_ROW = {
    "call_id": "k1",
    "model": "scripted:x",
    "agent": "0:3",
    "round": 2,
    "phase": "harvest",
    "input_tokens": 100,
    "output_tokens": 10,
    "cost": "0.0000800",
    "cached": False,
    "usage_error": None,
}  # an Entry before team/kind existed


def test_string_agent_ids_with_team_and_optional_round():
    led = Ledger()
    e1 = led.charge(
        call_id="a",
        model="m",
        agent="data.lead",
        team="data",
        round=None,
        phase="plan",
        input_tokens=1000,
        output_tokens=100,
    )
    e2 = led.charge(
        call_id="b", model="m", agent="society 3 / agent 7", round=4, phase="harvest", input_tokens=10, output_tokens=1
    )
    assert (e1.agent, e1.team, e1.round, e1.kind) == ("data.lead", "data", None, "tokens")
    assert (e2.agent, e2.team, e2.round) == ("society 3 / agent 7", None, 4)
    assert led.agent_spent("data.lead") == (Decimal("0.0008"), 1100)
    assert led.agent_spent("nobody") == (Decimal(0), 0)
    row = e1.as_dict()
    assert all(not isinstance(v, (dict, list, tuple, Decimal)) for v in row.values())  # flat: a Parquet row


def test_non_token_charges_at_per_kind_rates_zero_by_default():
    led = Ledger(unit_rates={"sandbox_seconds": "0.0001"})  # pyright: ignore[reportArgumentType]  # a price as text is taken as its Decimal
    e = led.charge_units("sandbox_seconds", Decimal("2.5"), agent="data.lead", team="data", round=1, phase="analysis")
    assert (e.kind, e.units, e.rate, e.cost, e.input_tokens, e.output_tokens) == (
        "sandbox_seconds",
        "2.5",
        "0.0001",
        "0.00025",
        0,
        0,
    )
    g = led.charge_units("gpu_seconds", 100, agent="data.lead")  # no rate set: free, but accounted
    assert Decimal(g.cost) == 0 and g.units == "100" and g.round is None
    h = led.charge_units("gpu_seconds", "3", agent="x", rate=Decimal("0.5"))  # an explicit rate
    assert Decimal(h.cost) == Decimal("1.5")
    t = led.totals()
    assert t["calls"] == 0 and t["input_tokens"] == 0  # model-call totals are unchanged by other kinds
    assert t["by_kind"]["sandbox_seconds"] == {"entries": 1, "units": "2.5", "cost_usd": "0.00025"}
    assert t["by_kind"]["gpu_seconds"] == {"entries": 2, "units": "103", "cost_usd": "1.5"}
    assert t["cost_usd"] == "1.50025" and t["unit_rates"] == {"sandbox_seconds": "0.0001"}
    assert led.spent == sum(Decimal(e.cost) for e in led.entries)
    assert set(t) >= {
        "calls",
        "cached_calls",
        "usage_errors",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "cost_usd_float",
        "budget_usd",
        "rates_per_1k",
    }


def test_non_token_charges_go_through_the_same_cap():
    led = Ledger(budget=Decimal("0.01"), unit_rates={"sandbox_seconds": Decimal("0.001")})
    led.charge_units("sandbox_seconds", 6, agent="a")
    with pytest.raises(BudgetExhausted):
        led.charge_units("sandbox_seconds", 5, agent="a")  # would be 0.011
    assert led.spent == Decimal("0.006") and len(led.entries) == 1  # nothing recorded
    res = led.reserve(led.unit_cost("sandbox_seconds", 4))
    with pytest.raises(BudgetExhausted):  # in flight counts
        led.charge(
            call_id="c", model="m", agent="b", round=1, phase="p", input_tokens=1000, output_tokens=0, cached=True
        )
    with pytest.raises(ValueError, match="exceeds its reservation"):
        led.charge_units("sandbox_seconds", 5, agent="a", reservation=res)
    assert led.in_flight == 0 and led.spent == Decimal("0.006")
    res = led.reserve(led.unit_cost("sandbox_seconds", 4))
    led.charge_units("sandbox_seconds", Decimal("1.5"), agent="a", reservation=res)
    assert led.spent == Decimal("0.0075") and led.in_flight == 0
    # a zero rate always fits, even with the budget spent
    free = Ledger(budget=0)  # pyright: ignore[reportArgumentType]  # an int budget is taken as its Decimal
    free.charge_units("sandbox_seconds", 1000, agent="a")
    assert free.spent == 0 and free.totals()["by_kind"]["sandbox_seconds"]["units"] == "1000"


def test_old_audit_trails_restore_with_defaults_and_new_rows_round_trip():
    led = Ledger()
    led.restore([OLD_ROW])
    (e,) = led.entries
    assert (e.kind, e.team, e.units, e.rate) == ("tokens", None, None, None) and led.spent == Decimal("0.00008")
    assert led.totals()["calls"] == 1 and led.agent_spent("0:3") == (Decimal("0.00008"), 110)
    led.charge_units("sandbox_seconds", "1.25", agent="data.lead", team="data", rate="0.2")
    rows = [x.as_dict() for x in led.entries]
    again = Ledger()
    again.restore(rows)
    assert [x.as_dict() for x in again.entries] == rows and again.spent == led.spent == Decimal("0.25008")
    assert again.totals() == led.totals()


@pytest.mark.parametrize(
    "row, needle",
    [
        ({**OLD_ROW, "bogus": 1}, "unknown fields"),
        ({k: v for k, v in OLD_ROW.items() if k != "cost"}, "lacks"),
        ({**OLD_ROW, "cost": "NaN"}, "finite"),
        ({**OLD_ROW, "cost": "-1"}, "negative"),
        ({**OLD_ROW, "cost": "abc"}, "number"),
        ({**OLD_ROW, "input_tokens": -5}, "negative"),
        ({**OLD_ROW, "output_tokens": 1.5}, "integer"),
        ({**OLD_ROW, "round": "2"}, "round"),
        ({**OLD_ROW, "kind": ""}, "empty"),
        ({**OLD_ROW, "units": "inf"}, "finite"),
        ("not a row", "mapping"),
    ],
)
def test_damaged_audit_rows_are_refused(row, needle):
    led = Ledger()
    led.charge(call_id="x", model="m", agent="a", round=1, phase="p", input_tokens=1, output_tokens=1)
    with pytest.raises(ValueError, match=needle):
        led.restore([row])
    assert len(led.entries) == 1  # a refused restore changes nothing


HOSTILE = [
    float("nan"),
    float("inf"),
    float("-inf"),
    -1,
    -0.001,
    Decimal("NaN"),
    Decimal("sNaN"),
    Decimal("-Infinity"),
    Decimal("-1E-30"),
    "abc",
    "",
    "1e",
    True,
    False,
    None,
    [1],
    {"a": 1},
    object(),
    b"1",
    complex(1, 0),
]


def _id(value: object) -> str:
    """The test id of a hostile value: its repr, without the address a bare object's repr carries
    (ids must be the same in every process that collects them, e.g. pytest-xdist's workers)."""
    return "object()" if type(value) is object else repr(value)


@pytest.mark.parametrize("bad", HOSTILE, ids=_id)
def test_hostile_units_and_rates_are_refused_with_a_clear_error(bad):
    led = Ledger(budget=Decimal("1"))
    attempts = [
        lambda: led.charge_units("sandbox_seconds", bad, agent="a"),
        lambda: led.unit_cost("sandbox_seconds", bad),
        lambda: Ledger(unit_rates={"sandbox_seconds": bad}),
    ]
    if bad is not None:  # rate=None means "the kind's rate"
        attempts += [
            lambda: led.charge_units("sandbox_seconds", 1, agent="a", rate=bad),
            lambda: led.unit_cost("sandbox_seconds", 1, rate=bad),
        ]
    for attempt in attempts:
        with pytest.raises(ValueError) as ei:
            attempt()
        assert "\n" not in str(ei.value) and str(ei.value)
    assert led.spent == 0 and not led.entries and led.in_flight == 0


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"kind": "tokens"}, "reserved"),
        ({"kind": ""}, "empty"),
        ({"kind": 3}, "string"),
        ({"agent": 7}, "agent id"),
        ({"agent": ""}, "empty"),
        ({"agent": None}, "agent id"),
        ({"team": 5}, "team"),
        ({"round": 1.5}, "round"),
        ({"round": True}, "round"),
        ({"round": float("nan")}, "round"),
        ({"phase": None}, "phase"),
    ],
)
def test_hostile_ids_kinds_and_rounds_are_refused(kw, needle):
    led = Ledger()
    args = {"kind": "sandbox_seconds", "units": 1, "agent": "a", **kw}
    with pytest.raises(ValueError, match=needle):
        led.charge_units(args.pop("kind"), args.pop("units"), **args)
    tok = {"call_id": "c", "model": "m", "agent": "a", "round": 1, "phase": "p", "input_tokens": 1, "output_tokens": 1}
    if "kind" not in kw:
        with pytest.raises(ValueError, match=needle):
            led.charge(**{**tok, **kw})
    assert not led.entries


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None, float("nan")], ids=repr)
def test_hostile_token_counts_are_refused(bad):
    led = Ledger()
    with pytest.raises(ValueError, match="tokens"):
        led.charge(call_id="c", model="m", agent="a", round=1, phase="p", input_tokens=bad, output_tokens=1)
    assert not led.entries


@pytest.mark.parametrize("bad", [{"tokens": 1}, {"": 1}, {3: 1}, [("a", 1)]], ids=repr)
def test_hostile_unit_rate_tables_are_refused(bad):
    with pytest.raises(ValueError):
        Ledger(unit_rates=bad)


def test_property_random_valid_charges_stay_exact_and_under_the_cap():
    rng = random.Random(11)
    for trial in range(40):
        rates = {
            k: Decimal(rng.choice(["0", "0.0001", "0.25", "1", "3.3"])) for k in ("sandbox_seconds", "gpu_seconds")
        }
        budget = Decimal(rng.choice(["0", "0.001", "0.5", "2", "10"]))
        led = Ledger(budget=budget, unit_rates=rates)
        expected = Decimal(0)
        for _ in range(60):
            kind = rng.choice(["sandbox_seconds", "gpu_seconds", "tokens"])
            agent = rng.choice(["data.lead", "society 3 / agent 7", "0:1"])
            try:
                if kind == "tokens":
                    i, o = rng.randrange(0, 5000), rng.randrange(0, 500)
                    cost = led.cost("m", i, o)
                    if rng.random() < 0.5:
                        res = led.reserve(led.cost("m", i + rng.randrange(0, 50), o))
                        led.charge(
                            call_id="c",
                            model="m",
                            agent=agent,
                            round=rng.choice([None, 1, 2]),
                            phase="p",
                            input_tokens=i,
                            output_tokens=o,
                            reservation=res,
                        )
                    else:
                        led.charge(
                            call_id="c",
                            model="m",
                            agent=agent,
                            round=None,
                            phase="p",
                            input_tokens=i,
                            output_tokens=o,
                            cached=True,
                        )
                else:
                    units = Decimal(rng.randrange(0, 10**6)) / Decimal(10 ** rng.randrange(0, 7))
                    cost = units * rates[kind]
                    led.charge_units(
                        kind, units if rng.random() < 0.5 else float(units), agent=agent, team=rng.choice([None, "t"])
                    )
                expected += cost
            except BudgetExhausted:
                pass
            assert led.spent <= budget and led.in_flight == 0
        assert led.spent == expected == sum(Decimal(e.cost) for e in led.entries), trial
        per_kind = led.totals()["by_kind"]
        assert sum(Decimal(v["cost_usd"]) for v in per_kind.values()) == led.spent
        assert sum(led.agent_spent(a)[0] for a in {e.agent for e in led.entries}) == led.spent


def test_property_concurrent_token_and_unit_charges_never_pass_the_cap():
    for trial in range(5):
        budget = Decimal("0.05")
        led = Ledger(budget=budget, unit_rates={"sandbox_seconds": Decimal("0.001")})
        peak = []
        errors = []

        def worker(seed, led=led, peak=peak, errors=errors):
            rng = random.Random(seed)
            for _ in range(200):
                try:
                    if rng.random() < 0.5:
                        res = led.reserve(led.unit_cost("sandbox_seconds", 3))
                        led.charge_units(
                            "sandbox_seconds", Decimal(rng.randrange(0, 3000)) / 1000, agent=f"w{seed}", reservation=res
                        )
                    else:
                        res = led.reserve(led.cost("m", 400, 40))
                        led.charge(
                            call_id="c",
                            model="m",
                            agent=f"w{seed}",
                            round=1,
                            phase="p",
                            input_tokens=rng.randrange(0, 400),
                            output_tokens=rng.randrange(0, 40),
                            reservation=res,
                        )
                except BudgetExhausted:
                    pass
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)
                peak.append(led.spent + led.in_flight)

        threads = [threading.Thread(target=worker, args=(trial * 100 + i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert led.spent <= budget and max(peak) <= budget and led.in_flight == 0
        assert led.spent == sum(Decimal(e.cost) for e in led.entries)
        assert sum(led.agent_spent(f"w{trial * 100 + i}")[0] for i in range(8)) == led.spent


def test_entry_keeps_its_positional_fields():
    e = Entry("c", "m", "0:1", 3, "p", 10, 2, "0.1", True, None)  # the old positional order still works
    assert (e.cached, e.usage_error, e.team, e.kind) == (True, None, None, "tokens")
