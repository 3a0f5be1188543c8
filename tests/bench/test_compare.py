"""The pure part of ``bench/compare.py`` (``make bench``): reading run-bench's JSON, ratios Samsa/Tansu,
the issue's goals and the tables. No process is started."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import compare


def run_bench_doc(figures: dict[str, float | None], client: str = "rdkafka_performance") -> dict[str, Any]:
    """A document as ``run-bench --json`` writes it."""
    return {
        "bootstrap": "127.0.0.1:1",
        "label": "x",
        "client": client,
        "quick": True,
        "reps": 1,
        "load_start": 1.0,
        "load_end": 1.5,
        "time": "2026-11-22T10:00:00",
        "figures": [
            {"name": n, "value": v, "unit": "msg/s", "runs": None, "load1": 1.0, "note": None}
            for n, v in figures.items()
        ],
    }


TANSU = {
    "produce_100B_acks1_rate": 2_000_000.0,
    "produce_1KB_acks1_rate": 300_000.0,
    "produce_100B_acks1_per_broker_core": 2_000_000.0,  # 0.5 cpu-s per million
    "produce_100B_acksall_per_broker_core": 2_000_000.0,
    "produce_1KB_acks1_per_broker_core": 300_000.0,
    "produce_1KB_acksall_per_broker_core": 300_000.0,
    "consume_100B_rate": 2_000_000.0,
    "consume_1KB_rate": 400_000.0,
    "e2e_latency_p50": 180.0,
    "e2e_latency_p99": 450.0,
}
SAMSA = {
    "produce_100B_acks1_rate": 1_500_000.0,  # 0.75: below 0.8
    "produce_1KB_acks1_rate": 330_000.0,  # 1.1
    "produce_100B_acks1_per_broker_core": 1_000_000.0,  # 1 cpu-s per million: exactly 2x, met
    "produce_100B_acksall_per_broker_core": 500_000.0,  # 4x: not met
    "produce_1KB_acks1_per_broker_core": 300_000.0,
    "produce_1KB_acksall_per_broker_core": None,
    "consume_100B_rate": None,  # a workload that failed
    "e2e_latency_p50": 101.0,  # run-bench's batching consumer: not what the goals judge
    "e2e_latency_p99": 199.0,
    "e2e_probe_p50": 1.2,
    "e2e_probe_p99": 30.0,
    "produce_100B_acks1_conns200_over_base": 0.96,
}
CLUSTER = {"produce_1KB_acksall_over_acks1": 0.41, "produce_100B_acksall_over_acks1": 0.91}


def verdicts(goals: list[compare.Goal]) -> dict[str, tuple[float | None, str]]:
    return {g.spec.text: (g.value, g.status) for g in goals}


def test_parse_run_maps_names_to_values_and_unmeasured_to_none() -> None:
    doc = run_bench_doc({"a": 3, "b": None, "c": float("nan"), "d": 2.5})
    assert compare.parse_run(doc) == {"a": 3.0, "b": None, "c": None, "d": 2.5}
    assert compare.parse_run(None) == {}
    # What run-bench's json.dump writes for NaN survives the round trip as missing, too.
    assert compare.parse_run(json.loads(json.dumps(doc)))["c"] is None


NO_PROBE = {
    "e2e_probe_p50": None,
    "e2e_probe_p99": None,
    "e2e_probe_p999": None,
    "e2e_probe_ack_p99": None,
    "consume_100B_probe_rate": None,
    "consume_100B_probe_idle_share": None,
    "consume_100B_probe_short_backoff_rate": None,
}


def test_broker_figures_adds_the_peak_rss_the_memory_probe_and_the_latency_probe() -> None:
    entry: dict[str, Any] = {"run_bench": run_bench_doc({"a": 1.0}), "peak_rss_mb": 80.5}
    assert compare.broker_figures(entry) == {
        "a": 1.0,
        "broker_peak_rss_MB": 80.5,
        "rss_1000_partitions_200_conns_MB": None,
        **NO_PROBE,
    }
    entry["rss_1000_partitions_200_conns_mb"] = 63.0
    entry["e2e_probe"] = {"p50": 0.9, "p99": 2.8, "p999": 5.5, "ack_p99": 3.0, "received": 75000}
    figures = compare.broker_figures(entry)
    assert figures["rss_1000_partitions_200_conns_MB"] == 63.0
    assert (figures["e2e_probe_p50"], figures["e2e_probe_p99"], figures["e2e_probe_ack_p99"]) == (
        0.9,
        2.8,
        3.0,
    )
    assert "e2e_probe_received" not in figures
    entry["consume_backoff"] = {"rate": 1.0e6, "idle_share": 0.47, "short_backoff_rate": 2.3e6, "runs": {}}
    figures = compare.broker_figures(entry)
    assert figures["consume_100B_probe_idle_share"] == 0.47
    assert figures["consume_100B_probe_short_backoff_rate"] == 2.3e6
    assert "consume_100B_probe_runs" not in figures
    assert compare.broker_figures({"run_bench": None, "error": "no"}) == {
        "broker_peak_rss_MB": None,
        "rss_1000_partitions_200_conns_MB": None,
        **NO_PROBE,
    }
    assert compare.broker_figures(None) is None


def test_ratio_and_cpu_per_million() -> None:
    assert compare.ratio(3.0, 2.0) == 1.5
    assert compare.ratio(None, 2.0) is None
    assert compare.ratio(3.0, None) is None
    assert compare.ratio(3.0, 0.0) is None
    metric = compare.Metric("cpu", "cpu-s/M msgs", "x_per_broker_core", per_million=True)
    assert metric.value({"x_per_broker_core": 250_000.0}) == pytest.approx(4.0)
    assert metric.value({"x_per_broker_core": None}) is None
    assert metric.value({}) is None
    assert metric.value(None) is None


def test_goals_against_tansu_absolute_and_missing() -> None:
    got = verdicts(compare.evaluate_goals(TANSU, SAMSA, None))
    assert got["produce 1 KiB acks=1, Samsa/Tansu"] == (pytest.approx(1.1), "met")
    assert got["produce 100 B acks=1, Samsa/Tansu"] == (pytest.approx(0.75), "not met")
    assert got["consume 100 B, Samsa/Tansu"] == (None, "missing")
    assert got["consume 1 KiB, Samsa/Tansu"] == (None, "missing")
    cpu = "broker CPU-s per million msgs, produce {}, Samsa/Tansu"
    assert got[cpu.format("100 B acks=1")] == (pytest.approx(2.0), "met")
    assert got[cpu.format("100 B acks=all")] == (pytest.approx(4.0), "not met")
    assert got[cpu.format("1 KiB acks=1")] == (pytest.approx(1.0), "met")
    assert got[cpu.format("1 KiB acks=all")] == (None, "missing")
    assert got["e2e latency p50 at 5,000 msg/s of 1 KiB, ms"] == (1.2, "met")
    assert got["e2e latency p99 at 5,000 msg/s of 1 KiB, ms"] == (30.0, "not met")
    assert got["200 idle conns: produce 100 B with / without"] == (0.96, "met")
    assert got["3 brokers RF=3: acks=all / acks=1, 1 KiB"] == (None, "not run")


def test_cluster_goals() -> None:
    got = verdicts(compare.evaluate_goals(TANSU, SAMSA, CLUSTER))
    assert got["3 brokers RF=3: acks=all / acks=1, 1 KiB"] == (0.41, "not met")
    assert got["3 brokers RF=3: acks=all / acks=1, 100 B"] == (0.91, "met")
    got = verdicts(compare.evaluate_goals(TANSU, SAMSA, {}))  # asked for, but its run-bench wrote nothing
    assert got["3 brokers RF=3: acks=all / acks=1, 1 KiB"] == (None, "missing")


def test_a_failed_tansu_run_leaves_every_ratio_missing() -> None:
    for goal in compare.evaluate_goals(None, SAMSA, None):
        if goal.spec.source == "ratio":
            assert goal.status == "missing"


def test_fmt() -> None:
    assert compare.fmt(None) == "—"
    assert compare.fmt(1_704_000.0, "msg/s") == "1.70 M"
    assert compare.fmt(265_400.0, "msg/s") == "265 k"
    assert compare.fmt(450.0, "ms") == "450"
    assert compare.fmt(12.34, "ms") == "12.3"
    assert compare.fmt(1.234, "ratio") == "1.23"
    assert compare.fmt(0.4567) == "0.46"
    assert compare.fmt(0.00667) == "0.0067"
    assert compare.fmt(200.0, "count") == "200"


def test_render_a_report() -> None:
    report = {
        "time": "2026-11-22 10:00",
        "options": {"quick": True, "reps": None, "workloads": "produce,consume", "cluster": True},
        "client": "rdkafka_performance",
        "runs": {
            "tansu": {"bootstrap": "127.0.0.1:1", "run_bench": run_bench_doc(TANSU), "peak_rss_mb": 50.0},
            "samsa": {"bootstrap": "127.0.0.1:2", "run_bench": run_bench_doc(SAMSA), "peak_rss_mb": 90.0},
            "samsa-rf3": {
                "bootstrap": "127.0.0.1:3",
                "run_bench": None,
                "error": "samsa up did not get ready",
            },
        },
    }
    text = compare.render(report)
    lines = text.splitlines()
    assert "--quick, 1 rep(s)" in lines[0]
    assert any("indicative" in line for line in lines)
    assert any("samsa-rf3" in line and "ERROR: samsa up did not get ready" in line for line in lines)
    row = next(line for line in lines if line.startswith("| produce 1 KiB acks=1 "))
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "produce 1 KiB acks=1",
        "msg/s",
        "300 k",
        "330 k",
        "1.10",
    ]
    row = next(line for line in lines if line.startswith("| broker peak RSS"))
    assert row.split("|")[-2].strip() == "1.80"
    assert "Three Samsa brokers, replication factor 3:" in lines
    assert any(line.startswith("| consume 100 B, Samsa/Tansu") and "missing" in line for line in lines)
    # Every row of a table has as many cells as its header.
    blocks = "\n".join(line if line.startswith("|") else "" for line in lines).split("\n\n")
    for block in filter(None, (b.strip("\n") for b in blocks)):
        assert len({row.count("|") for row in block.splitlines()}) == 1, block


def test_render_warns_when_the_load_generators_differ() -> None:
    report = {
        "options": {"reps": 3},
        "runs": {
            "tansu": {"run_bench": run_bench_doc(TANSU, client="c")},
            "samsa": {"run_bench": run_bench_doc(SAMSA, client="py")},
        },
    }
    text = compare.render(report)
    assert "different load generators" in text
    assert "indicative" not in text
    assert "Three Samsa brokers" not in text


def test_render_explains_the_consume_probe_when_it_ran() -> None:
    backoff = {"rate": 1.0e6, "idle_share": 0.47, "short_backoff_rate": 2.38e6}
    report: dict[str, Any] = {
        "options": {"reps": 3},
        "runs": {
            "tansu": {
                "run_bench": run_bench_doc(TANSU),
                "consume_backoff": {**backoff, "short_backoff_rate": 1.85e6},
            },
            "samsa": {"run_bench": run_bench_doc(SAMSA), "consume_backoff": backoff},
        },
    }
    lines = compare.render(report).splitlines()
    row = next(
        line for line in lines if line.startswith("| consume 100 B, probe, fetch.queue.backoff.ms=10 ")
    )
    assert [c.strip() for c in row.strip("|").split("|")][2:] == ["1.85 M", "2.38 M", "1.29"]
    assert any("fetch.queue.backoff.ms (1 s)" in line for line in lines)
    del report["runs"]["samsa"]["consume_backoff"]
    assert "fetch.queue.backoff.ms (1 s)" not in compare.render(report)


def test_every_analysis_a_goal_points_to_is_a_section_of_the_bench_readme() -> None:
    headings = {
        line.lstrip("#").strip() for line in compare.README.read_text().splitlines() if line.startswith("#")
    }
    assert {g.analysis for g in compare.GOALS if g.analysis} <= headings


def test_render_points_a_goal_not_met_to_its_analysis() -> None:
    pointer = (
        "- 200 idle conns: produce 100 B with / without: \"200 idle connections: what run-bench's figure"
    )
    report: dict[str, Any] = {
        "options": {"reps": 3},
        "runs": {"tansu": {"run_bench": run_bench_doc(TANSU)}, "samsa": {"run_bench": run_bench_doc(SAMSA)}},
    }
    assert pointer not in compare.render(report)  # met: 0.96
    report["runs"]["samsa"]["run_bench"] = run_bench_doc(
        {**SAMSA, "produce_100B_acks1_conns200_over_base": 0.8}
    )
    assert pointer in compare.render(report)


def test_without_run_bench_it_says_where_it_looked_and_starts_nothing(tmp_path: Path, capsys) -> None:
    assert compare.main(["--shared", str(tmp_path)]) == 2
    assert f"run-bench and tansu-ref not found in {tmp_path}" in capsys.readouterr().err


def test_replace_readme_block() -> None:
    text = f"intro\n{compare.README_START}\nold table\n{compare.README_END}\nrest\n"
    assert compare.replace_readme_block(text, "new\n") == (
        f"intro\n{compare.README_START}\nnew\n{compare.README_END}\nrest\n"
    )
    with pytest.raises(ValueError):
        compare.replace_readme_block("no markers", "new")
