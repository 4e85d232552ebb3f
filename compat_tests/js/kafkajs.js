// KafkaJS scenarios for compat_tests/test_kafkajs.py:
//
//   node kafkajs.js <scenario> '<json spec>'
//
// Prints one JSON object on stdout (what the client saw); progress goes to stderr. Records
// are written as polyglot_checks.py describes: key "key-i" (null when i % 7 == 3), value
// "value-i-<tag>" (empty when i % 11 == 5), headers idx, dup=a, dup="", timestamp
// base_ts + 10 * i, partition i % partitions.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('@2l/kafkajs-lz4')
const { ZstdCodec } = require('zstd-codec')

// ZSTD through zstd-codec (WebAssembly; @kafkajs/zstd's native addon does not build on
// Node 20). Streaming.decompress reads frames without a content size too (zstd-jni's and
// franz-go's streaming writers leave it out), where Simple.decompress gives up.
const zstd = new Promise((resolve) => ZstdCodec.run((z) => resolve(z)))
const ZstdKafkaCodec = () => ({
  async compress(encoder) {
    return Buffer.from(new (await zstd).Simple().compress(encoder.buffer, 3))
  },
  async decompress(buffer) {
    return Buffer.from(new (await zstd).Streaming().decompress(buffer))
  },
})

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
CompressionCodecs[CompressionTypes.ZSTD] = ZstdKafkaCodec

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

function log(...args) {
  process.stderr.write(new Date().toISOString() + ' ' + args.join(' ') + '\n')
}

// consumers' fetch max wait: disconnect() waits for the fetch in flight, and KafkaJS's default
// of 5 s made every short-lived reader cost seconds of idle waiting
const FETCH_WAIT_MS = 250

function kafka(spec, clientId, auth) {
  const cfg = {
    clientId,
    brokers: spec.brokers,
    logLevel: logLevel.WARN,
    retry: { retries: 8, initialRetryTime: 100 },
    connectionTimeout: 5000,
  }
  if (spec.ca_file) cfg.ssl = { ca: [fs.readFileSync(spec.ca_file, 'utf8')], servername: 'localhost' }
  if (auth) cfg.sasl = { mechanism: spec.mechanism.toLowerCase(), username: auth[0], password: auth[1] }
  return new Kafka(cfg)
}

function record(tag, i, partitions, baseTs) {
  return {
    partition: i % partitions,
    key: i % 7 === 3 ? null : Buffer.from(`key-${i}`),
    value: i % 11 === 5 ? Buffer.alloc(0) : Buffer.from(`value-${i}-${tag}`),
    headers: { idx: Buffer.from(String(i)), dup: [Buffer.from('a'), Buffer.alloc(0)] },
    timestamp: String(baseTs + 10 * i),
  }
}

function hex(buf) {
  return buf === null || buf === undefined ? null : Buffer.from(buf).toString('hex')
}

function seen(partition, m) {
  const headers = []
  for (const [k, v] of Object.entries(m.headers || {})) {
    for (const one of Array.isArray(v) ? v : [v]) headers.push([k, hex(one) || ''])
  }
  return {
    p: partition,
    o: Number(m.offset),
    ts: Number(m.timestamp),
    key: hex(m.key),
    value: hex(m.value) || '',
    headers,
  }
}

function deadlineAfter(spec) {
  return Date.now() + (spec.timeout_s || 60) * 1000
}

async function waitUntil(cond, deadline, what) {
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

// every record of `topic` through a consumer group, from the beginning
async function consumeAll(client, spec, topic, group, want, opts = {}) {
  const consumer = client.consumer({ groupId: group, maxWaitTimeInMs: FETCH_WAIT_MS, ...opts })
  const out = []
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      out.push(seen(partition, message))
    },
  })
  try {
    await waitUntil(() => out.length >= want, deadlineAfter(spec), `${want} records of ${topic}`)
  } finally {
    await consumer.disconnect()
  }
  return out
}

