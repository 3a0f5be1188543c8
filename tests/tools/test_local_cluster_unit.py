"""LocalCluster and ``samsa up`` without starting a process: settings (defaults, base file, overrides per
broker and for the controllers), node lookup, the data dir's lock, the refusal of a data dir of a larger
cluster, wiping, the saved overrides of ``samsa up``, and ``samsa pipeline``'s unreachable bootstrap."""

from __future__ import annotations

import argparse
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import unreachable
from tools import up
from tools.local_cluster import (
    LocalCluster,
    LocalClusterError,
    default_broker_config,
    owner_running,
    wipe_data_dir,
)


@pytest.mark.parametrize(("brokers", "replication", "min_isr"), [(1, 1, 1), (2, 2, 2), (3, 3, 2), (5, 3, 2)])
def test_replication_defaults_are_min_3_and_brokers(brokers: int, replication: int, min_isr: int) -> None:
    config = default_broker_config(brokers)
    for key in ("default.replication.factor", "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor"):  # fmt: skip
        assert config[key] == str(replication)
    assert config["transaction.state.log.min.isr"] == str(min_isr)
    assert config["zookeeper.session.timeout.ms"] == "6000"


def test_broker_settings_base_file_then_own_then_overrides_then_per_broker(tmp_path: Path) -> None:
    base = tmp_path / "server.properties"
    base.write_text("broker.id=7\nlog.dirs=/tmp/shared\nnum.partitions=5\nlog.retention.hours=1\n"
                    "default.replication.factor=1\n")  # fmt: skip
    cluster = LocalCluster(
        tmp_path / "run",
        brokers=3,
        config_file=base,
        overrides={"num.partitions": 2, "log.cleaner.enable": False},
        broker_overrides={2: {"num.partitions": "4", "broker.rack": "b"}},
    )
    one, two = cluster.broker(1).config(), cluster.broker(2).config()
    assert one["broker.id"] == "1" and two["broker.id"] == "2"
    assert one["log.dirs"] == str(tmp_path.resolve() / "run" / "broker-1" / "data")
    assert one["listeners"] == f"PLAINTEXT://127.0.0.1:{cluster.broker(1).port}"
    assert one["zookeeper.connect"] == cluster.zookeeper_connect
    assert one["num.partitions"] == "2" and two["num.partitions"] == "4"
    assert "broker.rack" not in one and two["broker.rack"] == "b"
    assert one["log.retention.hours"] == "1"  # from the file
    assert one["default.replication.factor"] == "1"  # the file beats the cluster's defaults
    assert one["offsets.topic.replication.factor"] == "3"
    assert one["log.cleaner.enable"] == "false"
    assert cluster.ignored_file_keys() == ["broker.id", "log.dirs"]
    ports = {b.port for b in cluster.brokers.values()} | {c.port for c in cluster.controllers.values()}
    assert len(ports) == 4


def test_controllers_get_the_shared_settings_and_their_own(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "run",
        controllers=2,
        zookeeper="127.0.0.1:1/chroot",
        overrides={"unclean.leader.election.enable": "true", "num.partitions": "2"},
        controller_overrides={"auto.leader.rebalance.enable": "false"},
        session_timeout_ms=3000,
    )
    config = cluster.controller(9002).config()
    assert config["controller.id"] == "9002"
    assert config["zookeeper.connect"] == "127.0.0.1:1/chroot"
    assert config["unclean.leader.election.enable"] == "true"
    assert "num.partitions" not in config  # a broker's setting only
    assert config["auto.leader.rebalance.enable"] == "false"
    assert config["zookeeper.session.timeout.ms"] == "3000"
    assert cluster.zookeeper_node is None


