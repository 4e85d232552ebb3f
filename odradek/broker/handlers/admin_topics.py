"""CreateTopics (key 19) v0-7, DeleteTopics (key 20) v0-6, CreatePartitions (key 37) v0-3.

CreateTopics: v1 adds validate_only and error messages; v2 throttle time; v4 lets num_partitions
/ replication_factor be -1 for the broker defaults (KIP-464); v5 is flexible and answers
num_partitions, replication_factor and the topic's configs (KIP-525); v6 may answer
THROTTLING_QUOTA_EXCEEDED (KIP-599); v7 answers the topic id (KIP-516).
DeleteTopics: v1 throttle time; v3 may answer TOPIC_DELETION_DISABLED; v4 is flexible; v5 adds
error_message and may throttle. v6 names topics by name or by id (KIP-516).
CreatePartitions: v2 is flexible; v3 may throttle.

Work per request is bounded as in Kafka's KRaft controller: a request whose topics, partitions
and configs would make more than MAX_RECORDS_PER_USER_OP (10,000) metadata records is refused
as a whole with POLICY_VIOLATION, counted from the request before anything is allocated (so a
validate_only request for 3,000,000 partitions costs nothing). The controller mutation quota
(mutation_quota.py) charges one permit per partition created or deleted.

Manual replica assignments are checked as Kafka's controller checks them (consecutive partitions
from 0, no empty or repeated replica lists, registered brokers, one replication factor) and are
then accepted when they equal the placement the topic manager makes itself, which is always the
case on a single broker; any other placement is INVALID_REQUEST.

Internal topics may be deleted, as on a KRaft broker (only kafka-topics.sh refuses it).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

from odradek.broker.config_entries import topic_entries
from odradek.broker.network.context import RequestContext
from odradek.broker.network.mutation_quota import MutationQuota, quotas_of
from odradek.broker.network.quotas import user_of
from odradek.broker.network.registry import handles
from odradek.broker.partitions.topics import TopicError, check_topic_name
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.cluster.metadata_store import TopicInfo
    from odradek.broker.server import Broker


class _Named(Protocol):
    name: str


T = TypeVar("T", bound=_Named)  # a requested topic of CreateTopics or CreatePartitions
CreatableTopic: TypeAlias = protocol.CreateTopicsRequest.CreatableTopic
PartitionsTopic: TypeAlias = protocol.CreatePartitionsRequest.CreatePartitionsTopic

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the most metadata records one request may make
MAX_RECORDS_PER_USER_OP = 10_000
TOO_LARGE = "Unable to perform excessively large batch operation."
THROTTLED = "The throttling quota has been exceeded."
YIELD_EVERY = 64  # topics handled between yields to the event loop

CResp: TypeAlias = protocol.CreateTopicsResponse
CResult: TypeAlias = protocol.CreateTopicsResponse.CreatableTopicResult
CConfig: TypeAlias = protocol.CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs


# -- manual replica assignments -----------------------------------------------------------------


def check_replica_list(replicas: list[int], live: set[int], expected_rf: int | None) -> None:
    """One partition's manual replica list, with the messages of Kafka's controller."""
    if not replicas:
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for broker_id in sorted(replicas):
        if broker_id not in live:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but "
                "no such broker is registered.",
            )
        if broker_id in seen:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        seen.add(broker_id)
    if expected_rf is not None and len(replicas) != expected_rf:
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
            f"The manual partition assignment includes a partition with "
            f"{len(replicas)} replica(s), but this is not consistent with previous "
            f"partitions, which have {expected_rf} replica(s).",
        )


def _manual_assignment(broker: Broker, topic: CreatableTopic) -> list[list[int]]:
    if topic.replication_factor != -1:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor "
            "was not set to -1.",
        )
    if topic.num_partitions != -1:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    by_index: dict[int, list[int]] = {}
    for a in topic.assignments:
        if a.partition_index in by_index:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {a.partition_index}",
            )
        by_index[a.partition_index] = list(a.broker_ids)
    if sorted(by_index) != list(range(len(by_index))):
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    live = set(broker.live_brokers())
    rf: int | None = None
    for idx in range(len(by_index)):
        check_replica_list(by_index[idx], live, rf)
        rf = len(by_index[idx])
    return [by_index[i] for i in range(len(by_index))]


# -- CreateTopics -------------------------------------------------------------------------------


def _check_collision(broker: Broker, name: str, planned: dict[str, str] | None = None) -> None:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only by them
    (`planned`: normalised name -> name of the topics this request is creating)."""
    norm = name.replace(".", "_")
    if planned and planned.get(norm, name) != name:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{name}' collides with existing topic: {planned[norm]}",
        )
    for other in broker.store.topics:
        if other != name and other.replace(".", "_") == norm:
            raise TopicError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {other}",
            )


