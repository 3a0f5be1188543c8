// The transactions scenario with kafkajs, run as a subprocess by tests/support/clients/runners.py
// (transactions_kafkajs):
//   node transactions.js BOOTSTRAP TIMEOUT_MS DATA_TOPIC INPUT_TOPIC GROUP TXN_ID PARTITIONS
// The kafkajs twin of py/transactions.py, which describes the scenario and the JSON printed on stdout.
// Where kafkajs differs (reported in "notes" as well):
// - it has no initTransactions(): the first producer.transaction() sends InitProducerId, so "init" here
//   is that call, and its transaction is the producer's next one;
// - sendOffsets takes a group id, not a consumer's group metadata (TxnOffsetCommit v0, no generation);
// - its consumers always belong to a group (no assign()): the readers are consumers of groups of their
//   own from the beginning, and kafkajs exposes no consumer position (positions are null); end offsets
//   by isolation level come from ListOffsets through a private cluster object (see endOffsets);
// - the group's committed offset is read with the admin client's fetchOffsets (OffsetFetch without
//   require_stable), polled until the commit shows.
// kafkajs is resolved through NODE_PATH, which the runner points at the setup.sh cache.
'use strict'
const { Kafka, logLevel } = require('kafkajs')
const { kafkaSecurity } = require('./secure')

const INPUT_COUNT = 6
const TXN_RECORDS = 6
const SETTLE_MS = 1500
const TRANSACTION_TIMEOUT_MS = 60000
const NOTES = [
  'kafkajs has no initTransactions(): its first producer.transaction() sends InitProducerId',
  'kafkajs sendOffsets takes a group id, not the consumer group metadata (TxnOffsetCommit without generation)',
  'kafkajs consumers exist only in groups and expose no position: the readers report no positions',
  'the group committed offset is read with admin.fetchOffsets (OffsetFetch without require_stable)'
]

let opTimeoutMs = 45000
let partitions = 1

function step (name) {
  process.stderr.write(`step ${name}\n`)
}

function errorText (e) {
  return `${e.name}: ${e.message}` + (e.type ? ` [${e.type}]` : '') +
    (e.originalError ? ` <- ${e.originalError.name}: ${e.originalError.message} [${e.originalError.type}]` : '')
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function until (condition, what, timeoutMs = opTimeoutMs) {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(50)
  }
}

function recordsOf (name, count) {
  return Array.from({ length: count }, (_, i) => [i % partitions, `${name}-${i}`])
}

// kafkajs answers a send with each partition's base offset: a record's offset is its partition's base
// plus the records before it in that partition.
function offsetsOf (records, results) {
  const next = new Map(results.map((r) => [r.partition, BigInt(r.baseOffset)]))
  return records.map(([partition]) => {
    const offset = next.get(partition)
    if (offset === undefined || offset < 0n) return null
    next.set(partition, offset + 1n)
    return Number(offset)
  })
}

async function send (sender, topic, records) {
  const results = await sender.send({
    topic,
    acks: -1,
    timeout: opTimeoutMs,
    messages: records.map(([partition, value]) => ({ partition, key: value, value }))
  })
  return offsetsOf(records, results)
}

class TxnProducer {
  constructor (kafka, txnId, topic) {
    this.producer = kafka.producer({
      transactionalId: txnId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: TRANSACTION_TIMEOUT_MS,
      allowAutoTopicCreation: false
    })
    this.topic = topic
    this.txn = null
    this.next = null
  }

  async init () {
    await this.producer.connect()
    this.next = await this.producer.transaction()
  }

  async begin () {
    this.txn = this.next || await this.producer.transaction()
    this.next = null
  }

  send (records) { return send(this.txn, this.topic, records) }
  sendOffsets (group, topic, offset) {
    return this.txn.sendOffsets({
      consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: String(offset) }] }]
    })
  }

  commit () { return this.txn.commit() }
  abort () { return this.txn.abort() }
  close () { return this.producer.disconnect() }
}

