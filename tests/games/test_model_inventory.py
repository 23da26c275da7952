"""The paper's model inventory (Tables 8 and 9) shipped as models.csv data: ``--model-info paper``."""

from __future__ import annotations

import pandas as pd
import pytest

from cooplab.evals.bayes import PAPER_MODEL_INFO, BayesError, info_of, read_model_info
from cooplab.evals.typed import column


def test_the_paper_inventory_reads_as_model_info():
    info = read_model_info("paper")
    assert len(info) == 35 and column(info, "family").nunique() == 10  # "35 models from 10 families"
    assert int(column(info, "thinking").sum()) == 11
    row = info.loc["qwen3-0.6b"]
    assert (row["family"], row["size_b"], row["mmlu_pro"], row["ifeval"]) == ("Qwen3", 0.6, 24.7, 54.5)
    assert info.loc["gpt-oss-20b", "ifeval"] == 30.1 and "lm-eval" in info.loc["gpt-oss-20b", "score_source"]
    # thinking variants that share weights share MMLU-Pro, as the paper's Table 9 notes
    assert info.loc["qwen3-32b", "mmlu_pro"] == info.loc["qwen3-32b-think", "mmlu_pro"]
    assert column(info, "score_source").str.len().min() > 0


def test_models_are_found_with_or_without_their_provider():
    info = read_model_info(PAPER_MODEL_INFO)
    assert info_of(info, "openai:qwen3-8b")["size_b"] == 8
    assert info_of(info, "Qwen/QWEN3-8B")["family"] == "Qwen3"
    with pytest.raises(BayesError, match="not in --model-info"):
        info_of(info, "openai:qwen3-9b")


def test_a_file_named_paper_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"model": ["m"], "family": ["f"], "size_b": [1], "thinking": [0]}).to_csv("paper", index=False)
    assert list(read_model_info("paper").index) == ["m"]