async def _create_one(
    broker: Broker,
    topic: CreatableTopic,
    validate_only: bool,
    quota: MutationQuota,
    planned: dict[str, str],
) -> tuple[TopicInfo, list[int]]:
    """A topic checked and planned, with this broker's logs prepared (the indexes), to be
    committed with the rest of the request (`TopicManager.commit_topics`)."""
    name = topic.name
    check_topic_name(name)
    if broker.topics.info(name) is not None:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    _check_collision(broker, name, planned)
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise TopicError(
            ErrorCode.INVALID_CONFIG,
            "Null value not supported for topic configs: " + ",".join(nulls),
        )
    configs = {c.name: c.value for c in topic.configs}
    num_partitions, rf = topic.num_partitions, topic.replication_factor
    wanted = None
    if topic.assignments:
        wanted = _manual_assignment(broker, topic)
        num_partitions, rf = len(wanted), len(wanted[0])
    info = broker.topics.create_topic(
        name, num_partitions, rf, configs, validate_only=True, assignment=wanted
    )
    # Kafka charges the quota after validation, before the topic exists (validate_only too)
    if quota.enabled and quota.record(len(info.partitions)):
        raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
    if validate_only:
        return info, []
    planned[name.replace(".", "_")] = name
    # the logs open one per loop iteration: other clients are served meanwhile
    return info, await broker.topics.prepare_topic(info)


def _create_records(broker: Broker, topic: CreatableTopic) -> int:
    """Metadata records Kafka's controller would write for this topic (0 if it is refused)."""
    if topic.assignments:
        partitions = len(topic.assignments)
    elif topic.num_partitions == -1:
        partitions = int(broker.config.get("num.partitions"))
    else:
        partitions = topic.num_partitions
    if partitions <= 0 or broker.topics.info(topic.name) is not None:
        return 0
    return 1 + partitions + len(topic.configs)


def _throttle(ctx: RequestContext, quota: MutationQuota) -> int:
    """The answer's throttle time; the connection then mutes for it, as Kafka's does."""
    throttle_ms = quota.throttle_time_ms
    if throttle_ms and ctx.connection is not None:
        ctx.connection.throttle(throttle_ms)
    return throttle_ms


def _too_large(topics: list[T], count: Callable[[T], int]) -> bool:
    total = 0
    for topic in topics:
        total += count(topic)
        if total > MAX_RECORDS_PER_USER_OP:
            return True
    return False


def _refuse_too_large(
    ctx: RequestContext,
    what: str,
    topics: list[T],
    requested: list[T],
    count: Callable[[T], int],
    Result: type[protocol.Message],
) -> list[object] | None:
    """Every requested topic refused with POLICY_VIOLATION when the unique `topics` would write
    more than MAX_RECORDS_PER_USER_OP records; None when the request is within the bound."""
    if not _too_large(topics, count):
        return None
    log.info(
        "%s of %d topics from %s refused: more than %d records",
        what,
        len(topics),
        ctx.client_id,
        MAX_RECORDS_PER_USER_OP,
    )
    return [
        Result(name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=TOO_LARGE)
        for t in requested
    ]


