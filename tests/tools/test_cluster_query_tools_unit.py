"""``samsa log-dirs``, ``get-offsets``, ``delete-records`` and ``broker-api-versions`` without a cluster:
their argument and file parsing with Kafka's messages, the output formats (Kafka's JSON key order,
``NodeApiVersions.toString``), and the partition-leader driver's retries against a fake admin client.
The same tools against a real cluster: tests/tools/test_cluster_query_tools.py."""

from __future__ import annotations

import asyncio
import importlib
import json
from types import SimpleNamespace
from typing import Any

import pytest

from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import DescribeLogDirsResponse, MetadataResponse
from tools import COMMANDS, broker_api_versions, delete_records, get_offsets, log_dirs, partition_leaders
from tools.admin_client import AdminError
from tools.delete_records import DeleteRecordsError, parse_offset_json
from tools.get_offsets import TerseError, parse_offset_spec, parse_rule, parse_rules
from tools.partition_leaders import Failure, TimedOut, exception_class, send_to_leaders


@pytest.mark.parametrize("name", ["log-dirs", "get-offsets", "delete-records", "broker-api-versions"])
def test_registered_as_samsa_commands(name: str) -> None:
    module, function = COMMANDS[name][0].split(":")
    assert callable(getattr(importlib.import_module(module), function))


# -- get-offsets ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "timestamp"),
    [
        ("latest", -1),
        ("-1", -1),
        ("earliest", -2),
        ("max-timestamp", -3),
        ("earliest-local", -4),
        ("latest-tiered", -5),
        ("1600000000000", 1_600_000_000_000),
        ("+5", 5),
    ],
)
def test_time_values_as_kafkas_offset_specs(value: str, timestamp: int) -> None:
    assert parse_offset_spec(value) == timestamp


@pytest.mark.parametrize("value", ["now", "1.5", "", " 1", "99999999999999999999"])
def test_malformed_time_refused_with_kafkas_message(value: str) -> None:
    with pytest.raises(TerseError, match=f"^Malformed time argument {value}. Please use -1 or latest"):
        parse_offset_spec(value)


@pytest.mark.parametrize(
    ("spec", "topic", "allowed"),
    [
        ("t:1", "t", [1]),
        ("t:1-3", "t", [1, 2]),
        ("t:2-", "t", [2, 3, 4]),
        ("t:-2", "t", [0, 1]),
        ("t", "t", [0, 1, 2, 3, 4]),
        ("t:", "t", [0, 1, 2, 3, 4]),
        (":3", "anything", [3]),
        ("t.*:0", "topic", [0]),
        ("t", "topic", []),  # the regex matches the whole name
    ],
)
def test_topic_partition_patterns_as_kafka(spec: str, topic: str, allowed: list[int]) -> None:
    rule = parse_rule(spec)
    assert [p for p in range(5) if rule.partition_allowed(topic, p)] == allowed


def test_bad_patterns_refused_with_kafkas_messages() -> None:
    with pytest.raises(TerseError, match=r"^Invalid rule specification: t:x$"):
        parse_rule("t:x")
    with pytest.raises(TerseError, match=r"is an invalid regex\.$"):
        parse_rule("t[:1")
    args = SimpleNamespace(topic_partitions=None, topic="t", partitions="1,,2")
    with pytest.raises(
        TerseError, match=r"^--partitions expects a comma separated list of numeric partition ids"
    ):
        parse_rules(args)  # type: ignore[arg-type]
    args = SimpleNamespace(topic_partitions="t:1", topic=None, partitions="1")
    with pytest.raises(TerseError, match=r"^--topic-partitions cannot be used with --topic or --partitions$"):
        parse_rules(args)  # type: ignore[arg-type]


def test_partitions_option_keeps_only_those_ids_and_drops_trailing_commas() -> None:
    (rule,) = parse_rules(SimpleNamespace(topic_partitions=None, topic=None, partitions="0,3,"))  # type: ignore[arg-type]
    assert [p for p in range(5) if rule.partition_allowed("any", p)] == [0, 3]


def test_get_offsets_without_arguments_prints_usage_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert get_offsets.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("An interactive shell for getting topic-partition offsets.\n")
    assert "--topic-partitions" in err


