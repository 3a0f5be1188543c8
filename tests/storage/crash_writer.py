"""Child process of the crash tests: appends forever to a plain and a compacted log, recording each
acknowledged append in an ack file after append returned. The parent kills it with SIGKILL.

Usage: python -m tests.storage.crash_writer DATA_DIR SEED
"""

import os
import random
import sys

from protocol import record_batch as rb
from storage.config import LogConfig
from storage.log_manager import LogManager

PLAIN = LogConfig.from_props({"segment.bytes": 256 * 1024, "index.interval.bytes": 512})
COMPACT = LogConfig.from_props(
    {
        "segment.bytes": 32 * 1024,
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": 0.1,
        "delete.retention.ms": 0,
    }
)
KEYS = 40
TS = 1_700_000_000_000


def value(round_: int, counter: int, size: int) -> bytes:
    tag = b"%d:%d:" % (round_, counter)
    return tag + b"x" * max(0, size - len(tag))


def main() -> None:
    data_dir, seed = sys.argv[1], int(sys.argv[2])
    rnd = random.Random(seed)
    manager = LogManager(
        [os.path.join(data_dir, "logs")], PLAIN, topic_configs={"compact": COMPACT}, cleaner_backoff_ms=20
    )
    manager.start_cleaner()
    plain = manager.get_or_create_log("plain", 0)
    compact = manager.get_or_create_log("compact", 0)
    acks = os.open(os.path.join(data_dir, "acks"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(acks, b"start %d\n" % plain.log_end_offset)
    counter = 0
    while True:
        counter += 1
        n = rnd.randint(1, 5)
        records = [
            rb.Record(i, 1_700_000_000_000 + i, None, value(seed, counter * 10 + i, rnd.randint(5, 300)))
            for i in range(n)
        ]
        info = plain.append_as_leader(bytearray(rb.encode_batch(records, base_offset=0)), leader_epoch=seed)
        plain.update_high_watermark(plain.log_end_offset)
        os.write(acks, b"plain %d %d %d %d\n" % (info.first_offset, info.last_offset, seed, counter))
        key = rnd.randrange(KEYS)
        tombstone = rnd.random() < 0.05
        record = rb.Record(
            0, 1_700_000_000_000, b"k%d" % key, None if tombstone else value(seed, counter, 50)
        )
        info = compact.append_as_leader(
            bytearray(rb.encode_batch([record], base_offset=0)), leader_epoch=seed
        )
        compact.update_high_watermark(compact.log_end_offset)
        os.write(
            acks, b"compact %d %d %d %d\n" % (info.first_offset, key, seed, -1 if tombstone else counter)
        )
        if counter % 50 == 0:
            manager.flush_dirty_logs()
            manager.checkpoint_recovery_offsets()
            manager.checkpoint_high_watermarks()


if __name__ == "__main__":
    main()