def _created(broker: Broker, info: TopicInfo, version: int) -> protocol.Message:
    configs = []
    if version >= 5:
        configs = [
            CConfig(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=e.source,
                is_sensitive=False,
            )
            for e in topic_entries(broker.config, info.configs)
        ]
    return CResult(
        name=info.name,
        topic_id=info.topic_id,
        error_code=ErrorCode.NONE,
        error_message=None,
        num_partitions=len(info.partitions),
        replication_factor=len(info.partitions[0].replicas),
        configs=configs,
    )


def _unique_topics(
    topics: list[T], results: list[protocol.Message], result_cls: type[protocol.Message]
) -> list[T]:
    """Topics named once; a name given twice is answered INVALID_REQUEST once, as Kafka does."""
    counts = Counter(t.name for t in topics)
    for name in dict.fromkeys(t.name for t in topics if counts[t.name] > 1):
        results.append(
            result_cls(
                name=name,
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="Duplicate topic name.",
            )
        )
    return [t for t in topics if counts[t.name] == 1]


@handles(ApiKey.CREATE_TOPICS, versions=(0, 7))
async def create_topics(
    ctx: RequestContext, req: protocol.CreateTopicsRequest
) -> protocol.CreateTopicsResponse:
    broker = ctx.broker
    results: list[protocol.Message] = []
    topics = _unique_topics(req.topics, results, CResult)
    refused = _refuse_too_large(
        ctx, "CreateTopics", topics, req.topics, lambda t: _create_records(broker, t), CResult
    )
    if refused is not None:
        return CResp(throttle_time_ms=0, topics=refused)
    quota = quotas_of(broker).quota_for(
        user_of(ctx.principal), ctx.client_id, strict=ctx.api_version >= 6
    )
    checked = broker.authorizer is not None
    cluster_create = not checked or ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False)

    def refusal(name: str, exc: TopicError) -> protocol.Message:
        log.info("CreateTopics %r from %s refused: %s %s", name, ctx.client_id, exc.code.name, exc)
        return CResult(name=name, error_code=exc.code, error_message=str(exc))

    def created(info: TopicInfo) -> protocol.Message:
        result = _created(broker, info, ctx.api_version)
        if checked and not ctx.authorize(
            AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, info.name, log_if_denied=False
        ):  # created, but its configs are not shown
            result.configs = []
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return result

    # every topic is checked and its logs prepared first; the topics are then written to the
    # metadata store together, one save for the request
    pending: list[tuple[int, TopicInfo, list[int]]] = []  # (slot in results, planned, logs)
    planned: dict[str, str] = {}
    try:
        for n, topic in enumerate(topics):
            if n and n % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let other clients be served
            if not cluster_create and not ctx.authorize(
                AclOperation.CREATE, ResourceType.TOPIC, topic.name
            ):
                results.append(
                    CResult(
                        name=topic.name,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        error_message="Authorization failed.",
                    )
                )
                continue
            try:
                info, prepared = await _create_one(
                    broker, topic, bool(req.validate_only), quota, planned
                )
            except TopicError as exc:
                results.append(refusal(topic.name, exc))
                continue
            if req.validate_only:
                results.append(created(info))
            else:
                pending.append((len(results), info, prepared))
                results.append(None)
    except BaseException:
        for _, info, prepared in pending:  # never committed: their logs go
            broker.topics.release_prepared(info.name, prepared)
        raise
    if pending:
        outcomes = await broker.topics.commit_topics([(i, p) for _, i, p in pending])
        for (slot, info, _), outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, TopicError):
                results[slot] = refusal(info.name, outcome)
            else:
                results[slot] = created(outcome)
    return CResp(throttle_time_ms=_throttle(ctx, quota), topics=results)


# -- DeleteTopics -------------------------------------------------------------------------------

DResp: TypeAlias = protocol.DeleteTopicsResponse
DResult: TypeAlias = protocol.DeleteTopicsResponse.DeletableTopicResult


