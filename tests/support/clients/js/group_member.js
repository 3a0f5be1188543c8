// One kafkajs consumer-group member against argv[2] (argv[3]: timeout in ms), for the consumer-group tests:
//   node group_member.js BOOTSTRAP TIMEOUT_MS TOPIC GROUP SESSION_MS
// It subscribes to TOPIC from the beginning and, without auto-commit, commits each record's offset + 1
// after "processing" it (printing it). One JSON object per stdout line, each with "ts" (epoch ms):
//   {"event": "assigned", "member": ID, "generation": G, "partitions": [...]}  after each rebalance
//   {"event": "record", "partition": P, "offset": O}
//   {"event": "committed", "partition": P, "offset": O}      a commit that succeeded (O: next to read)
//   {"event": "commit_failed", "partition": P, "offset": O, "error": "..."}
//   {"event": "closed"}                                       after leaving the group
// A line "close" on stdin (or its end) disconnects, which leaves the group.
'use strict'
const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')
const { kafkaSecurity } = require('./secure')

const HEARTBEAT_MS = 500
const MAX_WAIT_MS = 200

function emit (event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ts: Date.now(), ...fields }) + '\n')
}

async function main () {
  const [bootstrap, timeoutMs, topic, group, sessionMs] = process.argv.slice(2)
  const kafka = new Kafka({
    clientId: 'samsa-test-kafkajs-group',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    connectionTimeout: Number(timeoutMs),
    requestTimeout: Number(timeoutMs),
    retry: { retries: 10 },
    ...kafkaSecurity()
  })
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: Number(sessionMs),
    heartbeatInterval: HEARTBEAT_MS,
    rebalanceTimeout: 30000,
    maxWaitTimeInMs: MAX_WAIT_MS,
    retry: { retries: 10 }
  })
  // kafkajs tells the generation only in its heartbeats: an assignment is reported with the generation
  // of the first heartbeat after the join that produced it.
  let joined = null
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    joined = { member: payload.memberId, partitions: (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b) }
  })
  consumer.on(consumer.events.HEARTBEAT, ({ payload }) => {
    if (joined !== null) {
      emit('assigned', { ...joined, generation: payload.groupGenerationId })
      joined = null
    }
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => emit('crash', { error: String(payload.error) }))

  let closing = false
  const close = async () => {
    if (closing) return
    closing = true
    await consumer.disconnect()
    emit('closed')
    process.exit(0)
  }
  readline.createInterface({ input: process.stdin })
    .on('line', (line) => { if (line.trim() === 'close') close() })
    .on('close', close)

  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const next = Number(message.offset) + 1
      emit('record', { partition, offset: next - 1 })
      try {
        await consumer.commitOffsets([{ topic, partition, offset: String(next) }])
        emit('committed', { partition, offset: next })
      } catch (err) {
        emit('commit_failed', { partition, offset: next, error: String(err) })
      }
    }
  })
}

main().catch((err) => {
  process.stderr.write(`kafkajs group member failed: ${err.stack || err}\n`)
  process.exit(1)
})
