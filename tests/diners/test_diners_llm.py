"""Diner's Dilemma (issue 6), LLM agents with scripted models: decisions applied as answered,
accuracy against the strategies' definitions (contradictions and fallbacks count against it),
validated member numbers, prompts with stated or unstated costs, the run directory."""

import json

import numpy as np
import pandas as pd

from cooplab.cli import figures_app, main
from cooplab.cli.diners import register
from cooplab.evals.typed import as_frame, column, scalar
from cooplab.tasks.diners import llm as la
from cooplab.tasks.diners.society import Condition
from cooplab.tasks.diners.task import init_llm_state

register(figures_app)


def script(path, **by_phase):
    path.write_text(
        json.dumps(
            {"by_phase": {k: [a if isinstance(a, str) else json.dumps(a) for a in v] for k, v in by_phase.items()}}
        )
    )
    return path


def llm_run(tmp_path, capsys, models, *more):
    out = tmp_path / "run"
    args = [
        "run",
        "diners",
        "--agents",
        "llm",
        "--combination",
        "1",
        "--pk",
        "3:1",
        "--iterations",
        "1",
        "--out",
        str(out),
        "--cache",
        "off",
        "-q",
        "--json",
        *more,
    ]
    for agent, f in models.items():
        args += ["--model", f"scripted:{f}"] if agent == "default" else ["--agent-model", f"{agent}=scripted:{f}"]
    code = main(args)
    stdout, err = capsys.readouterr()
    assert code == 0, err
    return out, json.loads(stdout)


def test_strategy_following_answers_and_one_contradiction(tmp_path, capsys):
    # combination 1: members 1-4 = M P E R1 (group 1), members 5-8 = M M P R1 (group 2)
    meal = {0: "budget", 1: "budget", 2: "budget", 3: "premium", 4: "budget", 5: "budget", 6: "budget", 7: "premium"}
    punish = {0: [4], 1: [], 2: [], 3: [], 4: [8], 5: [8], 6: [8], 7: [2]}  # agent 1 (P) fails to punish: contradiction
    # agent 7 (R1, group 2) names member 2 (group 1) three times: fallback (punish nobody), counted inaccurate
    meta = {0: [2, 3, 4], 4: [], 5: []}  # the Moralists: P and E left R1 unpunished; P, E and R1 fail to punish them
    models = {}
    for a in range(8):
        f = script(
            tmp_path / f"a{a}.json",
            order=[{"meal": meal[a]}],
            punish=[{"punish": punish[a]}],
            metanorm=[{"punish": meta.get(a, [])}],
        )
        models["default" if a == 0 else str(a)] = f
    models["0"] = models["default"]
    out, s = llm_run(tmp_path, capsys, models)
    assert s["agents"] == "llm" and s["status"] == "completed"
    assert s["decision_accuracy"] == 1.0 and s["decision_accuracy_n"] == 8
    assert s["punishment_accuracy_n"] == 8 + 3  # everyone in stage 2, the three Moralists in stage 3
    assert abs(s["punishment_accuracy"] - 9 / 11) < 1e-12
    assert s["punishment_accuracy_by_strategy"]["P"] == 0.5 and s["punishment_accuracy_by_strategy"]["M"] == 1.0
    d = pd.read_parquet(out / "decisions.parquet")
    p_row = d[(d["agent"] == 1) & (d["phase"] == "punish")].iloc[0]
    assert (
        p_row["strategy"] == "P"
        and json.loads(p_row["prescribed"]) == [4]
        and json.loads(p_row["chosen"]) == []
        and not p_row["accurate"]
    )
    r_row = d[(d["agent"] == 7) & (d["phase"] == "punish")].iloc[0]
    assert (
        r_row["fallback_used"]
        and r_row["attempts"] == 3
        and not r_row["accurate"]
        and "not one of the other members" in r_row["error"]
    )
    # the contradicting answer is applied, not corrected: P did not punish R1, and paid no k for it
    pun = pd.read_parquet(out / "punishments.parquet")
    stage1 = sorted(map(tuple, as_frame(pun[pun["stage"] == 1][["punisher", "target"]]).to_numpy().tolist()))
    assert stage1 == [(0, 3), (4, 7), (5, 7), (6, 7)]
    stage2 = sorted(map(tuple, as_frame(pun[pun["stage"] == 2][["punisher", "target"]]).to_numpy().tolist()))
    assert stage2 == [(0, 1), (0, 2), (0, 3)]
    u = pd.read_parquet(out / "utilities.parquet").sort_values("agent")
    # group 1 (p = 3, k = 1): M 0 - 1 - 3 = -4; P 0 - 3 = -3; E 0 - 3 = -3; R1 4 - 3 - 3 = -2
    np.testing.assert_allclose(u["utility"], [-4, -3, -3, -2, -1, -1, -1, -5])
    assert (out / "ledger.parquet").exists() and s["ledger"]["calls"] == int(scalar(column(d, "attempts").sum()))


