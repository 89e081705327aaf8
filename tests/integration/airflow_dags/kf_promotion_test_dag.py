"""Airflow DAG for test_promotion_dag: a stand-in catch-up path and the real promotion tasks of dag_promotion."""
import os
from pathlib import Path

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.dag_promotion import add_mode_branch, add_promotion_tasks, add_translation_tasks, trigger_params

SPEC = Path(os.environ["KF_SPEC"])
spec = load_spec(SPEC)
with DAG("kf_promo_test", params=trigger_params(spec.name), schedule=None) as dag:
    branch = add_mode_branch(None, catch_up_entry="plan_copy")
    report = EmptyOperator(task_id="copy_report")
    branch >> EmptyOperator(task_id="plan_copy") >> report
    add_translation_tasks(dag, SPEC, report)
    add_promotion_tasks(dag, spec, SPEC, branch)
