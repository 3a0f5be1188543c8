// The security settings of the kafkajs scripts beside this file, as kafkajs's Kafka() options.
// tests/support/clients/runners.py hands them over as JSON in $SAMSA_CLIENT_SECURITY (the fields of
// runners.Security: protocol, ca, certificate, key, key_password, mechanism, username, password,
// verify_hostname); unset or PLAINTEXT adds nothing.
//   ssl:  { ca: [PEM], cert: PEM, key: PEM, passphrase, checkServerIdentity } (Node's tls.connect options;
//         kafkajs uses TLS when `ssl` is given, whatever else is)
//   sasl: { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512', username, password }
'use strict'
const fs = require('fs')

function kafkaSecurity () {
  const text = process.env.SAMSA_CLIENT_SECURITY
  if (!text) return {}
  const s = JSON.parse(text)
  const options = {}
  if (s.protocol === 'SSL' || s.protocol === 'SASL_SSL') {
    const ssl = { rejectUnauthorized: true }
    if (s.ca) ssl.ca = [fs.readFileSync(s.ca, 'utf8')]
    if (s.certificate) ssl.cert = fs.readFileSync(s.certificate, 'utf8')
    if (s.key) ssl.key = fs.readFileSync(s.key, 'utf8')
    if (s.key_password) ssl.passphrase = s.key_password
    // Node checks the server's name (or IP) against its certificate unless told otherwise.
    if (s.verify_hostname === false) ssl.checkServerIdentity = () => undefined
    options.ssl = ssl
  }
  if (s.protocol === 'SASL_PLAINTEXT' || s.protocol === 'SASL_SSL') {
    options.sasl = { mechanism: s.mechanism.toLowerCase(), username: s.username, password: s.password }
  }
  return options
}

module.exports = { kafkaSecurity }