def _delete_targets(
    broker: Broker, entries: list[tuple[str | None, uuid.UUID | None]]
) -> tuple[list[protocol.Message], list[tuple[str, uuid.UUID]]]:
    """Resolve names and ids as Kafka's ControllerApis.deleteTopics: (errors, to delete)."""
    errors: list[protocol.Message] = []

    def fail(
        name: str | None, topic_id: uuid.UUID | None, code: ErrorCode, message: str | None
    ) -> None:
        errors.append(
            DResult(
                name=name, topic_id=topic_id or ZERO_UUID, error_code=code, error_message=message
            )
        )

    names = Counter(n for n, i in entries if n is not None and i is None)
    ids = Counter(i for n, i in entries if n is None and i is not None)
    reported: set[str | uuid.UUID] = set()
    targets: dict[uuid.UUID, str] = {}
    for name, topic_id in entries:
        if name is None and topic_id is None:
            fail(None, None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
        elif name is not None and topic_id is not None:
            fail(
                name,
                topic_id,
                ErrorCode.INVALID_REQUEST,
                "You may not specify both topic name and topic id.",
            )
        elif topic_id is not None and ids[topic_id] > 1:
            if topic_id not in reported:
                reported.add(topic_id)
                fail(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
        elif topic_id is not None:
            found = broker.topics.name_for_id(topic_id)
            if found is None:
                fail(
                    None,
                    topic_id,
                    ErrorCode.UNKNOWN_TOPIC_ID,
                    "This server does not host this topic ID.",
                )
            else:
                targets[topic_id] = found
    for name, topic_id in entries:
        if name is None or topic_id is not None:
            continue
        if names[name] > 1:
            if name not in reported:
                reported.add(name)
                fail(name, None, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            continue
        info = broker.topics.info(name)
        if info is None:
            fail(
                name,
                None,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        elif info.topic_id in targets:
            targets.pop(info.topic_id)
            fail(
                name,
                info.topic_id,
                ErrorCode.INVALID_REQUEST,
                "The provided topic name maps to an ID that was already supplied.",
            )
        else:
            targets[info.topic_id] = name
    return errors, [(n, i) for i, n in targets.items()]


def _delete_denied(name: str | None, topic_id: uuid.UUID | None) -> protocol.Message:
    return DResult(
        name=name,
        topic_id=topic_id or ZERO_UUID,
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        error_message="Authorization failed.",
    )


def _delete_allowed(
    ctx: RequestContext, entries: list[tuple[str | None, uuid.UUID | None]]
) -> tuple[list[tuple[str | None, uuid.UUID | None]], list[protocol.Message]]:
    """Topics named by name need DESCRIBE and DELETE, checked before their existence."""
    kept, denied = [], []
    for name, topic_id in entries:
        if name is not None and topic_id is None:
            if not (
                ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
                and ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name)
            ):
                denied.append(_delete_denied(name, None))
                continue
        kept.append((name, topic_id))
    return kept, denied


@handles(ApiKey.DELETE_TOPICS, versions=(0, 6))
async def delete_topics(
    ctx: RequestContext, req: protocol.DeleteTopicsRequest
) -> protocol.DeleteTopicsResponse:
    broker = ctx.broker
    version = ctx.api_version
    if version >= 6:
        entries = [
            (t.name, t.topic_id if t.topic_id not in (None, ZERO_UUID) else None)
            for t in req.topics
        ]
    else:
        entries = [(n, None) for n in req.topic_names]
    if not broker.config.get("delete.topic.enable"):
        code = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
        return DResp(
            throttle_time_ms=0,
            responses=[
                DResult(
                    name=n,
                    topic_id=i or ZERO_UUID,
                    error_code=code,
                    error_message="Topic deletion is disabled.",
                )
                for n, i in entries
            ],
        )
    denied: list[protocol.Message] = []
    if broker.authorizer is not None:
        entries, denied = _delete_allowed(ctx, entries)
    results, targets = _delete_targets(broker, entries)
    results.extend(denied)
    if broker.authorizer is not None:  # topics named by id: DESCRIBE reveals the name
        allowed = []
        for name, topic_id in targets:
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                results.append(_delete_denied(None, topic_id))
            elif not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
                results.append(_delete_denied(name, topic_id))
            else:
                allowed.append((name, topic_id))
        targets = allowed
    quota = quotas_of(broker).quota_for(user_of(ctx.principal), ctx.client_id, strict=version >= 5)
    for n, (name, topic_id) in enumerate(targets):
        if n and n % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        try:
            info = broker.topics.info(name)
            if info is not None and quota.record(len(info.partitions)):
                raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
            broker.topics.delete_topic(name)
        except TopicError as exc:
            results.append(
                DResult(name=name, topic_id=topic_id, error_code=exc.code, error_message=str(exc))
            )
            continue
        results.append(
            DResult(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None)
        )
    return DResp(throttle_time_ms=_throttle(ctx, quota), responses=results)


# -- CreatePartitions ---------------------------------------------------------------------------

PResp: TypeAlias = protocol.CreatePartitionsResponse
PResult: TypeAlias = protocol.CreatePartitionsResponse.CreatePartitionsTopicResult


async def _grow_one(
    broker: Broker, topic: PartitionsTopic, validate_only: bool, quota: MutationQuota
) -> None:
    name = topic.name
    info = broker.topics.info(name)
    if info is None:
        raise TopicError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        )
    current = len(info.partitions)
    if topic.count < current:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the "
            f"requested {topic.count}.",
        )
    if topic.count == current:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    wanted = None
    if topic.assignments is not None:
        added = topic.count - current
        if len(topic.assignments) != added:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                f"Attempted to add {added} additional partition(s), but only "
                f"{len(topic.assignments)} assignment(s) were specified.",
            )
        live = set(broker.live_brokers())
        rf = len(info.partitions[0].replicas)
        wanted = [list(a.broker_ids) for a in topic.assignments]
        for replicas in wanted:
            check_replica_list(replicas, live, rf)
    broker.topics.create_partitions(name, topic.count, validate_only=True, assignment=wanted)
    if quota.enabled and quota.record(topic.count - current):
        raise TopicError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
    if not validate_only:  # the logs open one per loop iteration, as for CreateTopics
        await broker.topics.create_partitions_async(name, topic.count, wanted)