def test_nodes_by_role_and_name(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "run", brokers=2, controllers=2)
    assert cluster.node("broker-2") is cluster.broker(2)
    assert cluster.node("controller", 9001) is cluster.controller(9001)
    assert cluster.node("zookeeper") is cluster.zookeeper_node
    assert [n.name for n in cluster.nodes] == [
        "zookeeper", "controller-9001", "controller-9002", "broker-1", "broker-2",
    ]  # fmt: skip
    with pytest.raises(LocalClusterError, match="no broker 3"):
        cluster.node("broker", 3)
    assert cluster.bootstrap == f"127.0.0.1:{cluster.broker(1).port},127.0.0.1:{cluster.broker(2).port}"
    with pytest.raises(LocalClusterError, match="broker 4"):
        LocalCluster(tmp_path / "other", brokers=2, broker_overrides={4: {"a": "b"}})
    with pytest.raises(LocalClusterError):
        LocalCluster(tmp_path / "other", host="0.0.0.0")
    assert "sandbox" in (cluster.partition_unavailable or "")
    with pytest.raises(LocalClusterError, match="unavailable"):
        cluster.partition(["broker-1"], ["broker-2"])


def _fake_broker_data(data_dir: Path, *broker_ids: int) -> None:
    for broker_id in broker_ids:
        meta = data_dir / f"broker-{broker_id}" / "data" / "meta.properties"
        meta.parent.mkdir(parents=True)
        meta.write_text(f"broker.id={broker_id}\nversion=0\n")


def test_a_data_dir_of_more_brokers_is_refused_and_fresh_wipes_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "run"
    _fake_broker_data(data_dir, 1, 2, 3)
    cluster = LocalCluster(data_dir, brokers=1)
    with pytest.raises(LocalClusterError, match=r"brokers \[1, 2, 3\].*brokers \[2, 3\]"):
        cluster.claim_data_dir()
    assert not owner_running(data_dir)  # the lock was let go
    assert cluster.data_dir_brokers() == {1, 2, 3}

    fresh = LocalCluster(data_dir, brokers=1, fresh=True)
    fresh.claim_data_dir()
    try:
        assert owner_running(data_dir)
        assert fresh.data_dir_brokers() == set()
        with pytest.raises(LocalClusterError, match="another cluster is running"):
            LocalCluster(data_dir).claim_data_dir()
        with pytest.raises(LocalClusterError, match="running"):
            wipe_data_dir(data_dir)
    finally:
        fresh.stop()
    assert not owner_running(data_dir)


def test_wiping_refuses_a_directory_a_cluster_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(LocalClusterError, match="did not write"):
        wipe_data_dir(tmp_path)
    assert (tmp_path / "notes.txt").exists()
    data_dir = tmp_path / "run"
    _fake_broker_data(data_dir, 1)
    (data_dir / "pipeline").mkdir()  # other things kept in a cluster's dir go with it
    wipe_data_dir(data_dir)
    assert not data_dir.exists()


def _args(**given: object) -> argparse.Namespace:
    defaults: dict[str, object] = {"override": [], "broker_override": [], "controller_override": [],
                                   "config": None, "brokers": 3}  # fmt: skip
    return argparse.Namespace(**{**defaults, **given})


def test_up_override_flags_are_parsed_and_checked() -> None:
    assert up.parse_overrides(["num.partitions=2", "log.retention.ms=600000"]) == {
        "num.partitions": "2",
        "log.retention.ms": "600000",
    }
    with pytest.raises(up.UpError, match="KEY=VALUE"):
        up.parse_overrides(["num.partitions"])
    with pytest.raises(up.UpError, match="--broker-override ID:KEY=VALUE"):
        up.parse_overrides(["log.dirs=/tmp/x"])
    assert up.parse_broker_overrides(["2:broker.rack=b", "2:num.partitions=3"], 3) == {
        2: {"broker.rack": "b", "num.partitions": "3"}
    }
    with pytest.raises(up.UpError, match=r"brokers 1\.\.3"):
        up.parse_broker_overrides(["4:broker.rack=b"], 3)
    with pytest.raises(up.UpError, match="ID:KEY=VALUE"):
        up.parse_broker_overrides(["broker.rack=b"], 3)


def test_up_keeps_the_saved_overrides_unless_new_ones_are_given() -> None:
    saved = {"overrides": {"num.partitions": "2"}, "broker_overrides": {"2": {"broker.rack": "b"}},
             "controller_overrides": {}, "config": None}  # fmt: skip
    settings, kept = up.merge_saved(_args(), saved)
    assert settings["overrides"] == {"num.partitions": "2"}
    assert settings["broker_overrides"] == {2: {"broker.rack": "b"}}
    assert kept == ["--override num.partitions=2", "--broker-override 2:broker.rack=b"]

    settings, kept = up.merge_saved(_args(override=["log.retention.ms=1000"]), saved)
    assert settings["overrides"] == {"log.retention.ms": "1000"}  # replaced, kind by kind
    assert kept == ["--broker-override 2:broker.rack=b"]

    with pytest.raises(up.UpError, match="beyond --brokers 1"):
        up.merge_saved(_args(brokers=1), saved)


