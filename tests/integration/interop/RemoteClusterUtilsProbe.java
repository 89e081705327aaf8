// What MirrorMaker 2's client tooling reads from a target cluster: upstream clusters, replication hops and
// translated offsets of groups (from <alias>.checkpoints.internal). Run in source-file mode:
//   java -cp <connect-mirror-client and kafka-clients jars> RemoteClusterUtilsProbe.java <bootstrap> <alias> <group>...
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class RemoteClusterUtilsProbe {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        String alias = args[1];
        System.out.println("upstreamClusters " + String.join(",", new TreeSet<>(RemoteClusterUtils.upstreamClusters(props))));
        System.out.println("replicationHops " + RemoteClusterUtils.replicationHops(props, alias));
        for (int i = 2; i < args.length; i++) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, alias, args[i], Duration.ofSeconds(30));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                System.out.println("offset " + args[i] + " " + e.getKey().topic() + " " + e.getKey().partition() + " "
                    + e.getValue().offset());
            }
        }
    }
}