def test_get_offsets_bad_bootstrap_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert get_offsets.main(["--bootstrap-server", "nohostport"]) == 1
    assert capsys.readouterr().err.startswith("Invalid url in bootstrap.servers: nohostport\n")


# -- delete-records ---------------------------------------------------------------------------------


def test_offset_json_parsed_as_kafka() -> None:
    text = '{"partitions":[{"topic":"a","partition":0,"offset":5},{"topic":"b","partition":2,"offset":-1}]}'
    assert parse_offset_json(text) == {("a", 0): 5, ("b", 2): -1}
    text = '{"partitions":[{"topic":"a","partition":0,"offset":5}],"version":1}'
    assert parse_offset_json(text) == {("a", 0): 5}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "The input string is not a valid JSON"),
        ("", "The input string is not a valid JSON"),
        ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
        ('{"version":1}', "Missing partitions field"),
        ('{"partitions":[{"partition":0,"offset":1}]}', "No such field exists: `topic`"),
        (
            '{"partitions":[{"topic":"a","partition":"0","offset":1}]}',
            'Expected `Integer` value, received "0"',
        ),
        ('{"partitions":[{"topic":"a","partition":0,"offset":1.5}]}', "Expected `Long` value, received 1.5"),
        ('{"partitions":{"topic":"a"}}', 'Expected JSON array, received {"topic":"a"}'),
        ("[1]", "Expected JSON object, received [1]"),
        (
            '{"partitions":[{"topic":"a","partition":0,"offset":1},{"topic":"a","partition":0,"offset":2},'
            '{"topic":"b","partition":1,"offset":1},{"topic":"b","partition":1,"offset":1}]}',
            "Offset json file contains duplicate topic partitions: a-0,b-1",
        ),
    ],
)
def test_bad_offset_json_refused_with_kafkas_messages(text: str, message: str) -> None:
    with pytest.raises(DeleteRecordsError) as info:
        parse_offset_json(text)
    assert str(info.value) == message


def test_delete_records_missing_options_print_usage(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    assert delete_records.main(["--bootstrap-server", "localhost:9092"]) == 1
    assert capsys.readouterr().err.startswith('Missing required argument "[offset-json-file]"\n')
    missing = tmp_path / "missing.json"
    assert (
        delete_records.main(["--bootstrap-server", "localhost:9092", "--offset-json-file", str(missing)]) == 1
    )
    assert capsys.readouterr().err == f"{missing}: No such file or directory\n"


# -- log-dirs ---------------------------------------------------------------------------------------


def test_log_dirs_json_has_kafkas_key_order_and_error_classes() -> None:
    partition = DescribeLogDirsResponse.DescribeLogDirsPartition
    results = {
        2: [
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.NONE,
                log_dir="/data/b",
                topics=[
                    DescribeLogDirsResponse.DescribeLogDirsTopic(
                        name="t",
                        partitions=[
                            partition(
                                partition_index=1, partition_size=10, offset_lag=0, is_future_key=False
                            ),
                            partition(partition_index=0, partition_size=20, offset_lag=3, is_future_key=True),
                        ],
                    ),
                    DescribeLogDirsResponse.DescribeLogDirsTopic(
                        name="u",
                        partitions=[
                            partition(partition_index=0, partition_size=1, offset_lag=0, is_future_key=False)
                        ],
                    ),
                ],
            ),
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir="/data/a", topics=[]
            ),
        ]
    }
    assert log_dirs.log_dirs_json(results, set()) == (
        '{"brokers":[{"broker":2,"logDirs":['
        '{"partitions":[],"error":"org.apache.kafka.common.errors.KafkaStorageException","logDir":"/data/a"},'
        '{"partitions":[{"partition":"t-0","size":20,"offsetLag":3,"isFuture":true},'
        '{"partition":"t-1","size":10,"offsetLag":0,"isFuture":false},'
        '{"partition":"u-0","size":1,"offsetLag":0,"isFuture":false}],"error":null,"logDir":"/data/b"}]}],'
        '"version":1}'
    )
    only_u = json.loads(log_dirs.log_dirs_json(results, {"u"}))
    assert [p["partition"] for d in only_u["brokers"][0]["logDirs"] for p in d["partitions"]] == ["u-0"]


