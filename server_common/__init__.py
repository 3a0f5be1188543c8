"""What Samsa's server processes share and neither owns: the configuration machinery, logging setup, the
delayed-operation purgatory, task helpers and replica assignment (Kafka's ``server-common`` module)."""
