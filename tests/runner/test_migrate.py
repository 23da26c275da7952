"""Earlier on-disk formats in one place (issue 39 step 6): every converter registered with what it
reads and writes, run on the fixtures of the earlier formats the suite already holds (version-1
config.json and summary.json of every task, a grid sweep's folder from before manifests, the three
sweep-file formats before the grid format); ``cooplab migrate PATH`` converts a folder in place
(atomically, the originals kept), says what a dry run would do, is a no-op on a current folder and
on a second run, and refuses a damaged or unknown file in one line with nothing changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import cooplab
from cooplab.cli import main
from cooplab.graphs import formats, rundir, runfiles
from cooplab.graphs.rundir import RunDirError
from cooplab.runs import grid, migrate, registry
from cooplab.runs.config import RunConfig

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: run folder -> (the version-1 config.json fixture, the version-1 summary.json fixture)
RUNS = {
    "cpr-rule": ("cpr_rule", "cpr-rule"),
    "cpr-llm": ("cpr_llm", "cpr-llm"),
    "diners-rule": ("diners_rule", "diners-rule"),
    "game-nash": ("game_nash", "game-nash"),
    "game-random": ("game_random", None),
    "game-llm": (None, "game-llm"),
    "science-oracle": ("science_oracle", "science-oracle"),
    "cpr-failed": (None, "cpr-failed"),
}


def old_runs(folder: Path) -> dict[str, Path]:
    """A folder of run folders of every task, each file in the earlier format (version 1)."""
    out = {}
    for name, (config, summary) in RUNS.items():
        d = folder / name
        d.mkdir(parents=True)
        if config:
            text = (DATA / "configs" / f"{config}.json").read_text().replace("{EXAMPLES}", str(EXAMPLES))
            (d / "config.json").write_text(text)
        if summary:
            shutil.copy(DATA / "summaries" / f"{summary}.json", d / "summary.json")
        out[name] = d
    return out


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(["migrate", *args])
    out, err = capsys.readouterr()
    return code, out, err


# --- the converters ---------------------------------------------------------------------------------
def test_the_format_is_declared_once_with_the_version_of_each_file():
    assert formats.FORMAT == "0.1" and cooplab.migrate is migrate.migrate
    assert formats.VERSIONS == {
        "config.json": rundir.CONFIG_VERSION,
        "summary.json": runfiles.SUMMARY_VERSION,
        "manifest.json": runfiles.MANIFEST_VERSION,
    }
    for name, conv in formats.CONVERTERS.items():
        assert conv.file == name and conv.reads and conv.writes
        assert name not in formats.VERSIONS or conv.writes == f"version {formats.VERSIONS[name]}"
    assert set(formats.CONVERTERS) == {*formats.VERSIONS, "table", "games/", "items/"}


def test_every_run_file_of_every_task_is_converted_to_what_the_readers_make_of_it(tmp_path):
    runs = old_runs(tmp_path / "runs")
    before = {name: (rundir.read_config(d) if (d / "config.json").exists() else None) for name, d in runs.items()}
    read = {name: runfiles.try_summary(d, registry.get) for name, d in runs.items()}
    originals = files(tmp_path / "runs")
    done = migrate.migrate(tmp_path / "runs")
    assert len(done.changes) == len(originals) and done.runs == len(RUNS)
    for name, d in runs.items():
        if before[name] is not None:
            stored = json.loads((d / "config.json").read_text())
            assert stored["version"] == formats.CONFIG_VERSION and stored == json.loads(json.dumps(before[name]))
            assert (d / "config.json.v1.bak").read_bytes() == originals[f"{name}/config.json"]
        if (summary := read[name][0]) is not None:
            stored = json.loads((d / "summary.json").read_text())
            assert stored["version"] == formats.SUMMARY_VERSION and stored == summary.as_json()
            assert (d / "summary.json.v1.bak").read_bytes() == originals[f"{name}/summary.json"]
    # what a resume reads: the same configuration before and after
    for name in ("cpr-rule", "diners-rule", "game-nash"):
        assert (
            RunConfig.load(runs[name]).to_config()
            == RunConfig.load(json.loads(originals[f"{name}/config.json"])).to_config()
        )


def test_a_grid_sweep_folder_made_before_manifests_gets_the_manifest_its_layout_shows(tmp_path):
    sweep = tmp_path / "sweep"
    for cell in ("a", "b"):
        d = sweep / "cells" / cell
        d.mkdir(parents=True)
        shutil.copy(DATA / "summaries" / "cpr-rule.json", d / "summary.json")
    (sweep / "table.csv").write_text("cell\na\nb\n")
    project = tmp_path / "project"  # a folder that merely keeps runs in runs/: no manifest made up for it
    shutil.copytree(sweep / "cells", project / "runs")
    inferred = runfiles.manifest_of(sweep)
    migrate.migrate(tmp_path)
    m = runfiles.read_manifest(sweep)
    assert inferred is not None
    assert not m.inferred and m.kind == inferred.kind == "sweep"
    assert [c.dir for c in m.cells] == [c.dir for c in inferred.cells] == ["cells/a", "cells/b"]
    assert not (project / runfiles.MANIFEST_FILE).exists()


#: 'cooplab profile --players nash --games cpr,weakest-link --simulations 2' as cooplab wrote it before
#: profiles were grid sweeps (games/GAME run folders; made by that code, figures and traces left out)
OLD_PROFILE = DATA / "profile-games-layout"
PROFILE_ARGS = ["profile", "--players", "nash", "--games", "cpr,weakest-link", "--simulations", "2"]


def test_a_profile_in_the_games_layout_reads_and_continues_after_migrate(tmp_path, capsys):
    from cooplab.tasks.games import profiles as pf

    d = tmp_path / "p"
    shutil.copytree(OLD_PROFILE, d)
    before = json.loads((d / "profile.json").read_text())
    assert pf.game_dirs(d) == {g: d / "games" / g for g in ("cpr", "weakest-link")}  # it reads as it is
    code = main([*PROFILE_ARGS, "--out", str(d)])
    _, err = capsys.readouterr()
    assert code == 2 and f"'cooplab migrate {d}'" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli([str(d), "--dry-run", "--json"], capsys)
    assert code == 0 and [c["file"] for c in json.loads(out)["changes"]] == ["games/"] and (d / "games").is_dir()
    code, out, err = cli([str(d)], capsys)
    assert code == 0 and "converted to format 0.1" in out, err
    assert not (d / "games").exists() and sorted(p.name for p in (d / "cells").iterdir()) == [
        "game-cpr__s0",
        "game-weakest-link__s0",
    ]
    m = runfiles.read_manifest(d)
    assert m.kind == "profile" and [(c.dir, c.labels, c.status) for c in m.cells] == [
        ("cells/game-cpr__s0", {"game": "cpr"}, "completed"),
        ("cells/game-weakest-link__s0", {"game": "weakest-link"}, "completed"),
    ]
    moved = json.loads((d / "profile.json").read_text())
    assert [e["run_dir"] for e in moved["games"].values()] == [c.dir for c in m.cells]
    assert json.loads((d / "profile.json.v1.bak").read_text()) == before
    assert cli([str(d)], capsys)[1].strip().endswith("nothing to do")  # a second migration changes nothing
    # the converted profile continues: a finished game read back, an interrupted one resumed from its checkpoint
    (d / "cells" / "game-weakest-link__s0" / "summary.json").unlink()
    code = main([*PROFILE_ARGS, "--json", "--out", str(d)])
    out, err = capsys.readouterr()
    assert code == 0, err
    got = json.loads(out)
    assert "cpr: finished earlier, read back" in err and "weakest-link: resuming" in err
    for g, e in before["games"].items():
        assert got["games"][g]["metric"] == e["metric"] and got["games"][g]["status"] == "completed", g


OLD_BENCH, BENCH_INPUTS = DATA / "bench-items-layout", DATA / "bench-items-inputs"
BENCH_ARGS = [
    "bench",
    "science",
    str(BENCH_INPUTS / "suite.jsonl"),
    "--tables",
    str(EXAMPLES / "bench-suite" / "tables"),
    "--labels",
    str(BENCH_INPUTS / "labels.jsonl"),
    "--team",
    f"answers:{BENCH_INPUTS / 'answers.jsonl'}",
    "--sandbox-backend",
    "local",
    "--cache",
    "off",
]


def test_a_bench_in_the_items_layout_reads_and_continues_after_migrate(tmp_path, capsys):
    """A bench written before benches were grid sweeps (the fixture: today's code before the
    change, --limit 3 of a 4-item suite with a dotted id and an item that cannot run; figures,
    traces and checkpoints left out, no absolute path inside)."""
    import pandas as pd

    d = tmp_path / "b"
    shutil.copytree(OLD_BENCH, d)
    before = json.loads((d / "summary.json").read_text())
    assert runfiles.dirs_by(d, "id") == {i: d / "items" / i for i in ("q01", "v1.2")}  # it reads as it is
    code = main([*BENCH_ARGS, "--out", str(d)])
    _, err = capsys.readouterr()
    assert code == 2 and f"`cooplab migrate {d}`" in err and len(err.strip().splitlines()) == 1, err
    code, out, err = cli([str(d), "--dry-run", "--json"], capsys)
    assert code == 0 and [c["file"] for c in json.loads(out)["changes"]] == ["items/"] and (d / "items").is_dir()
    code, out, err = cli([str(d)], capsys)
    assert code == 0 and "converted to format 0.1" in out, err
    cells = ["cells/item-q01__s0", "cells/item-v1.2__s0"]
    assert not (d / "items").exists() and sorted(f"cells/{p.name}" for p in (d / "cells").iterdir()) == cells
    m = runfiles.read_manifest(d)
    assert m.kind == "bench" and [(c.dir, c.labels, c.status) for c in m.cells] == [
        ("cells/item-q01__s0", {"item": "q01", "seed": 0}, "completed"),
        ("cells/item-v1.2__s0", {"item": "v1.2", "seed": 0}, "completed"),
    ]
    assert m.outputs == {k: v for k, v in formats.BENCH_OUTPUTS.items() if k != "figure"}  # the fixture has none
    rows = pd.read_parquet(d / "results.parquet")
    assert list(rows["run_dir"]) == ["bench-items-layout/" + c for c in cells] + [""]
    old_rows = pd.read_parquet(d / "results.parquet.v1.bak")
    assert list(old_rows["run_dir"]) == ["bench-items-layout/items/q01", "bench-items-layout/items/v1.2", ""]
    assert runfiles.read_manifest(d).cells[0].dir == "cells/item-q01__s0" and (d / "manifest.json.v1.bak").is_file()
    assert cli([str(d)], capsys)[1].strip().endswith("nothing to do")  # a second migration changes nothing
    # the converted bench continues: its finished items read back (skipped, nothing charged), the fourth item runs
    code = main([*BENCH_ARGS, "--json", "-q", "--out", str(d)])
    out, err = capsys.readouterr()
    assert code == 0, err
    s = json.loads(out)
    assert s["skipped"] == ["q01", "v1.2"] and s["ran"] == ["q02"] and s["items"] == 4, s
    assert [n["id"] for n in s["not_scored"]] == [n["id"] for n in before["not_scored"]] == ["bad.item"]
    # q02's label in the fixture's inputs is wrong on purpose: scored, not correct
    assert s["scored"] == before["scored"] + 1 and s["correct"] == before["correct"] == 2
    assert s["cost_usd"] > before["cost_usd"] and (d / "figures" / "accuracy-cost.png").is_file()
    assert runfiles.dirs_by(d, "item") == {i: d / "cells" / f"item-{i}__s0" for i in ("q01", "v1.2", "q02")}


SWEEPS = {
    "CPR sweep": {"out": "o", "agents": "rule", "envs": ["harsh", "rich"], "trials": 2, "rounds": 3, "seed": 5},
    "science sweep": {
        "task": "science",
        "out": "o",
        "team": "oracle",
        "science_tasks": ["ecology"],
        "simulations": 2,
        "sandbox_backend": "local",
    },
    "command-line options": {
        "task": "diners",
        "out": "o",
        "args": ["--agents", "rule", "--iterations", "2"],
        "grid": {"--pk": ["3:1", "6:1"]},
    },
}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_every_earlier_sweep_format_is_found_and_converted_to_a_grid_sweep(name):
    from cooplab.cli.tasks import run_keywords

    conv = migrate.sweep_converter(SWEEPS[name])
    assert conv is not None and conv.reads == name and conv.file == "sweep file" and conv.writes == "grid sweep"
    sw = grid.load(migrate.convert_sweep(conv, SWEEPS[name], "old.json", convert_args=run_keywords), "old.json")
    assert len(grid.jobs(sw)) == {"CPR sweep": 2, "science sweep": 2, "command-line options": 2}[name]
    assert migrate.sweep_converter({"task": sw.task, "out": "o", "fixed": sw.fixed, "grid": sw.grid}) is None


# --- the command -------------------------------------------------------------------------------------
def test_a_dry_run_says_what_would_change_and_writes_nothing(tmp_path, capsys):
    old_runs(tmp_path / "runs")
    before = files(tmp_path)
    code, out, err = cli([str(tmp_path / "runs"), "--dry-run", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["dry_run"] and not report["current"] and len(report["changes"]) == len(before), err
    assert {c["reads"] for c in report["changes"]} == {"version 1"} and all(
        c["backup"] is None for c in report["changes"]
    )
    assert files(tmp_path) == before


def test_a_second_migration_and_a_current_folder_are_no_ops_that_say_so(tmp_path, capsys):
    old_runs(tmp_path / "runs")
    code, out, _ = cli([str(tmp_path / "runs")], capsys)
    assert code == 0 and "converted to format 0.1" in out and ".v1.bak" in out
    after = files(tmp_path)
    code, out, _ = cli([str(tmp_path / "runs")], capsys)
    assert code == 0 and out.strip().endswith("already in cooplab's on-disk format 0.1 (8 run folders); nothing to do")
    assert out.count("\n") == 1 and files(tmp_path) == after


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory):
    """A tiny scripted LLM run of this cooplab (it has every table the money converter reads)."""
    out = tmp_path_factory.mktemp("migrate") / "run"
    kw = dict(n_agents=2, rounds=2, replicates=1, cache="off", quiet=True)
    return cooplab.run(task="cpr", agents="llm", model=f"scripted:{EXAMPLES}/scripted/cautious.json", out=out, **kw)


def test_what_this_cooplab_writes_is_current(llm_run):
    before = files(llm_run.out)
    assert migrate.migrate(llm_run.out).current and files(llm_run.out) == before


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_tables_written_before_the_agent_key_and_the_money_columns_are_rewritten(llm_run, tmp_path, ext):
    import pandas as pd

    old = tmp_path / "old"
    shutil.copytree(llm_run.out, old)
    for name in ("ledger", "decisions"):  # the earlier shape: a "cost" text column, the ledger's agent as "agent"
        df = (
            pd.read_parquet(old / f"{name}.parquet")
            .drop(columns=["cost_usd"])
            .rename(columns={"cost_usd_exact": "cost"})
        )
        df = df.rename(columns={"agent_id": "agent"}) if name == "ledger" else df.drop(columns=["agent_id"])
        (old / f"{name}.parquet").unlink()
        rundir.write_table(df, old, name, csv=ext == "csv")
    originals = files(old)
    on_read = {name: rundir.read_table(old, name) for name in ("ledger", "decisions")}  # the readers' conversion
    done = migrate.migrate(old)
    assert sorted(c.path.name for c in done.changes) == [f"decisions.{ext}", f"ledger.{ext}"]
    for name in ("ledger", "decisions"):
        assert (old / f"{name}.{ext}.v1.bak").read_bytes() == originals[f"{name}.{ext}"]
        stored = rundir.read_table(old, name, as_written=True)
        pd.testing.assert_frame_equal(stored, on_read[name], check_dtype=False)
        if ext == "parquet":  # what this cooplab writes, to the value
            pd.testing.assert_frame_equal(stored, rundir.read_table(llm_run.out, name))
    assert migrate.migrate(old).current


@pytest.mark.parametrize(
    "damage, says",
    [
        ("cpr-rule/summary.json", "summary.json: must be a JSON object"),
        ("game-nash/config.json", "config.json: version 9 is not one this cooplab knows"),
        ("diners-rule/summary.json", "summary.json: ledger.calls"),
        ("cpr-llm/config.json", "cpr-llm/config.json: not valid JSON"),
    ],
)
def test_a_damaged_or_unknown_file_is_one_line_exit_2_and_nothing_changes(tmp_path, capsys, damage, says):
    old_runs(tmp_path / "runs")
    path = tmp_path / "runs" / damage
    if damage.startswith("cpr-rule"):
        path.write_text("[1, 2]")
    elif damage.startswith("game-nash"):
        path.write_text(json.dumps({"version": 9}))
    elif damage.startswith("diners-rule"):
        raw = json.loads(path.read_text())
        path.write_text(json.dumps({**raw, "ledger": {"calls": "x"}}))
    else:
        path.write_text('{"task": ')
    before = files(tmp_path)
    code, out, err = cli([str(tmp_path / "runs")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("cooplab: error: "), err
    assert says in err, err
    assert files(tmp_path) == before
    with pytest.raises(RunDirError):
        migrate.migrate(tmp_path / "runs", dry_run=True)


def test_a_path_that_holds_no_run_or_is_not_a_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "f.json").write_text("{}")
    for path, says in (
        (tmp_path / "empty", "holds no cooplab run folder"),
        (tmp_path / "f.json", "is not a folder"),
        (tmp_path / "none", "does not exist"),
    ):
        code, out, err = cli([str(path)], capsys)
        assert code == 2 and says in err and err.count("\n") == 1, err


def test_a_run_folder_in_use_is_refused_before_anything_is_written(tmp_path):
    runs = old_runs(tmp_path / "runs")
    before = files(tmp_path)
    with rundir.locked(runs["game-nash"]):
        # another thread of this process, as another process would be: refused, nothing written
        import threading

        errors: list[str] = []

        def other() -> None:
            try:
                migrate.migrate(tmp_path / "runs")
            except RunDirError as exc:
                errors.append(str(exc))

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors and "game-nash" in errors[0]
    assert {k: v for k, v in files(tmp_path).items() if not k.endswith(".cooplab.lock")} == {
        k: v for k, v in before.items() if not k.endswith(".cooplab.lock")
    }