async function quietly (action) {
  try {
    await action()
  } catch (e) {
    process.stderr.write(`ignored on close: ${errorText(e)}\n`)
  }
}

// A consumer of its own group reading every partition from the beginning.
async function read (kafka, topic, group, isolation, expected) {
  const consumer = kafka.consumer({
    groupId: group,
    readUncommitted: isolation === 'read_uncommitted',
    maxWaitTimeInMs: 200,
    allowAutoTopicCreation: false
  })
  const out = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        out.push([partition, Number(message.offset), message.value.toString()])
      }
    })
    await until(() => out.length >= expected, `${expected} records (${isolation})`).catch(() => {})
    await sleep(SETTLE_MS)
  } finally {
    await consumer.disconnect()
  }
  return { records: out, positions: null, end_offsets: await endOffsets(kafka, topic, isolation) }
}

// kafkajs has no end offsets by isolation level in its API (the admin client's fetchTopicOffsets always
// asks read_committed): this asks ListOffsets through a cluster object of the isolation level, which
// Kafka keeps behind a private symbol (kafkajs 2.2.4), as records.js does for Fetch.
async function endOffsets (kafka, topic, isolation) {
  const symbol = Object.getOwnPropertySymbols(kafka).find((s) => s.description === 'private:Kafka:createCluster')
  const cluster = kafka[symbol]({ allowAutoTopicCreation: false, isolationLevel: isolation === 'read_committed' ? 1 : 0 })
  await cluster.connect()
  try {
    await cluster.addTargetTopic(topic)
    const wanted = Array.from({ length: partitions }, (_, p) => ({ partition: p }))
    const [found] = await cluster.fetchTopicsOffset([{ topic, fromBeginning: false, partitions: wanted }])
    return Object.fromEntries(found.partitions.map(({ partition, offset }) => [partition, Number(offset)]))
  } finally {
    await cluster.disconnect()
  }
}

async function committed (admin, group, topic) {
  const [found] = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  const partition = found.partitions.find((p) => p.partition === 0)
  return partition === undefined || Number(partition.offset) < 0 ? null : Number(partition.offset)
}