async function produce(spec) {
  const client = kafka(spec, 'odradek-kafkajs-produce')
  const admin = client.admin()
  await admin.connect()
  const results = []
  for (const c of spec.cases) {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: c.topic, numPartitions: spec.partitions, replicationFactor: spec.replicas || 1 }],
    })
    const idempotent = c.acks === 'all'
    const producer = client.producer({ idempotent, maxInFlightRequests: idempotent ? 1 : undefined })
    await producer.connect()
    const messages = []
    for (let i = 0; i < spec.count; i++) messages.push(record(`${c.codec}-${c.acks}`, i, spec.partitions, spec.base_ts))
    const meta = await producer.send({
      topic: c.topic,
      acks: c.acks === 'all' ? -1 : Number(c.acks),
      compression: CODECS[c.codec],
      messages,
    })
    await producer.disconnect()
    const records = await consumeAll(client, spec, c.topic, `${c.topic}-reader`, spec.count)
    const offsets = await admin.fetchTopicOffsets(c.topic)
    const byTime = {}
    for (const i of [0, Math.floor(spec.count / 2)]) {
      const at = await admin.fetchTopicOffsetsByTimestamp(c.topic, spec.base_ts + 10 * i)
      byTime[i] = at.sort((a, b) => a.partition - b.partition).map((x) => Number(x.offset))
    }
    results.push({
      codec: c.codec,
      acks: c.acks,
      sent: meta.map((m) => [m.partition, Number(m.baseOffset)]),
      records,
      end: Object.fromEntries(offsets.map((o) => [o.partition, Number(o.high)])),
      start: Object.fromEntries(offsets.map((o) => [o.partition, Number(o.low)])),
      by_time: byTime,
    })
    log(`case ${c.codec}/${c.acks} done`)
  }
  await admin.disconnect()
  return { cases: results }
}

// two members, one with eachMessage and one with eachBatch; records written once both have
// partitions; together they must read every record once
async function group(spec) {
  const client = kafka(spec, 'odradek-kafkajs-group')
  const admin = client.admin()
  await admin.connect()
  await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic: spec.topic, numPartitions: spec.partitions, replicationFactor: spec.replicas || 1 }],
  })
  const deadline = deadlineAfter(spec)
  const members = {}
  const union = new Map()
  const start = async (name, batch) => {
    const m = { consumer: client.consumer({ groupId: spec.group, maxWaitTimeInMs: FETCH_WAIT_MS }), assigned: [], read: 0 }
    members[name] = m
    m.consumer.on(m.consumer.events.GROUP_JOIN, (e) => {
      m.assigned = (e.payload.memberAssignment[spec.topic] || []).slice().sort()
    })
    const note = (partition, message) => {
      const k = `${partition}-${message.offset}`
      union.set(k, (union.get(k) || 0) + 1)
      m.read++
    }
    await m.consumer.connect()
    await m.consumer.subscribe({ topic: spec.topic, fromBeginning: true })
    if (batch) {
      await m.consumer.run({
        eachBatch: async ({ batch: b, resolveOffset, heartbeat }) => {
          for (const message of b.messages) {
            note(b.partition, message)
            resolveOffset(message.offset)
          }
          await heartbeat()
        },
      })
    } else {
      await m.consumer.run({ eachMessage: async ({ partition, message }) => note(partition, message) })
    }
  }
  await start('a', false)
  await start('b', true)
  await waitUntil(
    () => members.a.assigned.length > 0 && members.b.assigned.length > 0 &&
      members.a.assigned.length + members.b.assigned.length === spec.partitions,
    deadline, 'the partitions split between the members')
  const producer = client.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < spec.count; i++) messages.push(record('g', i, spec.partitions, spec.base_ts))
  await producer.send({ topic: spec.topic, compression: CompressionTypes.GZIP, messages })
  await producer.disconnect()
  await waitUntil(() => union.size >= spec.count, deadline, `${spec.count} records`)
  const a = members.a.assigned
  const b = members.b.assigned
  const aRead = members.a.read
  const bRead = members.b.read
  await members.a.consumer.disconnect()
  await members.b.consumer.disconnect()
  const committed = await admin.fetchOffsets({ groupId: spec.group, topics: [spec.topic] })
  await admin.disconnect()
  return {
    a_owns: a, b_owns: b, a_read: aRead, b_read: bRead, distinct: union.size,
    duplicates: [...union.values()].filter((n) => n > 1).length,
    committed: Object.fromEntries(committed[0].partitions.map((p) => [p.partition, Number(p.offset)])),
  }
}

