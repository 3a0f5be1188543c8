// Down-conversion as Kafka 3.9 does it, to check protocol/down_convert.py against: reads lines
// "TO_MAGIC FIRST_OFFSET V2_HEX OURS_HEX" from stdin and prints, per line, three lines:
//   "KAFKA <hex>"  what Kafka's MemoryRecords.downConvert makes of V2_HEX,
//   "READ <dump>"  Kafka's reading of its own conversion,
//   "OURS <dump>"  Kafka's reading of OURS_HEX (Samsa's conversion),
// or "ERR message" once when something throws. A dump lists each batch (magic, codec, timestamp type,
// base and last offset, CRC validity) and its records (offset, timestamp, key, value), as a consumer sees them.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.utils.Time;

public class DownConvertOracle {
    static final HexFormat HEX = HexFormat.of();

    static String bytes(ByteBuffer b) {
        if (b == null) return "null";
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return HEX.formatHex(a);
    }

    static String dump(MemoryRecords records) {
        StringBuilder s = new StringBuilder();
        for (MutableRecordBatch batch : records.batches()) {
            s.append("[batch magic=").append(batch.magic())
             .append(" codec=").append(batch.compressionType().id)
             .append(" tstype=").append(batch.timestampType().id)
             .append(" base=").append(batch.baseOffset())
             .append(" last=").append(batch.lastOffset())
             .append(" maxts=").append(batch.maxTimestamp())
             .append(" valid=").append(batch.isValid());
            for (Record r : batch) {
                s.append(" (").append(r.offset()).append(',').append(r.timestamp()).append(',')
                 .append(bytes(r.key())).append(',').append(bytes(r.value())).append(')');
            }
            s.append(']');
        }
        return s.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ", -1);
            try {
                byte magic = Byte.parseByte(f[0]);
                long firstOffset = Long.parseLong(f[1]);
                MemoryRecords v2 = MemoryRecords.readableRecords(ByteBuffer.wrap(HEX.parseHex(f[2])));
                MemoryRecords kafka = v2.downConvert(magic, firstOffset, Time.SYSTEM).records();
                MemoryRecords ours = MemoryRecords.readableRecords(ByteBuffer.wrap(HEX.parseHex(f[3])));
                String kafkaHex = bytes(kafka.buffer());
                String read = dump(kafka);
                String oursRead = dump(ours);
                System.out.println("KAFKA " + kafkaHex);
                System.out.println("READ " + read);
                System.out.println("OURS " + oursRead);
            } catch (Exception e) {
                System.out.println("ERR " + e.toString().replace('\n', ' '));
            }
        }
    }
}