def test_up_validates_every_nodes_settings_before_starting(tmp_path: Path) -> None:
    up.validate(LocalCluster(tmp_path / "run", brokers=2, overrides={"num.partitions": "2"}))
    with pytest.raises(up.UpError, match="broker 1's settings: unknown configuration setting: no\\.such"):
        up.validate(LocalCluster(tmp_path / "run", overrides={"no.such": "1"}))
    with pytest.raises(up.UpError, match=r"broker 2's settings: num\.partitions"):
        up.validate(LocalCluster(tmp_path / "run", brokers=2, broker_overrides={2: {"num.partitions": "x"}}))
    with pytest.raises(up.UpError, match="controller 9001's settings"):
        up.validate(LocalCluster(tmp_path / "run", controller_overrides={"no.such": "1"}))


def test_up_node_commands_need_a_cluster_and_name_its_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert up.main(["status", "--data-dir", str(tmp_path)]) == 1
    assert "no cluster has run" in capsys.readouterr().err
    state = {
        "owner_pid": 1,
        "zookeeper": "127.0.0.1:1",
        "nodes": [
            {"role": "zookeeper", "id": 1, "name": "zookeeper", "pid": None, "host": "127.0.0.1", "port": 1,
             "log": str(tmp_path / "zookeeper" / "zookeeper.log")},
            {"role": "broker", "id": 1, "name": "broker-1", "pid": None, "host": "127.0.0.1", "port": 2,
             "log": str(tmp_path / "broker-1" / "broker.log")},
        ],
    }  # fmt: skip
    (tmp_path / "cluster.json").write_text(json.dumps(state))
    assert up.main(["status", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no samsa up is running" in out, out
    assert re.search(r"^broker +1 +- +not running +127\.0\.0\.1:2 ", out, re.M), out
    assert up.main(["kill", "broker", "3", "--data-dir", str(tmp_path)]) == 1
    assert "no broker 3 (broker ids: [1])" in capsys.readouterr().err
    assert up.main(["stop", "broker", "1", "--data-dir", str(tmp_path)]) == 1
    assert "broker 1 is not running" in capsys.readouterr().err
    assert up.main(["start", "broker", "1", "--data-dir", str(tmp_path)]) == 1
    assert "no samsa up is running" in capsys.readouterr().err


def test_pipeline_names_the_address_when_no_broker_answers() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        assert unreachable(f"127.0.0.1:{port}") == (
            f"no broker answers at 127.0.0.1:{port} (`make run` starts a cluster on 127.0.0.1:9092; "
            "--bootstrap HOST:PORT names another)"
        )
        s.listen()
        assert unreachable(f"127.0.0.1:{port}") is None


def test_the_zookeeper_views_retry_a_call_that_meets_an_expired_session() -> None:
    """kazoo fails a call queued while it reconnects to a new session (SessionExpiredError); the views'
    client sends its reads and writes through kazoo's command retry, which takes them to the new one."""
    from kazoo.exceptions import SessionExpiredError
    from kazoo.retry import KazooRetry

    from tools.local_cluster import _RetriedZk

    class Reconnecting:
        """A kazoo client whose first call meets the expired session (a stand-in for ZooKeeper)."""

        calls = 0

        def retry(self, func: Any, *args: Any, **kwargs: Any) -> Any:
            return KazooRetry(max_tries=3, delay=0, ignore_expire=True)(func, *args, **kwargs)

        def get(self, path: str) -> tuple[bytes, None]:
            self.calls += 1
            if self.calls == 1:
                raise SessionExpiredError()
            return b"state of " + path.encode(), None

        def stop(self) -> str:
            return "stopped"

    client = Reconnecting()
    zk = _RetriedZk(client)
    assert zk.get("/brokers/ids/1") == (b"state of /brokers/ids/1", None)
    assert client.calls == 2
    assert zk.stop() == "stopped"  # everything else is the client's own