// an aborted transaction, then a committed one with sendOffsets; a read_committed reader
async function txn(spec) {
  const client = kafka(spec, 'odradek-kafkajs-txn')
  const admin = client.admin()
  await admin.connect()
  await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic: spec.output, numPartitions: spec.partitions, replicationFactor: spec.replicas || 1 }],
  })
  const producer = client.producer({ transactionalId: spec.txn_id, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const aborted = await producer.transaction()
  await aborted.send({
    topic: spec.output,
    messages: [...Array(spec.partitions).keys()].map((p) => ({ partition: p, value: `aborted-${p}` })),
  })
  await aborted.abort()
  const tx = await producer.transaction()
  const messages = []
  for (let i = 0; i < spec.count; i++) messages.push(record('txn', i, spec.partitions, spec.base_ts))
  await tx.send({ topic: spec.output, compression: CompressionTypes.GZIP, messages })
  await tx.sendOffsets({
    consumerGroupId: spec.group,
    topics: [{ topic: spec.output, partitions: [{ partition: 0, offset: '7' }] }],
  })
  await tx.commit()
  await producer.disconnect()
  const committed = await consumeAll(client, spec, spec.output, `${spec.group}-rc`, spec.count)
  const uncommitted = await consumeAll(client, spec, spec.output, `${spec.group}-ru`,
    spec.count + spec.partitions, { readUncommitted: true })
  const offsets = await admin.fetchOffsets({ groupId: spec.group, topics: [spec.output] })
  await admin.disconnect()
  return {
    committed, uncommitted,
    group_offsets: Object.fromEntries(offsets[0].partitions.map((p) => [p.partition, Number(p.offset)])),
  }
}

async function adminScenario(spec) {
  const client = kafka(spec, 'odradek-kafkajs-admin')
  const admin = client.admin()
  await admin.connect()
  const out = {}
  const topic = spec.topic
  out.create = await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic, numPartitions: 2, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
  })
  out.create_again = await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }] })
  out.listed = (await admin.listTopics()).includes(topic)
  await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] })
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  out.partitions = md.topics[0].partitions.length
  const describe = async () => {
    const r = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: 2, name: topic, configNames: ['retention.ms', 'cleanup.policy'] }],
    })
    return Object.fromEntries(r.resources[0].configEntries.map((e) => [e.configName, e.configValue]))
  }
  out.configs = await describe()
  await admin.alterConfigs({
    validateOnly: false,
    resources: [{ type: 2, name: topic, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }],
  })
  out.configs_after = await describe()
  try {
    await admin.alterConfigs({
      resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: 'x' }] }],
    })
    out.alter_bad = ''
  } catch (e) {
    out.alter_bad = e.type || e.name
  }
  const producer = client.producer()
  await producer.connect()
  await producer.send({ topic, messages: [0, 1, 2, 3, 0, 1, 2, 3].map((p) => ({ partition: p, value: 'x' })) })
  await producer.disconnect()
  out.end = Object.fromEntries((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, Number(o.high)]))
  await admin.setOffsets({ groupId: spec.group, topic, partitions: [{ partition: 0, offset: '1' }, { partition: 3, offset: '2' }] })
  const fetched = await admin.fetchOffsets({ groupId: spec.group, topics: [topic] })
  out.fetched = Object.fromEntries(fetched[0].partitions.map((p) => [p.partition, Number(p.offset)]))
  out.groups = (await admin.listGroups()).groups.map((g) => g.groupId).includes(spec.group)
  await admin.deleteTopics({ topics: [topic] })
  out.listed_after_delete = (await admin.listTopics()).includes(topic)
  await admin.disconnect()
  return out
}

