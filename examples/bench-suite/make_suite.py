"""Write the example benchmark suite of ``cooplab bench science`` (seeded, reproducible):

    python examples/bench-suite/make_suite.py [--seed 17] [--out examples/bench-suite]

writes ``tables/*.csv`` (three synthetic tables), ``suite.jsonl`` (20 closed-form questions, one
JSON object per line: id, question, constraints, format, file_name, level, concepts),
``labels.jsonl`` (id, common_answers: [[name, value], ...], every value computed here from the
tables) and ``answers-correct.jsonl`` (id, answer: the ``@name[value]`` text a correct analyst
ends with, at more digits than the labels, so the precision rule is exercised).

The tables and questions are our own; nothing is taken from a public benchmark. Needs numpy,
pandas and scipy (the ``analysis`` extra).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
from scipy import stats


def tables(seed: int) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    n = 400
    region = rng.choice(["north", "south", "east", "west"], n, p=[0.35, 0.25, 0.25, 0.15])
    units = rng.integers(1, 30, n)
    price = np.round(rng.lognormal(2.8, 0.35, n), 2)
    price[rng.choice(n, 6, replace=False)] = np.round(rng.uniform(80, 140, 6), 2)  # a few luxury orders
    discount = np.round(np.clip(0.004 * units + rng.normal(0, 0.03, n), 0, 0.4), 3)
    p_ret = np.where(region == "west", 0.22, 0.08)
    returned = (rng.random(n) < p_ret).astype(int)
    ship = np.round(1.5 + 0.12 * units + rng.gamma(2.0, 0.8, n), 1)
    orders = pd.DataFrame(
        {
            "order_id": np.arange(1, n + 1),
            "region": region,
            "units": units,
            "unit_price": price,
            "discount": discount,
            "returned": returned,
            "days_to_ship": ship,
        }
    )

    m = 300
    hour = np.arange(m)
    temp = 18 + 4 * np.sin(2 * np.pi * hour / 24) + rng.normal(0, 0.8, m)
    spikes = rng.choice(m, 5, replace=False)
    temp[spikes] += rng.choice([-1, 1], 5) * rng.uniform(9, 14, 5)
    humidity = 70 - 1.6 * (temp - 18) + rng.normal(0, 3, m)
    humidity[rng.choice(m, 12, replace=False)] = np.nan
    pressure = 1013 + rng.normal(0, 4, m).cumsum() / 5
    sensors = pd.DataFrame(
        {
            "hour": hour,
            "temp_c": np.round(temp, 2),
            "humidity": np.round(humidity, 1),
            "pressure_hpa": np.round(pressure, 2),
        }
    )

    k = 240
    fert = rng.choice(["A", "B", "C"], k)
    water = np.round(rng.uniform(200, 800, k), 0)
    sun = np.round(rng.uniform(3, 10, k), 1)
    height = 5 + 0.03 * water + 1.8 * sun + np.select([fert == "A", fert == "B"], [0.0, 2.5], 1.0) + rng.normal(0, 3, k)
    plants = pd.DataFrame(
        {
            "plant": [f"p{i:03d}" for i in range(k)],
            "fertilizer": fert,
            "water_ml": water,
            "sunlight_h": sun,
            "height_cm": np.round(height, 2),
        }
    )
    return {"orders.csv": orders, "sensors.csv": sensors, "plants.csv": plants}


def _iqr_mask(s: pd.Series) -> pd.Series:
    q1, q3 = s.quantile(0.25), s.quantile(0.75)
    return (s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))


def questions(t: dict[str, pd.DataFrame]) -> list[dict]:
    """(item, [(name, value, digits or None)]) pairs: digits = decimals of the label, None = text/integer."""
    o, s, p = t["orders.csv"], t["sensors.csv"], t["plants.csv"]
    rev = o.units * o.unit_price * (1 - o.discount)
    ols_x = np.column_stack([np.ones(len(p)), p.water_ml, p.sunlight_h])
    beta, *_ = np.linalg.lstsq(ols_x, p.height_cm.to_numpy(), rcond=None)
    fitted = ols_x @ beta
    r2 = 1 - ((p.height_cm - fitted) ** 2).sum() / ((p.height_cm - p.height_cm.mean()) ** 2).sum()
    slope, intercept = np.polyfit(o.units, o.days_to_ship, 1)
    welch = stats.ttest_ind(p.height_cm[p.fertilizer == "A"], p.height_cm[p.fertilizer == "B"], equal_var=False)
    # scipy's results are tuples with named fields its types do not show: (statistic, pvalue, ...)
    welch_t, welch_p = cast("tuple[float, float]", (welch[0], welch[1]))
    chi_p = cast(float, stats.chi2_contingency(pd.crosstab(o.region, o.returned))[1])
    sw = stats.shapiro(p.height_cm)
    z = (s.temp_c - s.temp_c.mean()) / s.temp_c.std()
    top = o.region.value_counts()
    temp_clean = s.temp_c[~_iqr_mask(s.temp_c)]
    bins = cast(pd.Series, pd.cut(s.temp_c, bins=3, labels=["low", "mid", "high"]))  # cut of a Series: a Series
    hum_filled = s.humidity.fillna(s.humidity.median())
    pair = cast(pd.DataFrame, s[["temp_c", "humidity"]]).dropna()  # a list of columns selects a DataFrame
    r_th = pair.corr().iloc[0, 1]
    items = [
        (
            "orders.csv",
            "easy",
            ["summary"],
            "What is the mean unit price of all orders?",
            "Use every row. Round to 2 decimal places.",
            [("mean_unit_price", o.unit_price.mean(), 2)],
        ),
        (
            "orders.csv",
            "easy",
            ["summary"],
            "What is the median number of days to ship?",
            "Use every row. Round to 1 decimal place.",
            [("median_days", o.days_to_ship.median(), 1)],
        ),
        (
            "orders.csv",
            "easy",
            ["summary"],
            "Which region has the most orders, and how many orders does it have?",
            "Give the region name as it is written in the data and the count as an integer.",
            [("top_region", top.index[0], None), ("top_region_orders", int(top.iloc[0]), 0)],
        ),
        (
            "sensors.csv",
            "medium",
            ["summary", "missing values"],
            "How many humidity readings are missing, and what is the mean humidity after filling the missing readings "
            "with the median humidity?",
            "Use the median of the observed readings. Round the mean to 2 decimal places.",
            [("missing_humidity", int(s.humidity.isna().sum()), 0), ("mean_humidity_filled", hum_filled.mean(), 2)],
        ),
        (
            "sensors.csv",
            "easy",
            ["summary"],
            "What is the sample standard deviation of the pressure?",
            "Use ddof=1. Round to 3 decimal places.",
            [("std_pressure", s.pressure_hpa.std(), 3)],
        ),
        (
            "sensors.csv",
            "medium",
            ["correlation"],
            "What is the Pearson correlation between temperature and humidity, and is it positive or negative?",
            "Use the rows where both are present. Round the coefficient to 2 decimal places; the direction is the word "
            "positive or negative.",
            [("r_temp_humidity", r_th, 2), ("direction", "negative" if r_th < 0 else "positive", None)],
        ),
        (
            "plants.csv",
            "easy",
            ["correlation"],
            "What is the Pearson correlation between water and plant height?",
            "Round to 2 decimal places.",
            [("r_water_height", p.water_ml.corr(p.height_cm), 2)],
        ),
        (
            "orders.csv",
            "medium",
            ["correlation"],
            "What is the Spearman rank correlation between units and discount?",
            "Round to 2 decimal places.",
            [("rho_units_discount", o.units.corr(o.discount, method="spearman"), 2)],
        ),
        (
            "plants.csv",
            "medium",
            ["distribution"],
            "Is plant height normally distributed according to the Shapiro-Wilk test at the 0.05 level?",
            "Give the p-value rounded to 3 decimal places and the verdict as yes (normal, p >= 0.05) or no.",
            [("shapiro_p", sw.pvalue, 3), ("normal", "yes" if sw.pvalue >= 0.05 else "no", None)],
        ),
        (
            "plants.csv",
            "hard",
            ["distribution"],
            "Do plants with fertilizer A and fertilizer B differ in mean height? Use Welch's t-test.",
            "Compare A against B (A first). Round the t statistic to 2 decimal places and the p-value to 4 decimal "
            "places.",
            [("welch_t", welch_t, 2), ("welch_p", welch_p, 4)],
        ),
        (
            "orders.csv",
            "hard",
            ["distribution"],
            "Are region and returned independent? Use a chi-square test of independence on their contingency table.",
            "Use scipy's default continuity handling. Round the p-value to 3 decimal places; dependent is yes when p < "
            "0.05, else no.",
            [("chi2_p", chi_p, 3), ("dependent", "yes" if chi_p < 0.05 else "no", None)],
        ),
        (
            "sensors.csv",
            "medium",
            ["outliers"],
            "How many temperature readings have an absolute z-score above 3?",
            "Compute the z-score with the mean and the sample standard deviation (ddof=1) of all readings.",
            [("z_outliers", int((z.abs() > 3).sum()), 0)],
        ),
        (
            "orders.csv",
            "medium",
            ["outliers"],
            "How many unit prices are outliers by the 1.5 IQR rule?",
            "Quartiles by pandas' default (linear) quantile; an outlier lies below Q1 - 1.5 IQR or above Q3 + 1.5 IQR.",
            [("iqr_outliers", int(_iqr_mask(o.unit_price).sum()), 0)],
        ),
        (
            "sensors.csv",
            "hard",
            ["outliers", "summary"],
            "What is the mean temperature after removing the outliers of the 1.5 IQR rule?",
            "Quartiles by pandas' default (linear) quantile. Round to 2 decimal places.",
            [("mean_temp_clean", temp_clean.mean(), 2)],
        ),
        (
            "orders.csv",
            "medium",
            ["features"],
            "Define revenue as units x unit_price x (1 - discount). What is the total revenue?",
            "Round to 2 decimal places.",
            [("total_revenue", rev.sum(), 2)],
        ),
        (
            "orders.csv",
            "medium",
            ["features", "summary"],
            "With revenue = units x unit_price x (1 - discount), what is the mean revenue of the east region?",
            "Round to 2 decimal places.",
            [("mean_revenue_east", rev[o.region == "east"].mean(), 2)],
        ),
        (
            "sensors.csv",
            "medium",
            ["features"],
            "Cut the temperature into 3 equal-width bins (pandas.cut with bins=3). How many readings fall into the "
            "highest bin?",
            "Give an integer.",
            [("high_bin_count", int((bins == "high").sum()), 0)],
        ),
        (
            "plants.csv",
            "hard",
            ["model"],
            "Fit an ordinary least squares regression of height_cm on water_ml and sunlight_h (with an intercept). "
            "What are the coefficient of water_ml and the R-squared?",
            "Round the coefficient to 4 decimal places and R-squared to 3 decimal places.",
            [("coef_water", beta[1], 4), ("r_squared", r2, 3)],
        ),
        (
            "plants.csv",
            "hard",
            ["model"],
            "With the least squares model of height_cm on water_ml and sunlight_h (with an intercept), what height "
            "does it predict for water_ml = 500 and sunlight_h = 6?",
            "Round to 2 decimal places.",
            [("predicted_height", beta[0] + 500 * beta[1] + 6 * beta[2], 2)],
        ),
        (
            "orders.csv",
            "medium",
            ["model"],
            "Fit a straight line of days_to_ship against units by least squares. What are the slope and the intercept?",
            "Round both to 3 decimal places.",
            [("slope", slope, 3), ("intercept", intercept, 3)],
        ),
    ]
    out = []
    for k, (file, level, concepts, q, c, answers) in enumerate(items, 1):
        fmt = " ".join(f"@{name}[{'value' if d is not None else 'text'}]" for name, _, d in answers)
        out.append(
            (
                {
                    "id": f"q{k:02d}",
                    "question": q,
                    "constraints": c,
                    "format": fmt,
                    "file_name": file,
                    "level": level,
                    "concepts": concepts,
                },
                answers,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    a = ap.parse_args()
    t = tables(a.seed)
    (a.out / "tables").mkdir(parents=True, exist_ok=True)
    for name, df in t.items():
        df.to_csv(a.out / "tables" / name, index=False)
    t = {name: pd.read_csv(a.out / "tables" / name) for name in t}  # the labels are computed from the files as written
    suite, labels, answers = [], [], []
    for item, ans in questions(t):
        suite.append(item)
        labels.append(
            {"id": item["id"], "common_answers": [[n, str(v) if d is None else f"{float(v):.{d}f}"] for n, v, d in ans]}
        )
        answers.append(
            {
                "id": item["id"],
                "answer": "Final answers: "
                + " ".join(f"@{n}[{v if d is None else (int(v) if d == 0 else f'{float(v):.6f}')}]" for n, v, d in ans),
            }
        )
    for name, rows in (("suite.jsonl", suite), ("labels.jsonl", labels), ("answers-correct.jsonl", answers)):
        with open(a.out / name, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    print(f"wrote {len(suite)} questions on {len(t)} tables to {a.out} (seed {a.seed})")


if __name__ == "__main__":
    main()
