// Produce and consume with kafkajs, run as a subprocess by tests/support/clients/runners.py (see
// tests/support/clients/py/records.py for the input file and the JSON printed on stdout). Usage:
//   node records.js HOST:PORT TIMEOUT_MS produce TOPIC CODEC ACKS IDEMPOTENT INPUT
//   node records.js HOST:PORT TIMEOUT_MS consume TOPIC PARTITIONS EXPECTED
//   node records.js HOST:PORT TIMEOUT_MS consume-group TOPIC GROUP EXPECTED
// Security settings come from $SAMSA_CLIENT_SECURITY (secure.js).
// kafkajs is resolved through NODE_PATH, which the runner points at the setup.sh cache.
'use strict'
const fs = require('fs')
const { Kafka, logLevel, CompressionTypes, Partitioners } = require('kafkajs')
const { kafkaSecurity } = require('./secure')

// kafkajs takes a whole array per send(): chunks keep each Produce request well under a batch limit.
const CHUNK = 2000
const POLL_MS = 200
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

function client (bootstrap, timeoutMs) {
  return new Kafka({
    clientId: 'samsa-test-kafkajs',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    connectionTimeout: timeoutMs,
    requestTimeout: timeoutMs,
    retry: { retries: 2 },
    ...kafkaSecurity()
  })
}

function readInput (path) {
  return fs.readFileSync(path, 'utf8').split('\n').filter((line) => line).map((line) => {
    const [key, value, timestamp, ...pairs] = line.split('\t')
    const headers = {}
    for (let i = 0; i < pairs.length; i += 2) headers[pairs[i]] = pairs[i + 1]
    return { key, value, timestamp, headers }
  })
}

async function produce (kafka, timeoutMs, [topic, codec, acks, idempotent, input]) {
  const messages = readInput(input)
  if (!(codec in CODECS)) throw new Error(`kafkajs has no ${codec} codec`)
  // kafkajs does not tell which partition a message went to, only each partition's base offset:
  // the default partitioner is wrapped to remember its choice per message.
  const chosen = new Map()
  const producer = kafka.producer({
    idempotent: idempotent === '1',
    maxInFlightRequests: idempotent === '1' ? 1 : undefined,
    allowAutoTopicCreation: false,
    createPartitioner: () => {
      const partitioner = Partitioners.DefaultPartitioner()
      return (args) => {
        const partition = partitioner(args)
        chosen.set(args.message, partition)
        return partition
      }
    }
  })
  await producer.connect()
  const started = Date.now()
  const acked = []
  try {
    for (let start = 0; start < messages.length; start += CHUNK) {
      const chunk = messages.slice(start, start + CHUNK)
      const results = await producer.send({
        topic, messages: chunk, acks: Number(acks), timeout: timeoutMs, compression: CODECS[codec]
      })
      const next = new Map(results.map((r) => [r.partition, BigInt(r.baseOffset)]))
      chunk.forEach((message, i) => {
        const partition = chosen.get(message)
        const offset = next.get(partition)
        if (offset !== undefined && offset >= 0n) next.set(partition, offset + 1n)
        acked.push([start + i, partition, offset === undefined || offset < 0n ? null : Number(offset)])
      })
    }
  } finally {
    await producer.disconnect()
  }
  return { acks: acked, seconds: (Date.now() - started) / 1000 }
}

function b64 (buffer) {
  return buffer == null ? null : Buffer.from(buffer).toString('base64')
}

function consumedHeaders (headers) {
  const out = []
  for (const [name, value] of Object.entries(headers || {})) {
    // kafkajs folds repeated header names into an array.
    for (const v of Array.isArray(value) ? value : [value]) out.push([b64(Buffer.from(name)), b64(v)])
  }
  return out
}

// kafkajs has no consumer without a group (no assign()), so this reads with the client's own Fetch
// through its cluster object, which Kafka keeps behind a private symbol (kafkajs 2.2.4).
async function consume (kafka, timeoutMs, [topic, partitions, expected]) {
  const symbol = Object.getOwnPropertySymbols(kafka).find((s) => s.description === 'private:Kafka:createCluster')
  const cluster = kafka[symbol]({ allowAutoTopicCreation: false })
  await cluster.connect()
  const started = Date.now()
  const out = []
  try {
    await cluster.addTargetTopic(topic)
    const all = Array.from({ length: Number(partitions) }, (_, p) => p)
    const positions = new Map(all.map((p) => [p, 0n]))
    while (out.length < Number(expected) && Date.now() - started < timeoutMs) {
      const byLeader = cluster.findLeaderForPartitions(topic, all)
      for (const [nodeId, leaderPartitions] of Object.entries(byLeader)) {
        const broker = await cluster.findBroker({ nodeId })
        const response = await broker.fetch({
          replicaId: -1,
          isolationLevel: 1,
          maxWaitTime: POLL_MS,
          topics: [{
            topic,
            partitions: leaderPartitions.map((p) => ({ partition: p, fetchOffset: positions.get(p).toString(), maxBytes: 1048576 }))
          }]
        })
        for (const { partitions: results } of response.responses) {
          for (const { partition, messages } of results) {
            for (const m of messages) {
              const offset = BigInt(m.offset)
              // A compressed batch is returned whole: skip what precedes the position, and control records.
              if (offset < positions.get(partition) || m.isControlRecord) continue
              out.push([partition, Number(offset), Number(m.timestamp), b64(m.key), b64(m.value), consumedHeaders(m.headers)])
              positions.set(partition, offset + 1n)
            }
          }
        }
      }
    }
  } finally {
    await cluster.disconnect()
  }
  return { records: out, seconds: (Date.now() - started) / 1000 }
}

// In a group: subscribe (from the beginning where the group has no offset), read through
// consumer.run() until EXPECTED records or the deadline, commit the next offset of each partition read,
// disconnect (leaving the group).
async function consumeGroup (kafka, timeoutMs, [topic, group, expected]) {
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: POLL_MS, retry: { retries: 2 } })
  await consumer.connect()
  const started = Date.now()
  const out = []
  const next = new Map()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    let done
    const finished = new Promise((resolve) => { done = resolve })
    const timer = setTimeout(done, Math.max(0, timeoutMs - (Date.now() - started)))
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (out.length >= Number(expected)) return
        const offset = Number(message.offset)
        out.push([partition, offset, Number(message.timestamp), b64(message.key), b64(message.value), consumedHeaders(message.headers)])
        next.set(partition, offset + 1)
        if (out.length >= Number(expected)) done()
      }
    })
    await finished
    clearTimeout(timer)
    // While the consumer runs: kafkajs commits only through a running group (stop() leaves it).
    if (next.size > 0) {
      await consumer.commitOffsets(Array.from(next, ([partition, offset]) => ({ topic, partition, offset: String(offset) })))
    }
    await consumer.stop()
  } finally {
    await consumer.disconnect()
  }
  return { records: out, seconds: (Date.now() - started) / 1000 }
}

const MODES = { produce, consume, 'consume-group': consumeGroup }

async function main () {
  const [bootstrap, timeoutMs, mode, ...args] = process.argv.slice(2)
  const kafka = client(bootstrap, Number(timeoutMs))
  return MODES[mode](kafka, Number(timeoutMs), args)
}

// A pipe takes a large write asynchronously: exit only once it is flushed.
main().then((result) => process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0)), (err) => {
  process.stderr.write(`kafkajs failed: ${err.stack || err}\n`)
  process.exit(1)
})