def test_log_dirs_requires_describe_and_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    assert log_dirs.main(["--bootstrap-server", "localhost:9092"]) == 1
    assert capsys.readouterr().err.startswith('Missing required argument "[describe]"\n')
    assert log_dirs.main(["--describe"]) == 1
    assert capsys.readouterr().err.startswith('Missing required argument "[bootstrap-server]"\n')
    assert log_dirs.main(["--describe", "--bootstrap-server", "localhost:9092", "--broker-list", "1,x"]) == 1
    assert capsys.readouterr().err == 'For input string: "x"\n'


# -- broker-api-versions ----------------------------------------------------------------------------


def test_api_version_lines_as_kafkas_node_api_versions() -> None:
    produce = api(ApiKey.PRODUCE)
    assert (
        broker_api_versions.api_version_text(0, 0, 11)
        == f"Produce(0): 0 to 11 [usable: {min(11, produce.valid_versions.high)}]"
    )
    assert broker_api_versions.api_version_text(47, 0, 0) == "OffsetDelete(47): 0 [usable: 0]"
    assert (
        broker_api_versions.api_version_text(0, 100, 101) == "Produce(0): 100 to 101 [unusable: node too new]"
    )
    low = api(ApiKey.FETCH).valid_versions.low
    if low > 0:
        assert broker_api_versions.api_version_text(1, 0, low - 1).endswith("[unusable: node too old]")
    assert broker_api_versions.api_version_text(999, 0, 2) == "UNKNOWN(999): 0 to 2"


def test_node_api_versions_lists_every_known_api_in_key_order() -> None:
    text = broker_api_versions.node_api_versions({18: (0, 4), 0: (0, 11)})
    lines = text.split("\n")
    assert lines[0] == "("
    assert lines[-1] == ")"
    assert lines[1].startswith("\tProduce(0): 0 to 11 [usable: ")
    assert lines[2] == "\tFetch(1): UNSUPPORTED,"
    assert len(lines) == len(ApiKey) + 2
    assert all(line.endswith(",") for line in lines[1:-2]) and not lines[-2].endswith(",")
    assert broker_api_versions.node_text("h", 9092, 1, None) == "h:9092 (id: 1 rack: null)"
    assert broker_api_versions.node_text("h", 9092, 1, "r1") == "h:9092 (id: 1 rack: r1)"


def test_broker_api_versions_requires_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    assert broker_api_versions.main(["--command-config", "x"]) == 1
    assert capsys.readouterr().err.startswith('Missing required argument "[bootstrap-server]"\n')


# -- the partition-leader driver --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, "NotLeaderOrFollowerException"),
        (ErrorCode.KAFKA_STORAGE_ERROR, "KafkaStorageException"),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "TopicAuthorizationException"),
        (ErrorCode.REQUEST_TIMED_OUT, "TimeoutException"),
        (ErrorCode.UNKNOWN_SERVER_ERROR, "UnknownServerException"),
        (ErrorCode.OFFSET_OUT_OF_RANGE, "OffsetOutOfRangeException"),
        (ErrorCode.POLICY_VIOLATION, "PolicyViolationException"),
    ],
)
def test_error_codes_named_as_kafkas_exceptions(code: int, name: str) -> None:
    assert exception_class(code) == f"org.apache.kafka.common.errors.{name}"


class FakeAdmin:
    """Metadata from ``leaders`` (topic -> partition -> leader, -1: none; a missing topic is unknown);
    each request answered by ``answer(leader, partitions)`` -> {tp: error code}."""

    def __init__(self, leaders: dict[str, dict[int, int]], answer: Any) -> None:
        self.leaders = leaders
        self.answer = answer
        self.sent: list[tuple[int, list[tuple[str, int]]]] = []

    async def metadata(self, topics: list[str]) -> Any:
        def topic(name: str) -> Any:
            if name not in self.leaders:
                return MetadataResponse.MetadataResponseTopic(
                    name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partitions=[]
                )
            return MetadataResponse.MetadataResponseTopic(
                name=name,
                error_code=ErrorCode.NONE,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        partition_index=p,
                        leader_id=leader,
                        error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                    )
                    for p, leader in self.leaders[name].items()
                ],
            )

        return SimpleNamespace(topics=[topic(t) for t in topics])

    async def send_to_node(self, key: ApiKey, body: Any, node: int) -> Any:
        self.sent.append((node, body))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer(node, body)


