"""``samsa transactions`` without a cluster: the command line (kafka-transactions.sh's subcommands,
options and checks, exit codes), the tables as Kafka prints them, the five commands over a fake admin
(find-hanging's algorithm above all), and the requests' routing and retries over a fake AdminClient."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from types import SimpleNamespace as NS
from typing import Any

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from tools import COMMANDS as SAMSA_COMMANDS
from tools import transactions
from tools.transactions import commands, options
from tools.transactions.admin import (
    AbortSpec,
    ProducerState,
    RequestError,
    TransactionDescription,
    TransactionListing,
    TransactionsAdmin,
)

NOW = 1_700_000_000_000
MIN = 60_000


def parse(*argv: str) -> argparse.Namespace:
    args = options.parser().parse_args(list(argv))
    options.check_args(args)
    return args


# -- the command line ---------------------------------------------------------------------------------


def test_samsa_registers_the_transactions_subcommand() -> None:
    assert SAMSA_COMMANDS["transactions"][0] == "tools.transactions:main"


def test_bootstrap_server_is_taken_before_or_after_the_subcommand() -> None:
    assert parse("--bootstrap-server", "a:1", "list").bootstrap_server == "a:1"
    assert parse("list", "--bootstrap-server", "b:2").bootstrap_server == "b:2"
    assert parse("--bootstrap-server", "a:1", "describe", "--transactional-id", "t").transactional_id == "t"


def test_each_subcommand_takes_kafkas_options() -> None:
    args = parse("--bootstrap-server", "a:1", "list", "--duration-filter", "5000")
    assert (args.command, args.duration_filter) == ("list", 5000)
    args = parse("--bootstrap-server", "a:1", "describe-producers", "--topic", "t", "--partition", "3")
    assert (args.topic, args.partition, args.broker_id) == ("t", 3, None)
    args = parse(
        "--bootstrap-server",
        "a:1",
        "describe-producers",
        "--topic",
        "t",
        "--partition",
        "0",
        "--broker-id",
        "2",
    )
    assert args.broker_id == 2
    args = parse("--bootstrap-server", "a:1", "find-hanging", "--broker-id", "1")
    assert (args.broker_id, args.max_transaction_timeout, args.topic) == (1, 15, None)
    args = parse(
        "--bootstrap-server", "a:1", "find-hanging", "--topic", "t", "--max-transaction-timeout", "0"
    )
    assert (args.topic, args.max_transaction_timeout) == ("t", 0)
    args = parse(
        "--bootstrap-server", "a:1", "abort", "--topic", "t", "--partition", "0", "--start-offset", "7"
    )
    assert (args.start_offset, args.producer_id) == (7, None)
    args = parse(
        "--bootstrap-server", "a:1", "abort", "--topic", "t", "--partition", "0",
        "--producer-id", "9", "--producer-epoch", "2", "--coordinator-epoch", "-1",
    )  # fmt: skip
    assert (args.producer_id, args.producer_epoch, args.coordinator_epoch) == (9, 2, -1)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["list"], "argument --bootstrap-server is required"),
        (["--bootstrap-server", "a:1"], "the following arguments are required: COMMAND"),
        (
            ["--bootstrap-server", "a:1", "describe"],
            "the following arguments are required: --transactional-id",
        ),
        (["--bootstrap-server", "a:1", "abort", "--topic", "t"], "required: --partition"),
        (["--bootstrap-server", "a:1", "describe-producers", "--partition", "0"], "required: --topic"),
        (["--bootstrap-server", "a:1", "find-hanging", "--partition", "x"], "invalid int value: 'x'"),
        (["--bootstrap-server", "a:1", "frobnicate"], "invalid choice: 'frobnicate'"),
        (["--bootstrap-server", "a:1", "list", "--command-config", "f"], "unrecognized arguments"),
    ],
)
def test_a_bad_command_line_prints_the_message_and_usage_and_exits_1(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert transactions.main(argv) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "usage: samsa transactions" in err


def test_a_usage_error_in_a_subcommand_prints_that_subcommands_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert transactions.main(["--bootstrap-server", "a:1", "abort", "--topic", "t"]) == 1
    assert "usage: samsa transactions abort" in capsys.readouterr().err


def test_producer_epoch_must_be_a_short(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--bootstrap-server", "a:1", "abort", "--topic", "t", "--partition", "0", "--producer-id", "1"]
    assert transactions.main([*argv, "--producer-epoch", "40000", "--coordinator-epoch", "0"]) == 1
    assert "invalid short value: '40000'" in capsys.readouterr().err


def test_no_arguments_prints_the_help_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert transactions.main([]) == 1
    err = capsys.readouterr().err
    for command in options.COMMANDS:
        assert command in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["abort", "--topic", "t", "--partition", "0"],
            "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or "
            "above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)",
        ),
        (
            ["abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--coordinator-epoch", "1"],
            "Missing required argument --producer-epoch",
        ),
        (
            ["abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--producer-epoch", "1"],
            "Missing required argument --coordinator-epoch",
        ),
        (
            ["find-hanging"],
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the "
            "search",
        ),
        (
            ["find-hanging", "--broker-id", "1", "--partition", "0"],
            "The --partition argument requires --topic to be provided",
        ),
    ],
)
def test_kafkas_checks_print_the_message_alone_and_exit_1(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert transactions.main(["--bootstrap-server", "127.0.0.1:1", *argv]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == message
    assert captured.out == ""


def test_an_unreachable_cluster_is_an_error_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert transactions.main(["--bootstrap-server", "127.0.0.1:1", "list"]) == 1
    assert "could not connect to any bootstrap server" in capsys.readouterr().err


# -- the tables ---------------------------------------------------------------------------------------


def test_tables_pad_each_column_to_its_widest_cell_and_end_every_cell_with_a_tab() -> None:
    lines = commands.format_table(("A", "Longer"), [["xyz", "1"], ["", "22"]])
    assert lines == ["A  \tLonger\t", "xyz\t1     \t", "   \t22    \t"]


def test_a_table_without_rows_is_its_header() -> None:
    assert commands.format_table(commands.LIST_HEADERS, []) == [
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t"
    ]


# -- the commands over a fake admin -------------------------------------------------------------------


class FakeAdmin:
    """TransactionsAdmin's methods over canned answers; records what was asked."""

    def __init__(self) -> None:
        self.topics: dict[str, list[tuple[int, int, list[int]]]] = {}
        self.listings: dict[int, list[TransactionListing]] = {}
        self.descriptions: dict[str, TransactionDescription | RequestError] = {}
        self.producers: dict[tuple[str, int], list[ProducerState] | RequestError] = {}
        self.aborted: list[AbortSpec] = []
        self.abort_error: RequestError | None = None
        self.calls: list[tuple[str, Any]] = []

    async def list_topics(self) -> list[str]:
        self.calls.append(("list_topics", None))
        return sorted(self.topics)

    async def describe_topics(self, topics: Any) -> dict[str, list[tuple[int, int, list[int]]]]:
        self.calls.append(("describe_topics", sorted(topics)))
        return {t: self.topics[t] for t in topics}

    async def list_transactions(
        self, producer_ids: Any = (), states: Any = (), duration_ms: int | None = None
    ) -> dict[int, list[TransactionListing]]:
        self.calls.append(("list_transactions", (sorted(producer_ids), duration_ms)))
        return {
            b: [x for x in ls if not producer_ids or x.producer_id in producer_ids]
            for b, ls in self.listings.items()
        }

    async def describe_transactions(self, ids: Any) -> dict[str, TransactionDescription | RequestError]:
        self.calls.append(("describe_transactions", sorted(ids)))
        return {
            i: self.descriptions.get(i, RequestError("not found", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
            for i in ids
        }

    async def describe_producers(
        self, partitions: Any, broker_id: int | None = None
    ) -> dict[tuple[str, int], list[ProducerState] | RequestError]:
        self.calls.append(("describe_producers", (sorted(partitions), broker_id)))
        return {tp: self.producers.get(tp, []) for tp in partitions}

    async def abort_transaction(self, spec: AbortSpec) -> None:
        if self.abort_error is not None:
            raise self.abort_error
        self.aborted.append(spec)


async def run(admin: FakeAdmin, *argv: str) -> str:
    args = parse("--bootstrap-server", "a:1", *argv)
    out = io.StringIO()
    await commands.COMMANDS[args.command](admin, args, out, lambda: NOW)  # type: ignore[arg-type]
    return out.getvalue()


def cells(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("\t")[:-1]] for line in text.splitlines()]


def producer(
    pid: int, start: int | None, last_ts: int = NOW - 30 * MIN, coordinator_epoch: int | None = 3
) -> ProducerState:
    return ProducerState(pid, 4, 17, last_ts, coordinator_epoch, start)


async def test_list_prints_every_brokers_transactions_with_its_id_as_coordinator() -> None:
    admin = FakeAdmin()
    admin.listings = {
        2: [TransactionListing("t-b", 11, "Ongoing")],
        1: [TransactionListing("t-a", 10, "CompleteCommit"), TransactionListing("t-c", 12, "Empty")],
        3: [],
    }
    out = await run(admin, "list", "--duration-filter", "100")
    assert cells(out) == [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        ["t-a", "1", "10", "CompleteCommit"],
        ["t-c", "1", "12", "Empty"],
        ["t-b", "2", "11", "Ongoing"],
    ]
    assert ("list_transactions", ([], 100)) in admin.calls


async def test_describe_prints_the_transaction_with_its_duration_and_sorted_partitions() -> None:
    admin = FakeAdmin()
    admin.descriptions["tx"] = TransactionDescription(
        2, "Ongoing", 42, 5, 60000, NOW - 1234, frozenset({("b", 0), ("a", 1), ("a", 0)})
    )
    out = await run(admin, "describe", "--transactional-id", "tx")
    assert cells(out) == [
        list(commands.DESCRIBE_HEADERS),
        ["2", "tx", "42", "5", "Ongoing", "60000", str(NOW - 1234), "1234", "a-0,a-1,b-0"],
    ]


async def test_describe_of_an_idle_transactional_id_shows_none_for_start_and_duration() -> None:
    admin = FakeAdmin()
    admin.descriptions["tx"] = TransactionDescription(1, "Empty", 42, 5, 60000, None, frozenset())
    assert cells(await run(admin, "describe", "--transactional-id", "tx"))[1] == [
        "1", "tx", "42", "5", "Empty", "60000", "None", "None", ""
    ]  # fmt: skip


async def test_describe_of_an_unknown_transactional_id_fails_with_kafkas_message() -> None:
    admin = FakeAdmin()
    with pytest.raises(commands.CommandError) as failure:
        await run(admin, "describe", "--transactional-id", "nope")
    assert str(failure.value) == "Failed to describe transaction state of transactional-id `nope`: not found."


async def test_describe_producers_prints_none_for_no_transaction_and_minus_one_for_no_coordinator_epoch() -> (
    None
):
    admin = FakeAdmin()
    admin.producers[("t", 0)] = [producer(7, 100), producer(8, None, coordinator_epoch=None)]
    out = await run(admin, "describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "3")
    assert cells(out) == [
        list(commands.PRODUCERS_HEADERS),
        ["7", "4", "3", "17", str(NOW - 30 * MIN), "100"],
        ["8", "4", "-1", "17", str(NOW - 30 * MIN), "None"],
    ]
    assert ("describe_producers", ([("t", 0)], 3)) in admin.calls


async def test_describe_producers_failure_names_the_leader_or_the_broker() -> None:
    admin = FakeAdmin()
    admin.producers[("t", 0)] = RequestError("boom")
    with pytest.raises(
        commands.CommandError, match=r"^Failed to describe producers for partition t-0 on leader: boom\.$"
    ):
        await run(admin, "describe-producers", "--topic", "t", "--partition", "0")
    with pytest.raises(commands.CommandError, match="on broker 2: boom"):
        await run(admin, "describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "2")


async def test_abort_by_start_offset_aborts_the_producer_whose_transaction_starts_there() -> None:
    admin = FakeAdmin()
    admin.producers[("t", 1)] = [producer(7, 100), producer(8, 250, coordinator_epoch=None)]
    assert await run(admin, "abort", "--topic", "t", "--partition", "1", "--start-offset", "250") == ""
    # A producer no marker was written for yet (coordinator epoch unknown) is aborted with epoch 0.
    assert admin.aborted == [AbortSpec(("t", 1), 8, 4, 0)]


async def test_abort_by_start_offset_without_such_a_transaction_fails() -> None:
    admin = FakeAdmin()
    admin.producers[("t", 1)] = [producer(7, 100)]
    with pytest.raises(commands.CommandError) as failure:
        await run(admin, "abort", "--topic", "t", "--partition", "1", "--start-offset", "99")
    assert str(failure.value) == "Could not find any open transactions starting at offset 99 on partition t-1"
    assert admin.aborted == []


async def test_abort_with_producer_fields_uses_them_and_a_negative_coordinator_epoch_as_0() -> None:
    admin = FakeAdmin()
    await run(
        admin, "abort", "--topic", "t", "--partition", "0",
        "--producer-id", "9", "--producer-epoch", "2", "--coordinator-epoch", "-1",
    )  # fmt: skip
    assert admin.aborted == [AbortSpec(("t", 0), 9, 2, 0)]
    assert not any(name == "describe_producers" for name, _ in admin.calls)


async def test_abort_refused_by_the_leader_reports_the_spec() -> None:
    admin = FakeAdmin()
    admin.abort_error = RequestError("fenced", ErrorCode.TRANSACTION_COORDINATOR_FENCED)
    with pytest.raises(commands.CommandError) as failure:
        await run(
            admin, "abort", "--topic", "t", "--partition", "0",
            "--producer-id", "9", "--producer-epoch", "2", "--coordinator-epoch", "5",
        )  # fmt: skip
    assert str(failure.value) == (
        "Failed to abort transaction AbortTransactionSpec(topicPartition=t-0, producerId=9, producerEpoch=2, "
        "coordinatorEpoch=5): fenced."
    )


def hanging_admin() -> FakeAdmin:
    """Partitions of topic t (leader, replicas): 0 (1, [1, 2]), 1 (2, [2, 3]), 2 (3, [3, 1]); on them:
    - pid 1 (tx-live) open on t-0 for 30 min, its transaction includes t-0: not hanging;
    - pid 2 (tx-moved) open on t-1 for 30 min, its transaction (a newer one) only has t-2: hanging;
    - pid 3, open on t-2 for 20 min, listed by no coordinator: hanging;
    - pid 4 (tx-gone) open on t-0 for 16 min, its id unknown to its coordinator: hanging;
    - pid 5 open on t-1 for 5 min only: not a candidate at the default 15 minutes;
    - pid 6 on t-2 with no open transaction: never a candidate."""
    admin = FakeAdmin()
    admin.topics = {"t": [(0, 1, [1, 2]), (1, 2, [2, 3]), (2, 3, [3, 1])], "u": [(0, 1, [1])]}
    admin.producers = {
        ("t", 0): [producer(1, 10), producer(4, 40, last_ts=NOW - 16 * MIN)],
        ("t", 1): [producer(2, 20), producer(5, 50, last_ts=NOW - 5 * MIN)],
        ("t", 2): [producer(3, 30, last_ts=NOW - 20 * MIN), producer(6, None, last_ts=NOW - 99 * MIN)],
    }
    admin.listings = {
        1: [TransactionListing("tx-live", 1, "Ongoing")],
        2: [TransactionListing("tx-moved", 2, "Ongoing"), TransactionListing("tx-gone", 4, "Ongoing")],
    }
    admin.descriptions = {
        "tx-live": TransactionDescription(1, "Ongoing", 1, 4, 60000, NOW - 30 * MIN, frozenset({("t", 0)})),
        "tx-moved": TransactionDescription(2, "Ongoing", 2, 4, 60000, NOW - MIN, frozenset({("t", 2)})),
    }
    return admin


def hanging_rows(out: str) -> list[tuple[str, str, str, str]]:
    rows = cells(out)
    assert rows[0] == list(commands.HANGING_HEADERS)
    return sorted((r[0], r[1], r[2], r[5]) for r in rows[1:])


async def test_find_hanging_reports_open_transactions_no_coordinator_will_close() -> None:
    admin = hanging_admin()
    out = await run(admin, "find-hanging", "--topic", "t")
    assert hanging_rows(out) == [("t", "0", "4", "40"), ("t", "1", "2", "20"), ("t", "2", "3", "30")]
    # Only the candidates' producers and ids are looked up.
    assert ("list_transactions", ([1, 2, 3, 4], None)) in admin.calls
    assert ("describe_transactions", ["tx-gone", "tx-live", "tx-moved"]) in admin.calls


async def test_find_hanging_prints_kafkas_columns_with_the_duration_in_whole_minutes() -> None:
    admin = hanging_admin()
    out = await run(admin, "find-hanging", "--topic", "t", "--partition", "2")
    assert cells(out)[1] == ["t", "2", "3", "4", "3", "30", str(NOW - 20 * MIN), "20"]
    # A partition given is searched without describing the topic.
    assert not any(name == "describe_topics" for name, _ in admin.calls)


async def test_find_hanging_max_transaction_timeout_widens_or_narrows_the_candidates() -> None:
    out = await run(hanging_admin(), "find-hanging", "--topic", "t", "--max-transaction-timeout", "0")
    assert ("t", "1", "5", "50") in hanging_rows(out)
    out = await run(hanging_admin(), "find-hanging", "--topic", "t", "--max-transaction-timeout", "25")
    assert hanging_rows(out) == [("t", "1", "2", "20")]


async def test_find_hanging_by_broker_searches_its_replicas_of_every_topic_on_that_broker() -> None:
    admin = hanging_admin()
    out = await run(admin, "find-hanging", "--broker-id", "3")
    assert hanging_rows(out) == [("t", "1", "2", "20"), ("t", "2", "3", "30")]
    assert ("list_topics", None) in admin.calls
    assert ("describe_producers", ([("t", 1), ("t", 2)], 3)) in admin.calls


async def test_find_hanging_without_candidates_prints_the_header_and_asks_no_coordinator() -> None:
    admin = hanging_admin()
    out = await run(admin, "find-hanging", "--topic", "u")
    assert out == commands.format_table(commands.HANGING_HEADERS, [])[0] + "\n"
    assert not any(name in ("list_transactions", "describe_transactions") for name, _ in admin.calls)


async def test_find_hanging_fails_on_a_describe_error_other_than_not_found() -> None:
    admin = hanging_admin()
    admin.descriptions["tx-live"] = RequestError("load", ErrorCode.UNKNOWN_SERVER_ERROR)
    with pytest.raises(commands.CommandError, match=r"^Failed to describe 3 transactions: load"):
        await run(admin, "find-hanging", "--topic", "t")


# -- the requests over a fake AdminClient -------------------------------------------------------------


class FakeClient:
    """AdminClient's surface; ``answer(key, body, node)`` gives each response."""

    timeout = 2.0

    def __init__(self, answer: Callable[[ApiKey, Any, int | None], Any]) -> None:
        self.brokers = {1: ("h", 1), 2: ("h", 2), 3: ("h", 3)}
        self.answer = answer
        self.sent: list[tuple[ApiKey, Any, int | None]] = []
        self.leaders = {("t", 0): 1}

    def version(self, key: ApiKey) -> int:
        return {ApiKey.FIND_COORDINATOR: 4, ApiKey.LIST_TRANSACTIONS: 1}.get(key, 0)

    async def metadata(self, topics: list[str] | None) -> Any:
        return NS(
            topics=[
                NS(
                    name=t,
                    error_code=0,
                    partitions=[
                        NS(partition_index=p, leader_id=leader, replica_nodes=[leader])
                        for (topic, p), leader in self.leaders.items()
                        if topic == t
                    ],
                )
                if any(topic == t for topic, _ in self.leaders)
                else NS(name=t, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partitions=[])
                for t in topics or []
            ]
        )

    async def send(self, key: ApiKey, body: Any, node: int | None = None) -> Any:
        self.sent.append((key, body, node))
        return self.answer(key, body, node)

    async def send_to_node(self, key: ApiKey, body: Any, node: int) -> Any:
        return await self.send(key, body, node)


def scripted(*responses: Any) -> Callable[[ApiKey, Any, int | None], Any]:
    queue = list(responses)
    return lambda key, body, node: queue.pop(0)


async def test_list_asks_every_broker_and_retries_a_loading_coordinator() -> None:
    def answer(key: ApiKey, body: Any, node: int | None) -> Any:
        assert key == ApiKey.LIST_TRANSACTIONS and body.producer_id_filters == [5]
        if node == 2 and sum(1 for k, _, n in client.sent if n == 2) == 1:
            return NS(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, transaction_states=[])
        states = (
            [NS(transactional_id=f"t{node}", producer_id=5, transaction_state="Weird")] if node == 2 else []
        )
        return NS(error_code=0, transaction_states=states)

    client = FakeClient(answer)
    result = await TransactionsAdmin(client).list_transactions(producer_ids=[5])  # type: ignore[arg-type]
    assert result == {1: [], 2: [TransactionListing("t2", 5, "Unknown")], 3: []}
    assert sorted(n for _, _, n in client.sent if n is not None) == [1, 2, 2, 3]


async def test_describe_finds_the_transaction_coordinator_and_finds_it_again_when_it_moved() -> None:
    coordinators = iter([3, 1])

    def answer(key: ApiKey, body: Any, node: int | None) -> Any:
        if key == ApiKey.FIND_COORDINATOR:
            assert (body.key_type, body.coordinator_keys) == (1, ["tx"])
            return NS(coordinators=[NS(error_code=0, node_id=next(coordinators), host="h", port=9)])
        assert key == ApiKey.DESCRIBE_TRANSACTIONS and body.transactional_ids == ["tx"]
        if node == 3:
            return NS(transaction_states=[NS(transactional_id="tx", error_code=ErrorCode.NOT_COORDINATOR)])
        state = NS(
            transactional_id="tx",
            error_code=0,
            transaction_state="Ongoing",
            producer_id=4,
            producer_epoch=1,
            transaction_timeout_ms=900,
            transaction_start_time_ms=-1,
            topics=[NS(topic="t", partitions=[0, 2])],
        )
        return NS(transaction_states=[state])

    client = FakeClient(answer)
    result = await TransactionsAdmin(client).describe_transactions(["tx"])  # type: ignore[arg-type]
    assert result == {
        "tx": TransactionDescription(1, "Ongoing", 4, 1, 900, None, frozenset({("t", 0), ("t", 2)}))
    }


async def test_describe_of_an_unknown_id_is_transactional_id_not_found() -> None:
    def answer(key: ApiKey, body: Any, node: int | None) -> Any:
        if key == ApiKey.FIND_COORDINATOR:
            return NS(coordinators=[NS(error_code=0, node_id=2, host="h", port=9)])
        return NS(
            transaction_states=[NS(transactional_id="tx", error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)]
        )

    result = (await TransactionsAdmin(FakeClient(answer)).describe_transactions(["tx"]))["tx"]  # type: ignore[arg-type]
    assert isinstance(result, RequestError) and result.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def producers_response(topic: str, partition: int, code: int = 0, producers: list[Any] | None = None) -> Any:
    return NS(
        topics=[
            NS(
                name=topic,
                partitions=[
                    NS(
                        partition_index=partition,
                        error_code=code,
                        error_message=None,
                        active_producers=producers or [],
                    )
                ],
            )
        ]
    )


async def test_describe_producers_follows_a_moved_leader() -> None:
    state = NS(
        producer_id=7, producer_epoch=2, last_sequence=4, last_timestamp=5, coordinator_epoch=-1,
        current_txn_start_offset=12,
    )  # fmt: skip

    def answer(key: ApiKey, body: Any, node: int | None) -> Any:
        if node == 1:
            client.leaders[("t", 0)] = 2
            return producers_response("t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return producers_response("t", 0, producers=[state])

    client = FakeClient(answer)
    result = await TransactionsAdmin(client).describe_producers([("t", 0)])  # type: ignore[arg-type]
    assert result == {("t", 0): [ProducerState(7, 2, 4, 5, None, 12)]}
    assert [n for _, _, n in client.sent] == [1, 2]


async def test_describe_producers_on_a_given_broker_fails_on_not_leader_or_follower() -> None:
    client = FakeClient(scripted(producers_response("t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER)))
    result = (await TransactionsAdmin(client).describe_producers([("t", 0)], broker_id=3))[("t", 0)]  # type: ignore[arg-type]
    assert isinstance(result, RequestError)
    assert str(result) == "Failed to describe active producers for partition t-0 on brokerId 3"


async def test_describe_producers_of_a_missing_topic_fails_at_once() -> None:
    client = FakeClient(scripted())
    result = (await TransactionsAdmin(client).describe_producers([("nope", 0)]))[("nope", 0)]  # type: ignore[arg-type]
    assert isinstance(result, RequestError) and result.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.sent == []


def markers_response(pid: int, topic: str, partition: int, code: int) -> Any:
    return NS(
        markers=[
            NS(
                producer_id=pid,
                topics=[NS(name=topic, partitions=[NS(partition_index=partition, error_code=code)])],
            )
        ]
    )


async def test_abort_writes_one_abort_marker_to_the_leader_retrying_after_a_leader_change() -> None:
    def answer(key: ApiKey, body: Any, node: int | None) -> Any:
        assert key == ApiKey.WRITE_TXN_MARKERS
        if node == 1:
            client.leaders[("t", 0)] = 3
            return markers_response(9, "t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return markers_response(9, "t", 0, 0)

    client = FakeClient(answer)
    await TransactionsAdmin(client).abort_transaction(AbortSpec(("t", 0), 9, 2, 6))  # type: ignore[arg-type]
    assert [n for _, _, n in client.sent] == [1, 3]
    marker = client.sent[-1][1].markers[0]
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (9, 2, 6)
    assert marker.transaction_result is False
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("t", [0])]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (ErrorCode.INVALID_PRODUCER_EPOCH, "failed due an invalid producer epoch"),
        (
            ErrorCode.TRANSACTION_COORDINATOR_FENCED,
            "coordinator epoch 6 has been fenced by the active coordinator",
        ),
    ],
)
async def test_abort_refused_by_the_leader_raises_with_kafkas_message(code: int, message: str) -> None:
    client = FakeClient(scripted(markers_response(9, "t", 0, code)))
    with pytest.raises(RequestError, match=message):
        await TransactionsAdmin(client).abort_transaction(AbortSpec(("t", 0), 9, 2, 6))  # type: ignore[arg-type]


async def test_abort_refuses_a_response_about_another_producer() -> None:
    client = FakeClient(scripted(markers_response(8, "t", 0, 0)))
    with pytest.raises(RequestError, match="unexpected marker entries"):
        await TransactionsAdmin(client).abort_transaction(AbortSpec(("t", 0), 9, 2, 6))  # type: ignore[arg-type]
