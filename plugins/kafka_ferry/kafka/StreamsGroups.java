// kafka-ferry's one call the Python client (librdkafka) lacks: KIP-1071 streams groups (Kafka 4.2+), listed and
// described with Kafka's own Admin client (ListGroups with the streams type, StreamsGroupDescribe, API key 89).
// Run by kafka_ferry/kafka/streams_groups.py as: java -cp <kafka-clients jars>:<classes> StreamsGroups <props-file>
// The properties file (0600, deleted after the run) holds the client settings, credentials included; group ids come
// on stdin, one a line. stdout: one JSON object per line, {"listed": [...]} first, then one per group asked for:
// {"group", "state", "members", "source_topics", "internal_topics"} or {"group", "error", "message"}.
// Nothing else is printed on stdout; the client's own log goes to stderr (slf4j without a binding prints nothing).

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.common.KafkaFuture;

public final class StreamsGroups {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (InputStreamReader in = new InputStreamReader(new FileInputStream(args[0]), StandardCharsets.UTF_8)) {
            props.load(in);
        }
        List<String> groups = new ArrayList<>();
        try (BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line = stdin.readLine(); line != null; line = stdin.readLine()) {
                if (!line.isEmpty()) groups.add(line);
            }
        }
        try (Admin admin = Admin.create(props)) {
            TreeSet<String> ids = new TreeSet<>();
            String listError = null;
            try {
                for (GroupListing g : admin.listGroups(ListGroupsOptions.forStreamsGroups()).all().get()) {
                    ids.add(g.groupId());
                }
            } catch (ExecutionException e) { // a broker before KIP-1071 has no streams group to list
                Throwable cause = e.getCause() == null ? e : e.getCause();
                listError = cause.getClass().getSimpleName() + ": " + cause.getMessage();
            }
            System.out.println("{\"listed\": " + array(ids)
                + (listError == null ? "" : ", \"list_error\": " + quote(listError)) + "}");
            if (groups.isEmpty()) return;
            Map<String, KafkaFuture<StreamsGroupDescription>> described =
                admin.describeStreamsGroups(groups).describedGroups();
            for (String group : groups) {
                try {
                    System.out.println(describe(described.get(group).get()));
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause() == null ? e : e.getCause();
                    System.out.println("{\"group\": " + quote(group) + ", \"error\": "
                        + quote(cause.getClass().getSimpleName()) + ", \"message\": "
                        + quote(String.valueOf(cause.getMessage())) + "}");
                }
            }
        }
    }

    static String describe(StreamsGroupDescription d) {
        TreeSet<String> sources = new TreeSet<>();
        TreeSet<String> internal = new TreeSet<>();
        for (StreamsGroupSubtopologyDescription s : d.subtopologies()) {
            sources.addAll(s.sourceTopics());
            internal.addAll(s.repartitionSinkTopics());
            internal.addAll(s.repartitionSourceTopics().keySet());
            internal.addAll(s.stateChangelogTopics().keySet());
        }
        sources.removeAll(internal); // a repartition topic is read too: the application's own, not its input
        return "{\"group\": " + quote(d.groupId()) + ", \"state\": " + quote(d.groupState().name())
            + ", \"members\": " + d.members().size() + ", \"source_topics\": " + array(sources)
            + ", \"internal_topics\": " + array(internal) + "}";
    }

    static String array(Collection<String> items) {
        StringBuilder out = new StringBuilder("[");
        for (String item : items) {
            if (out.length() > 1) out.append(", ");
            out.append(quote(item));
        }
        return out.append("]").toString();
    }

    static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }
}