def test_punish_schema_is_bounded_to_the_society():
    spec = la.punish_spec("metanorm", 8, 3)
    js = spec.schema.model_json_schema()["properties"]["punish"]
    assert (js["maxItems"], js["items"]["minimum"], js["items"]["maximum"]) == (3, 1, 8) and spec.phase == "metanorm"
    for bad in ({"punish": [9]}, {"punish": [1, 2, 3, 4]}, {"punish": "2"}):
        try:
            spec.schema.model_validate(bad)
        except Exception:
            continue
        raise AssertionError(bad)


def test_orders_contradicting_the_strategy_count_against_decision_accuracy(tmp_path, capsys):
    f = script(tmp_path / "all.json", order=[{"meal": "premium"}], punish=[{"punish": []}], metanorm=[{"punish": []}])
    out, s = llm_run(tmp_path, capsys, {"default": f})
    assert s["decision_accuracy"] == 2 / 8  # only the two R1 are prescribed the premium meal
    assert s["decision_accuracy_by_strategy"] == {"E": 0.0, "M": 0.0, "P": 0.0, "R1": 1.0}
    # everyone defected; P and M should punish all their companions, E and R1 nobody (3 of 8 right);
    # the Moralists should punish every non-punisher in stage 3 (0 of 3 right)
    assert abs(s["punishment_accuracy"] - 3 / 11) < 1e-12
    orders = pd.read_parquet(out / "orders.parquet")
    assert bool((orders["order"] == "premium").all())  # applied as answered
    assert bool((pd.read_parquet(out / "utilities.parquet")["utility"] == -2).all())  # all-defect: 10 - 12


def test_prompts_carry_strategy_persona_and_stated_or_unstated_costs():
    for stated, present in ((True, True), (False, False)):
        st = init_llm_state(Condition(p=6.0, k=1.0, stated=stated), 1, 0, 2)
        st["defect"] = np.array([[False, False, False, True, False, False, False, True]])
        sys_msg, human = la.punish_messages(st, 0, 0)
        assert "Moralist" in sys_msg.content and "Raj Sharma" in sys_msg.content and "pub" in sys_msg.content
        assert "member 4" in human.content and "premium meal (defected)" in human.content
        assert ("costs each punished member 6 points" in human.content) is present
        assert ("costs you 1 point of utility" in human.content) is present and "member 1" in sys_msg.content
    order = la.order_messages(st, 0, 3)
    assert (
        "Reluctant Cooperator" in order[0].content
        and "$12" in order[1].content
        and "first iteration" in order[1].content
    )


def test_rerun_replays_from_the_cache(tmp_path, capsys):
    f = script(
        tmp_path / "all.json",
        order=[{"meal": "budget"}, {"meal": "premium"}],
        punish=[{"punish": []}],
        metanorm=[{"punish": []}],
    )
    cache = tmp_path / "cache.sqlite"
    outs = []
    for name in ("a", "b"):
        args = [
            "run",
            "diners",
            "--agents",
            "llm",
            "--model",
            f"scripted:{f}",
            "--iterations",
            "2",
            "--cache",
            str(cache),
            "--out",
            str(tmp_path / name),
            "-q",
            "--json",
        ]
        assert main(args) == 0
        outs.append(json.loads(capsys.readouterr()[0]))
    assert outs[1]["ledger"]["cached_calls"] == outs[1]["ledger"]["calls"] > 0
    assert outs[0]["final_shares"] == outs[1]["final_shares"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "a" / "orders.parquet"), pd.read_parquet(tmp_path / "b" / "orders.parquet")
    )