def _drive(admin: FakeAdmin, partitions: list[tuple[str, int]], timeout_ms: int = 5000) -> dict[Any, Any]:
    return asyncio.run(
        send_to_leaders(
            admin,  # type: ignore[arg-type]
            ApiKey.LIST_OFFSETS,
            partitions,
            lambda tps: tps,
            lambda response: response,
            timeout_ms=timeout_ms,
            call="listOffsets",
        )
    )


def test_driver_follows_a_moved_leader_then_answers() -> None:
    leaders = {"t": {0: 1, 1: 2}}

    def answer(node: int, tps: list[tuple[str, int]]) -> list[Any]:
        if node == 1 and leaders["t"][0] == 1:
            leaders["t"][0] = 2  # the leader moved: this broker says so once
            return [(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER, None) for tp in tps]
        return [(tp, ErrorCode.NONE, node * 100 + tp[1]) for tp in tps]

    admin = FakeAdmin(leaders, answer)
    assert _drive(admin, [("t", 0), ("t", 1)]) == {("t", 0): 200, ("t", 1): 201}
    assert [node for node, _ in admin.sent] == [1, 2, 2]


def test_driver_fails_fatal_errors_unknown_topics_and_partitions_at_once() -> None:
    def answer(node: int, tps: list[tuple[str, int]]) -> list[Any]:
        return [(tp, ErrorCode.OFFSET_OUT_OF_RANGE, None) for tp in tps]

    results = _drive(FakeAdmin({"t": {0: 1}}, answer), [("t", 0), ("t", 7), ("gone", 0)])
    assert results[("t", 0)] == Failure(
        ErrorCode.OFFSET_OUT_OF_RANGE,
        "The requested offset is not within the range of offsets maintained by the server.",
    )
    assert str(results[("t", 7)]).startswith(
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
    )
    assert str(results[("gone", 0)]) == (
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Failed to fetch metadata for "
        "partition gone-0 because metadata for topic `gone` could not be found"
    )


def test_driver_times_out_a_partition_without_leader_with_progress_on_stderr(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partition_leaders, "PROGRESS_INTERVAL", 0.2)
    results = _drive(FakeAdmin({"t": {0: -1}}, lambda n, tps: []), [("t", 0)], timeout_ms=500)
    assert isinstance(results[("t", 0)], TimedOut)
    assert str(results[("t", 0)]).startswith("org.apache.kafka.common.errors.TimeoutException: ")
    err = capsys.readouterr().err
    assert "Waiting for 1 partition(s)" in err
    assert "t-0 (LEADER_NOT_AVAILABLE)" in err


def test_driver_retries_an_unreachable_leader_until_the_deadline() -> None:
    admin = FakeAdmin({"t": {0: 1}}, AdminError("connection refused"))
    results = _drive(admin, [("t", 0)], timeout_ms=300)
    assert isinstance(results[("t", 0)], TimedOut)
    assert "broker 1 cannot be reached" in results[("t", 0)].message
    assert len(admin.sent) > 1


# -- --command-config -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "argv", "prefix"),
    [
        (get_offsets, ["--bootstrap-server", "localhost:1"], "Error occurred: "),
        (log_dirs, ["--describe", "--bootstrap-server", "localhost:1"], ""),
        (broker_api_versions, ["--bootstrap-server", "localhost:1"], ""),
    ],
)
def test_unreadable_command_config_fails_before_connecting(
    tool: Any, argv: list[str], prefix: str, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    missing = tmp_path / "client.properties"
    assert tool.main([*argv, "--command-config", str(missing)]) == 1
    assert capsys.readouterr().err == f"{prefix}{missing}: No such file or directory\n"


def test_default_api_timeout_read_from_command_config() -> None:
    assert partition_leaders.api_timeout_ms({}) == 60_000
    assert partition_leaders.api_timeout_ms({"default.api.timeout.ms": "1500"}) == 1500
    with pytest.raises(AdminError, match=r"default\.api\.timeout\.ms"):
        partition_leaders.api_timeout_ms({"default.api.timeout.ms": "soon"})
