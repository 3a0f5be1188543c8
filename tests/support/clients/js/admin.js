// Topic administration with kafkajs's admin client against argv[2]: create argv[4] with 3 partitions and
// retention.ms=3600000, describe it and its config, grow it to 5 partitions, delete it. Prints one JSON
// object with what each step saw; a failure goes to stderr with a non-zero exit.
'use strict'
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')
const { kafkaSecurity } = require('./secure')

async function main () {
  const [bootstrap, timeoutMs, topic] = [process.argv[2], Number(process.argv[3] || 30000), process.argv[4]]
  const kafka = new Kafka({
    clientId: 'samsa-test-kafkajs-admin',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    connectionTimeout: timeoutMs,
    requestTimeout: timeoutMs,
    retry: { retries: 5 },
    ...kafkaSecurity()
  })
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }]
    })
    const listed = (await admin.listTopics()).includes(topic)
    const described = await admin.fetchTopicMetadata({ topics: [topic] })
    const configs = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms'] }]
    })
    await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
    const grown = await admin.fetchTopicMetadata({ topics: [topic] })
    await admin.deleteTopics({ topics: [topic], timeout: timeoutMs })
    const remaining = (await admin.listTopics()).includes(topic)
    process.stdout.write(JSON.stringify({
      created,
      listed,
      partitions: described.topics[0].partitions.length,
      leaders: described.topics[0].partitions.map((p) => p.leader),
      retention_ms: configs.resources[0].configEntries.find((e) => e.configName === 'retention.ms').configValue,
      partitions_after_growth: grown.topics[0].partitions.length,
      listed_after_delete: remaining
    }) + '\n')
  } finally {
    await admin.disconnect()
  }
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(`kafkajs admin failed: ${err.stack || err}\n`)
  process.exit(1)
})