def _added_partitions(broker: Broker, topic: PartitionsTopic) -> int:
    info = broker.topics.info(topic.name)
    return 0 if info is None else max(0, topic.count - len(info.partitions))


@handles(ApiKey.CREATE_PARTITIONS, versions=(0, 3))
async def create_partitions(
    ctx: RequestContext, req: protocol.CreatePartitionsRequest
) -> protocol.CreatePartitionsResponse:
    broker = ctx.broker
    results: list[protocol.Message] = []
    topics = _unique_topics(req.topics, results, PResult)
    refused = _refuse_too_large(
        ctx, "CreatePartitions", topics, req.topics, lambda t: _added_partitions(broker, t), PResult
    )
    if refused is not None:
        return PResp(throttle_time_ms=0, results=refused)
    quota = quotas_of(broker).quota_for(
        user_of(ctx.principal), ctx.client_id, strict=ctx.api_version >= 3
    )
    for n, topic in enumerate(topics):
        if n and n % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            results.append(
                PResult(
                    name=topic.name,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message="The topic authorization is failed.",
                )
            )
            continue
        try:
            await _grow_one(broker, topic, bool(req.validate_only), quota)
        except TopicError as exc:
            log.info(
                "CreatePartitions %r from %s refused: %s %s",
                topic.name,
                ctx.client_id,
                exc.code.name,
                exc,
            )
            results.append(PResult(name=topic.name, error_code=exc.code, error_message=str(exc)))
            continue
        results.append(PResult(name=topic.name, error_code=ErrorCode.NONE, error_message=None))
    return PResp(throttle_time_ms=_throttle(ctx, quota), results=results)
