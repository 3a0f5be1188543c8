// Bootstrap check with kafkajs: admin describeCluster() and listTopics() against argv[2] ("host:port").
// Prints one JSON object on stdout; any failure goes to stderr with a non-zero exit.
// kafkajs is resolved through NODE_PATH, which tests/support/clients/runners.py points at the setup.sh cache.
'use strict'
const { Kafka, logLevel } = require('kafkajs')
const { kafkaSecurity } = require('./secure')

async function main () {
  const [bootstrap, timeoutMs] = [process.argv[2], Number(process.argv[3] || 30000)]
  const kafka = new Kafka({
    clientId: 'samsa-test-kafkajs',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    connectionTimeout: timeoutMs,
    requestTimeout: timeoutMs,
    retry: { retries: 2 },
    ...kafkaSecurity()
  })
  const admin = kafka.admin()
  await admin.connect()
  try {
    const cluster = await admin.describeCluster()
    const topics = await admin.listTopics()
    process.stdout.write(JSON.stringify({
      cluster_id: cluster.clusterId,
      controller_id: cluster.controller,
      brokers: cluster.brokers.map((b) => ({ node_id: b.nodeId, host: b.host, port: b.port })),
      topics
    }) + '\n')
  } finally {
    await admin.disconnect()
  }
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(`kafkajs bootstrap failed: ${err.stack || err}\n`)
  process.exit(1)
})
