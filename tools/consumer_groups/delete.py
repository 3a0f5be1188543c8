"""``--delete`` of whole groups (DeleteGroups) and ``--delete-offsets`` of some of a group's topics or
partitions (OffsetDelete), with kafka-consumer-groups.sh's reports of each outcome."""

from __future__ import annotations

from collections import defaultdict

from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import DeleteGroupsRequest, OffsetDeleteRequest
from tools.admin_client import AdminClient
from tools.consumer_groups.command import GroupCommand, TopicPartition, parse_topic_partitions


async def delete_groups(admin: AdminClient, group_ids: list[str]) -> dict[str, int]:
    """DeleteGroups of each group at its coordinator: the error code of each (NONE when deleted)."""
    results: dict[str, int] = {}
    for group_id in group_ids:
        response = await admin.send_to_coordinator(
            group_id,
            ApiKey.DELETE_GROUPS,
            DeleteGroupsRequest(groups_names=[group_id]),
            lambda r: [g.error_code for g in r.results],
        )
        results[group_id] = response.results[0].error_code
    return results


def deletion_failure(group_id: str, code: int) -> str:
    """Why a group could not be deleted, as kafka-consumer-groups.sh says it."""
    return f"Group '{group_id}' could not be deleted due to: {ErrorCode(code).name}: {description(code)}"


class DeleteGroups(GroupCommand):
    async def run(self) -> None:
        results = await delete_groups(self.admin, await self.group_ids())
        deleted = [g for g, code in results.items() if code == ErrorCode.NONE]
        failed = {g: code for g, code in results.items() if code != ErrorCode.NONE}
        quoted = ", ".join(f"'{g}'" for g in deleted)
        if not failed:
            print(f"Deletion of requested consumer groups ({quoted}) was successful.")
            return
        self.error("Deletion of some consumer groups failed:")
        for group_id, code in failed.items():
            print(f"* {deletion_failure(group_id, code)}")
        if deleted:
            print(f"\nThese consumer groups were deleted successfully: {quoted}")


class DeleteOffsets(GroupCommand):
    async def run(self) -> None:
        group_id = self.args.group[0]
        topics = self.args.topic
        results: dict[TopicPartition, int] = {}
        partitions: list[TopicPartition] = []
        whole_topics = []
        for arg in topics:
            topic, chosen = parse_topic_partitions(arg)
            if chosen is None:
                whole_topics.append(topic)
            else:
                partitions += [(topic, p) for p in chosen]
        if whole_topics:
            metadata = await self.admin.metadata(sorted(set(whole_topics)))
            for t in metadata.topics:
                if t.error_code != ErrorCode.NONE:
                    results[(t.name, -1)] = t.error_code
                else:
                    partitions += [(t.name, p.partition_index) for p in t.partitions]
        partitions = list(dict.fromkeys(partitions))
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        request = OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                    ],
                )
                for topic, ps in by_topic.items()
            ],
        )
        response = await self.admin.send_to_coordinator(
            group_id, ApiKey.OFFSET_DELETE, request, lambda r: [r.error_code]
        )
        top_level = response.error_code
        answered = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
        for tp in partitions:
            # A group-level error fails every partition, as in Kafka's Admin client.
            results[tp] = top_level if top_level != ErrorCode.NONE else answered.get(tp, ErrorCode.NONE)
        if top_level == ErrorCode.NONE:
            top_level = next(
                (results[tp] for tp in partitions if results[tp] != ErrorCode.NONE), ErrorCode.NONE
            )
        if top_level == ErrorCode.NONE:
            print(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group_id}")
        elif top_level == ErrorCode.INVALID_GROUP_ID:
            self.error(f"'{group_id}' is not valid.")
        elif top_level == ErrorCode.GROUP_ID_NOT_FOUND:
            self.error(f"'{group_id}' does not exist.")
        elif top_level == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            self.error(f"Access to '{group_id}' is not authorized.")
        elif top_level == ErrorCode.NON_EMPTY_GROUP:
            self.error(
                f"Deleting offsets of a consumer group '{group_id}' is forbidden if the group is not empty."
            )
        elif top_level in (
            ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ):
            self.error("Encounter some partition level error, see the follow-up details:")
        else:
            self.error(f"Encounter some unknown error: {ErrorCode(top_level).name}")
        print(f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}")
        for (topic, partition), code in sorted(results.items(), key=lambda r: r[0][0] + str(r[0][1])):
            status = "Successful" if code == ErrorCode.NONE else f"Error: {description(code)}"
            shown = str(partition) if partition >= 0 else "Not Provided"
            print(f"{topic:<30} {shown:<15} {status:<15}")
