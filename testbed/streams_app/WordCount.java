import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The test bed's Kafka Streams application (testbed/streams_app.py builds and runs it): a word count with a
 * {@code groupBy} (repartition topic {@code <application.id>-words-repartition}), a state store (changelog
 * {@code <application.id>-counts-changelog}) and an output topic, under {@code exactly_once_v2}.
 *
 * <p>The record cache is off, so every input word yields exactly one output record {@code (word, count)}: over all
 * input, the output holds for each word the counts 1..n exactly once, which is what the migration's acceptance test
 * compares with its reference computation.
 *
 * <p>Arguments are {@code --name value} pairs (bootstrap, application-id, input, output, state-dir, group-protocol,
 * purge-interval-ms);
 * client settings that may hold secrets come only from {@code --config-file}, never the command line. Lifecycle lines
 * ("state RUNNING", "stopped") go to stdout for the launcher to wait on.
 */
public final class WordCount {
    private WordCount() {
    }

    public static void main(String[] args) throws IOException, InterruptedException {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            opts.put(args[i].substring(2), args[i + 1]);
        }
        Properties props = new Properties();
        String configFile = opts.get("config-file");
        if (configFile != null) {
            try (InputStream in = new FileInputStream(configFile)) {
                props.load(in);
            }
        }
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, required(opts, "application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, required(opts, "bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, required(opts, "state-dir"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        String protocol = opts.getOrDefault("group-protocol", "classic");
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            // Streams does not leave a classic group on close: its member stays until the session times out
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        }
        // How soon Streams deletes the repartition records it has processed (moves their log start)
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG,
                  Long.parseLong(opts.getOrDefault("purge-interval-ms", "30000")));
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(required(opts, "input"), Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(required(opts, "output"), Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            System.out.println("stopped");
            System.out.flush();
        }));
        streams.start();
        done.await();
    }

    private static String required(Map<String, String> opts, String name) {
        String value = opts.get(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return value;
    }
}