async function main () {
  const [bootstrap, timeoutMs, data, input, group, txnId, partitionCount] = process.argv.slice(2)
  opTimeoutMs = Math.min(opTimeoutMs, Number(timeoutMs))
  partitions = Number(partitionCount)
  const kafka = new Kafka({
    clientId: 'samsa-test-txn-kafkajs',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    connectionTimeout: opTimeoutMs,
    requestTimeout: opTimeoutMs,
    retry: { retries: 10 },
    ...kafkaSecurity()
  })
  const txns = []
  const written = (name, outcome, records, acked) => {
    txns.push({ name, outcome, records: records.map(([p, v], i) => [p, v, acked[i]]) })
  }
  const transaction = async (producer, name, outcome, count = TXN_RECORDS) => {
    step(name)
    await producer.begin()
    const records = recordsOf(name, count)
    const acked = records.length ? await producer.send(records) : []
    await (outcome === 'commit' ? producer.commit() : producer.abort())
    written(name, outcome, records, acked)
  }

  step('seed')
  const seeder = kafka.producer({ allowAutoTopicCreation: false })
  await seeder.connect()
  await send(seeder, input, Array.from({ length: INPUT_COUNT }, (_, i) => [0, `in-${i}`]))
  await seeder.disconnect()

  step('init P1')
  const p1 = new TxnProducer(kafka, txnId, data)
  await p1.init()
  await transaction(p1, 'commit-1', 'commit')
  await transaction(p1, 'abort-1', 'abort')
  await transaction(p1, 'back-1', 'commit')
  await transaction(p1, 'back-2', 'commit')
  await transaction(p1, 'empty', 'commit', 0)

  step('group consumer')
  const admin = kafka.admin()
  await admin.connect()
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200, allowAutoTopicCreation: false })
  const inputRead = []
  await consumer.connect()
  await consumer.subscribe({ topics: [input], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => { inputRead.push(Number(message.offset)) }
  })
  await until(() => inputRead.length >= INPUT_COUNT, 'the input records')
  const offsets = { input_read: inputRead }

  step('offsets-abort')
  await p1.begin()
  let records = recordsOf('offsets-abort', INPUT_COUNT / 2)
  let acked = await p1.send(records)
  await p1.sendOffsets(group, input, INPUT_COUNT / 2)
  await p1.abort()
  written('offsets-abort', 'abort', records, acked)
  offsets.after_abort = await committed(admin, group, input)

  step('offsets-commit')
  await p1.begin()
  records = recordsOf('offsets-commit', INPUT_COUNT)
  acked = await p1.send(records)
  await p1.sendOffsets(group, input, INPUT_COUNT)
  await p1.commit()
  written('offsets-commit', 'commit', records, acked)
  // The commit's markers reach __consumer_offsets after EndTxn returns: read until they show.
  const deadline = Date.now() + opTimeoutMs
  offsets.after_commit = await committed(admin, group, input)
  while (offsets.after_commit !== INPUT_COUNT && Date.now() < deadline) {
    await sleep(200)
    offsets.after_commit = await committed(admin, group, input)
  }
  await consumer.disconnect()

  step('init P2 (fences P1)')
  const p2 = new TxnProducer(kafka, txnId, data)
  await p2.init()
  let fenced = null
  let where = 'begin'
  try {
    await p1.begin()
    where = 'send'
    await p1.send(recordsOf('fenced', 3))
    where = 'commit'
    await p1.commit()
  } catch (e) {
    fenced = { step: where, error: errorText(e) }
  }
  await quietly(() => p1.close())
  await transaction(p2, 'fencer-1', 'commit')
  await p2.close()

  step('init P3 (restart)')
  const p3 = new TxnProducer(kafka, txnId, data)
  await p3.init()
  await transaction(p3, 'restart-1', 'commit')
  step('crashed')
  await p3.begin()
  records = recordsOf('crashed', TXN_RECORDS)
  // Aborted by P4's init: P3 stays as a crash leaves it, its transaction open, until P4 has the id.
  written('crashed', 'abort', records, await p3.send(records))
  // While it is open, read_committed stops at its first record (the last stable offset).
  const count = (outcomes) => txns.filter((t) => outcomes.includes(t.outcome)).reduce((n, t) => n + t.records.length, 0)
  step('read_committed (open)')
  const rcOpen = await read(kafka, data, `${group}-read-committed-open`, 'read_committed', count(['commit']))
  step('read_uncommitted (open)')
  const ruOpen = await read(kafka, data, `${group}-read-uncommitted-open`, 'read_uncommitted', count(['commit', 'abort']))
  step('init P4 (after the crash)')
  const p4 = new TxnProducer(kafka, txnId, data)
  await p4.init()
  await transaction(p4, 'recovered-1', 'commit')
  await p4.close()
  await quietly(() => p3.close())

  step('read_committed')
  const rc = await read(kafka, data, `${group}-read-committed`, 'read_committed', count(['commit']))
  step('read_uncommitted')
  const ru = await read(kafka, data, `${group}-read-uncommitted`, 'read_uncommitted', count(['commit', 'abort']))
  await admin.disconnect()
  return {
    txns,
    offsets,
    fenced,
    read_committed: rc,
    read_uncommitted: ru,
    read_committed_open: rcOpen,
    read_uncommitted_open: ruOpen,
    notes: NOTES
  }
}

// A pipe takes a large write asynchronously: exit only once it is flushed.
main().then((result) => process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0)), (err) => {
  process.stderr.write(`kafkajs failed: ${err.stack || err}\n`)
  process.exit(1)
})
