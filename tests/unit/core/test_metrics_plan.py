"""Metric names per migration, bounded; what a batch, a promotion, a translation and a decode check send."""

from __future__ import annotations

import pytest

from kafka_ferry.core.observability.metrics_plan import (
    Metric,
    MetricNameError,
    batch_metrics,
    decode_metrics,
    metric_name,
    promotion_metrics,
    translation_metrics,
)

TAGS = (("migration", "mig"),)


def test_a_batch_sends_records_bytes_lag_and_duration():
    report = {"migration": "mig", "records_copied": 120, "bytes_copied": 4800, "lag_before_total": 120,
              "lag_after_total": 3, "duration_s": 2.5}
    assert batch_metrics(report) == [
        Metric("incr", "kafka_ferry.mig.batch.records_copied", 120, TAGS),
        Metric("incr", "kafka_ferry.mig.batch.bytes_copied", 4800, TAGS),
        Metric("gauge", "kafka_ferry.mig.batch.lag_before", 120, TAGS),
        Metric("gauge", "kafka_ferry.mig.batch.lag_after", 3, TAGS),
        Metric("timing", "kafka_ferry.mig.batch.duration", 2500.0, TAGS),
        Metric("incr", "kafka_ferry.mig.batch.count", 1, TAGS),
    ]


def test_a_promotion_times_the_steps_it_ran_not_those_it_resumed():
    metrics = promotion_metrics("mig", {"final_copy": {"status": "resumed"},
                                        "commit_offsets": {"status": "done", "duration_s": 0.25}})
    assert metrics == [Metric("timing", "kafka_ferry.mig.promotion.commit_offsets", 250.0,
                              (("migration", "mig"), ("step", "commit_offsets")))]


def test_translation_methods_become_safe_name_parts():
    metrics = translation_metrics("mig", {"decisions": 3, "flagged": ["x"],
                                          "methods": {"exact-sync": 2, "clamped.beyond copy": 1}})
    names = {m.name: m.value for m in metrics}
    assert names == {"kafka_ferry.mig.translation.decisions": 3, "kafka_ferry.mig.translation.flagged": 1,
                     "kafka_ferry.mig.translation.method.exact-sync": 2,
                     "kafka_ferry.mig.translation.method.clamped_beyond_copy": 1}


def test_decode_failures_and_migration_faults_are_counted():
    metrics = decode_metrics("mig", {"failed": 4, "migration_faults": [{"records": 2}, {"records": 1}]})
    assert [(m.name, m.value) for m in metrics] == [("kafka_ferry.mig.decode.failures", 4),
                                                    ("kafka_ferry.mig.decode.migration_faults", 3)]


@pytest.mark.parametrize(("migration", "part"), [("Mig", "x"), ("mig", "a.b"), ("mig", ""), ("mig", "a:b|c"),
                                                 ("", "x"), ("mig", "x" * 81)])
def test_a_value_that_could_forge_another_metric_is_refused(migration, part):
    with pytest.raises(MetricNameError):
        metric_name(migration, part)
