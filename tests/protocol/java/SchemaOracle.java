// Re-encodes messages with Kafka's own generated classes (the kafka-clients jar), as an independent check
// of Samsa's codecs. Reads lines "request|response API_KEY VERSION HEX" from stdin and prints, per line,
// "OK HEX" (the bytes Kafka writes after reading ours) or "ERR message".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.message.ApiMessageType;

public class SchemaOracle {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            try {
                ApiMessageType type = ApiMessageType.fromApiKey(Short.parseShort(f[1]));
                short version = Short.parseShort(f[2]);
                ApiMessage message = f[0].equals("request") ? type.newRequest() : type.newResponse();
                ByteBuffer input = ByteBuffer.wrap(f.length > 3 ? hex.parseHex(f[3]) : new byte[0]);
                message.read(new ByteBufferAccessor(input), version);
                if (input.remaining() != 0) {
                    throw new IllegalStateException(input.remaining() + " bytes left unread");
                }
                ObjectSerializationCache cache = new ObjectSerializationCache();
                ByteBuffer output = ByteBuffer.allocate(message.size(cache, version));
                message.write(new ByteBufferAccessor(output), cache, version);
                System.out.println("OK " + hex.formatHex(output.array()));
            } catch (Exception e) {
                System.out.println("ERR " + e.toString().replace('\n', ' '));
            }
        }
    }
}
