"""A run records the environment that decides its results, and a resume in another one says so."""

from __future__ import annotations

import json
import re

from cooplab.cli import main
from cooplab.runs import store as runstore


def run(capsys, args):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_config_records_commit_versions_and_resume_warns_once_when_they_differ(tmp_path, capsys):
    d = tmp_path / "r"
    code, _, err = run(
        capsys, ["run", "diners", "--iterations", "2", "--replicates", "3", "--out", str(d), "-q", "--json"]
    )
    assert code == 0, err
    env = json.loads((d / "config.json").read_text())["record"]["environment"]
    import langgraph.version
    import numpy

    assert (
        env["packages"]["langgraph"] == langgraph.version.__version__ and env["packages"]["numpy"] == numpy.__version__
    )
    assert env["git"] is None or re.fullmatch(r"[0-9a-f]{40}", env["git"]["commit"])  # a checkout: its commit
    # the same environment: no warning
    code, _, err = run(capsys, ["resume", str(d), "-q", "--json"])
    assert code == 0 and "warning" not in err
    # another langgraph and another commit: one line, and the run still resumes
    cfg = json.loads((d / "config.json").read_text())
    cfg["record"]["environment"]["packages"]["langgraph"] = "0.0.1"
    cfg["record"]["environment"]["git"] = {"commit": "0" * 40, "dirty": False}
    (d / "config.json").write_text(json.dumps(cfg))
    code, out, err = run(capsys, ["resume", str(d), "-q", "--json"])
    lines = err.strip().splitlines()
    assert code == 0 and json.loads(out)["status"] == "completed"
    assert len(lines) == 1 and lines[0].startswith("cooplab: warning: ") and "langgraph 0.0.1 -> " in lines[0]
    assert ("git commit 000000000000 -> " in lines[0]) == (env["git"] is not None)


def test_a_malformed_environment_record_is_ignored_not_fatal(tmp_path, capsys):
    d = tmp_path / "r"
    assert run(capsys, ["run", "diners", "--iterations", "2", "--replicates", "3", "--out", str(d), "-q"])[0] == 0
    for bad in ("text", ["x"], {"packages": "x", "git": 3, "local_model": [], "sandbox_image": None}, None):
        cfg = json.loads((d / "config.json").read_text())
        cfg["record"]["environment"] = bad
        (d / "config.json").write_text(json.dumps(cfg))
        code, _, err = run(capsys, ["resume", str(d), "-q"])
        assert code == 0 and "Traceback" not in err and "warning" not in err, (bad, err)


def test_the_local_model_is_recorded_by_file_name_and_sha256():
    import hashlib

    from cooplab.agents.models.local import local_model_path

    env = runstore.environment({"llm": {"model": "local"}})
    path = local_model_path()
    assert env["local_model"]["file"] == path.name
    assert env["local_model"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "local_model" not in runstore.environment({"llm": {"model": "scripted:x.json"}})
    assert "local_model" in runstore.environment({"llm": {"model": "scripted:x.json", "agent_models": {"1": "local"}}})
    changed = dict(env, local_model={"file": path.name, "sha256": "f" * 64})
    assert runstore.environment_changes(changed, env) == [
        f"local model sha256 {'f' * 12} -> {env['local_model']['sha256'][:12]}"
    ]