// SASL (and TLS when ca_file is given): a round trip as the user, and a wrong password
async function sasl(spec) {
  const client = kafka(spec, 'odradek-kafkajs-sasl', [spec.user, spec.password])
  const admin = client.admin()
  await admin.connect()
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic: spec.topic, numPartitions: 1, replicationFactor: 1 }] })
  await admin.disconnect()
  const producer = client.producer()
  await producer.connect()
  await producer.send({ topic: spec.topic, messages: [{ key: 'k', value: 'over-sasl' }] })
  await producer.disconnect()
  const records = await consumeAll(client, spec, spec.topic, `${spec.topic}-g`, 1)
  const bad = kafka({ ...spec }, 'odradek-kafkajs-bad', [spec.user, spec.password + '-wrong'])
  const badProducer = bad.producer({ retry: { retries: 0 } })
  let wrong = ''
  try {
    await badProducer.connect()
  } catch (e) {
    wrong = e.name
  }
  return { records, wrong_password: wrong }
}

// ACLs: as user alice (no ACLs) produce is denied; the super user admin creates ACLs for
// alice (describeAcls lists them), then alice's produce succeeds; deleteAcls removes them.
async function acl(spec) {
  const { AclResourceTypes, AclOperationTypes, AclPermissionTypes, ResourcePatternTypes } = require('kafkajs')
  const out = {}
  const admin = kafka(spec, 'odradek-kafkajs-acl-admin', [spec.admin_user, spec.admin_password]).admin()
  await admin.connect()
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic: spec.topic, numPartitions: 1, replicationFactor: 1 }] })
  const send = async () => {
    const client = kafka({ ...spec }, 'odradek-kafkajs-acl-user', [spec.user, spec.password])
    const producer = client.producer({ retry: { retries: 0 }, idempotent: false })
    await producer.connect()
    try {
      await producer.send({ topic: spec.topic, acks: 1, messages: [{ value: 'acl' }] })
      return ''
    } catch (e) {
      log(`produce as ${spec.user}: ${e.name} ${e.message}`)
      return (e.cause && e.cause.type) || e.type || e.name // retries: 0 wraps the broker's error
    } finally {
      await producer.disconnect()
    }
  }
  out.produce_denied = await send()
  const entry = (operation) => ({
    resourceType: AclResourceTypes.TOPIC,
    resourceName: spec.topic,
    resourcePatternType: ResourcePatternTypes.LITERAL,
    principal: `User:${spec.user}`,
    host: '*',
    operation,
    permissionType: AclPermissionTypes.ALLOW,
  })
  await admin.createAcls({ acl: [entry(AclOperationTypes.WRITE), entry(AclOperationTypes.DESCRIBE)] })
  const filter = {
    resourceType: AclResourceTypes.TOPIC,
    resourceName: spec.topic,
    resourcePatternType: ResourcePatternTypes.LITERAL,
    principal: `User:${spec.user}`,
    host: '*',
    operation: AclOperationTypes.ANY,
    permissionType: AclPermissionTypes.ANY,
  }
  const described = await admin.describeAcls(filter)
  out.described = described.resources.flatMap((r) => r.acls.map((a) => `${r.resourceName}:${a.principal}:${a.operation}:${a.permissionType}`)).sort()
  out.produce_allowed = await send()
  const deleted = await admin.deleteAcls({ filters: [filter] })
  out.deleted = deleted.filterResponses.reduce((n, f) => n + f.matchingAcls.length, 0)
  out.described_after = (await admin.describeAcls(filter)).resources.length
  await admin.disconnect()
  return out
}

const SCENARIOS = { produce, group, txn, admin: adminScenario, sasl, acl }

async function main() {
  const [scenario, json] = process.argv.slice(2)
  const run = SCENARIOS[scenario]
  if (!run) throw new Error(`unknown scenario ${scenario}`)
  const result = await run(JSON.parse(json))
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`FATAL: ${e && e.stack ? e.stack : e}\n`)
    process.exit(1)
  },
)