def test_unreachable_model_stops_cleanly_and_resume_continues_with_one_trace(tmp_path, capsys):
    """A diners LLM run whose model becomes unreachable in iteration 3 stops cleanly (exit 1,
    resumable); 'cooplab resume' (task read from config.json) finishes it with no iteration lost or
    repeated, equal to an uninterrupted run, and traces.jsonl holds both parts as one trace file."""
    good = script(
        tmp_path / "good.json", order=[{"meal": "budget"}], punish=[{"punish": []}], metanorm=[{"punish": []}]
    )
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "cycle": False,
                "by_phase": {
                    "order": [json.dumps({"meal": "budget"})] * 16 + [{"error": "connection"}] * 80,
                    "punish": [json.dumps({"punish": []})] * 200,
                    "metanorm": [json.dumps({"punish": []})] * 200,
                },
            }
        )
    )

    def args(out, f):
        return [
            "run",
            "diners",
            "--agents",
            "llm",
            "--model",
            f"scripted:{f}",
            "--combination",
            "1",
            "--iterations",
            "4",
            "--out",
            str(out),
            "--cache",
            "off",
            "-q",
            "--json",
        ]

    assert main(args(tmp_path / "ref", good)) == 0
    ref = json.loads(capsys.readouterr()[0])
    out = tmp_path / "run"
    code = main(args(out, bad))
    err = capsys.readouterr()[1]
    assert code == 1 and "cooplab resume" in err and "Traceback" not in err
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "stopped" and s["iterations_completed"] == 2
    cfg = json.loads((out / "config.json").read_text())
    cfg["llm"]["model"] = f"scripted:{good}"
    (out / "config.json").write_text(json.dumps(cfg))
    code = main(["resume", str(out), "-q", "--json"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    s2 = json.loads(stdout)
    assert s2["task"] == "diners" and s2["status"] == "completed" and s2["iterations_completed"] == 4
    assert s2["final_shares"] == ref["final_shares"]
    for stem in ("strategy_counts", "orders", "utilities", "punishments"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "ref" / f"{stem}.parquet"), pd.read_parquet(out / f"{stem}.parquet")
        )
    d = pd.read_parquet(out / "decisions.parquet")
    assert not d.duplicated(["society", "agent", "round", "phase"]).any()
    assert sorted(d["round"].unique()) == [1, 2, 3, 4] and bool(
        (d[d["phase"] == "order"].groupby("round").size() == 8).all()
    )
    # one coherent trace file: the stopped run's tree, then the resumed run's
    from cooplab.graphs.tracing import load_runs

    runs = load_runs(out, validate=True)
    by_id = {r["id"]: r for r in runs}
    assert len(by_id) == len(runs)  # no run id twice
    assert all(r["parent_run_id"] is None or r["parent_run_id"] in by_id for r in runs)  # parent links valid
    assert all(r["parent_run_id"] is None or by_id[r["parent_run_id"]]["trace_id"] == r["trace_id"] for r in runs)
    roots = [r for r in runs if r["parent_run_id"] is None]
    assert len(roots) == 2 and roots[0]["status"] == "error" and "resumed" in roots[1]["tags"]

    def steps(root, status):  # graph steps of the node runs of one part (each under its round's run)
        rounds = {r["id"] for r in runs if r["parent_run_id"] == root["id"] and r["name"].startswith("round ")}
        return {
            r["extra"]["metadata"]["langgraph_step"]
            for r in runs
            if r["parent_run_id"] in rounds and r["status"] == status
        }

    done, failed, resumed = steps(roots[0], "success"), steps(roots[0], "error"), steps(roots[1], "success")
    assert done and resumed and max(done) < min(resumed)  # no node done twice
    assert failed == {min(resumed)}  # the node the model failed in is the one the resumed run starts with


def test_agent_model_outside_the_society_is_a_one_line_error(tmp_path, capsys):
    code = main(["run", "diners", "--agents", "llm", "--agent-model", "8=local", "--out", str(tmp_path / "x"), "-q"])
    err = capsys.readouterr()[1]
    assert code == 2 and err.count("\n") == 1 and "0..7" in err and "--agent-model 8" in err
    assert not (tmp_path / "x").exists()
