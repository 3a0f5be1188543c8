// Capture scenario for kafkajs: a broad walk over the APIs it has (see scen_python.py for the protocol:
// `VERSION ...`, then `OK|FAIL|SKIP step detail` lines). Usage: node scen_kafkajs.js BOOTSTRAP
// kafkajs is resolved through NODE_PATH (capture.py points it at the `make clientdeps` cache).
'use strict'
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')
const { version } = require('kafkajs/package.json')

const bootstrap = process.argv[2]
const topic = 'vec-kafkajs'
const group = 'vec-kafkajs-grp'
const headers = { trace: 't-1', empty: '' }
const payload = 'samsa-vector '.repeat(8)
// Tansu's first rebalance waits about the rebalance timeout; keep it short.
const groupTimeoutMs = 10000

function report (status, name, detail) {
  const text = typeof detail === 'string' ? detail : JSON.stringify(detail === undefined ? null : detail)
  console.log(status, name, String(text).replace(/\s+/g, ' ').slice(0, 200))
}

async function step (name, fn, timeoutMs = 20000) {
  let timer
  const deadline = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs)
  })
  try {
    report('OK', name, await Promise.race([fn(), deadline]))
    return true
  } catch (e) {
    report('FAIL', name, `${e.name}: ${e.message}`)
    return false
  } finally {
    clearTimeout(timer)
  }
}

function keyed (n, extra = {}) {
  return Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: `v${i}`, headers, ...extra }))
}

async function main () {
  console.log('VERSION kafkajs', version)
  const kafka = new Kafka({
    clientId: 'vec-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 2 }, requestTimeout: 10000
  })
  const admin = kafka.admin()
  await admin.connect()
  await step('create_topics', () => admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }] }))
  await step('create_partitions', () => admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] }))
  await step('describe_configs', () => admin.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false }))
  await step('alter_configs', () => admin.alterConfigs({
    resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '600000' }] }]
  }))
  await step('describe_cluster', () => admin.describeCluster())
  await step('list_topics', () => admin.listTopics())
  await step('fetch_topic_metadata', () => admin.fetchTopicMetadata({ topics: [topic] }))

  const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: false })
  await producer.connect()
  await step('produce', () => producer.send({ topic, acks: -1, messages: keyed(5) }))
  await step('produce_gzip', () => producer.send({
    topic,
    compression: CompressionTypes.GZIP,
    messages: Array.from({ length: 5 }, () => ({ key: 'c', value: payload, partition: 0 }))
  }))
  // kafkajs ships only gzip; the other codecs need plug-ins and fail before any request.
  for (const codec of ['snappy', 'lz4', 'zstd']) report('SKIP', `produce_${codec}`, 'no codec in kafkajs')
  await producer.disconnect()

  const idempotent = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await step('idempotent_connect', () => idempotent.connect())
  await step('produce_idempotent', () => idempotent.send({ topic, acks: -1, messages: keyed(5) }))
  await idempotent.disconnect()

  const txnProducer = kafka.producer({ transactionalId: 'vec-kafkajs-tx', idempotent: true, maxInFlightRequests: 1 })
  await step('txn_connect', () => txnProducer.connect())
  await step('txn', async () => {
    const txn = await txnProducer.transaction()
    await txn.send({ topic, messages: [{ key: 't', value: 'txn', partition: 1 }] })
    await txn.sendOffsets({ consumerGroupId: `${group}-tx`, topics: [{ topic, partitions: [{ partition: 0, offset: '1' }] }] })
    await txn.commit()
  })
  await txnProducer.disconnect()

  const consumer = kafka.consumer({
    groupId: group, sessionTimeout: groupTimeoutMs, rebalanceTimeout: groupTimeoutMs, heartbeatInterval: 1000, readUncommitted: false
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  let got = 0
  await step('consume_commit', () => new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(got), 40000)
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        got++
        await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
        if (got === 10) { clearTimeout(timer); resolve(got) }
      }
    }).catch(reject)
  }), 45000)
  await step('consumer_disconnect', () => consumer.disconnect())

  await step('fetch_offsets', () => admin.fetchOffsets({ groupId: group, topics: [topic] }))
  await step('fetch_topic_offsets', () => admin.fetchTopicOffsets(topic))
  await step('fetch_topic_offsets_by_timestamp', () => admin.fetchTopicOffsetsByTimestamp(topic, Date.now() - 600000))
  await step('list_groups', () => admin.listGroups())
  await step('describe_groups', () => admin.describeGroups([group]))
  await step('set_offsets', () => admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '2' }] }))
  // Tansu drops the connection on DeleteRecords; the request is on the wire before that.
  await step('delete_records', () => admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '1' }] }), 8000)
  await step('delete_groups', () => admin.deleteGroups([`${group}-tx`]))
  await step('delete_topics', () => admin.deleteTopics({ topics: [topic] }))
  await admin.disconnect()
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(`scenario aborted: ${err.stack || err}\n`)
  process.exit(1)
})
