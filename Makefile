# kafka-ferry: the two commands a newcomer needs are `make demo` and `make test`; `make help` lists every target.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)

.PHONY: help install standalone standalone-down demo demo-secure demo-promote e2e screenshots test test-long test-matrix test-faults test-unit test-integration testbed-up testbed-down testbed-status lint typecheck dags check-spec spec-reference routes-table docs lock clean

## Create ./.venv from the pinned constraints.txt (every target that needs Python runs it first).
install: $(STAMP)

# The editable install leaves plugins/kafka_ferry.egg-info beside the package, and puts plugins/ on sys.path:
# Python then sees the distribution twice, Airflow loads its `airflow.plugins` entry point twice and shows
# "Plugin 'kafka_ferry' already registered" as a red import error on every page. The installed metadata is in
# the venv's site-packages; the copy in the source tree is only in the way, so the recipe removes it.
# (Comments stay above the rule: a `#` line inside a recipe is a shell line that make echoes.)
$(STAMP): pyproject.toml constraints.txt
	@echo "install: $(VENV) from constraints.txt (pip, quiet; minutes the first time)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade "pip>=24"
	@$(PY) -m pip install -q -c constraints.txt -e ".[test]"
	@rm -rf plugins/*.egg-info
	@# a pyspark/pyspark-client mismatch shows in this import
	@$(PY) -c "import pyspark, airflow, confluent_kafka, kafka_ferry"
	@rm -f $(VENV)/.installed-* && touch $@

## Start the two local Kafka clusters (source 127.0.0.1:19092, destination :29092; ports: docs/testbed.md).
testbed-up:
	$(PYTHON) testbed/kafka_testbed.py up

## Stop the test bed's clusters (the demo's registries stop with the demo; data stays in .testbed/).
testbed-down:
	$(PYTHON) testbed/kafka_testbed.py down

## `airflow standalone` of the exported AIRFLOW_HOME in the background, in its own process group (ports: docs/testbed.md).
standalone: install
	$(PY) testbed/airflow_standalone.py up

## Stop that `airflow standalone`: its whole process group and any worker that left it.
standalone-down: install
	$(PY) testbed/airflow_standalone.py down

## Whether the test bed's clusters run, and where.
testbed-status:
	$(PYTHON) testbed/kafka_testbed.py status

## The main job on the embedded default: local test bed, Airflow on SQLite, Spark local[*].
demo: install testbed-up
	$(PY) testbed/demo.py

## The demo tenant's sensor-gated promotion (run `make demo` first); resets the promotion afterwards.
demo-promote: install testbed-up
	$(PY) testbed/demo.py promote

## `make demo` over the SASL_SSL listeners, as two principals holding exactly the minimum ACLs (made per run).
demo-secure: install testbed-up
	$(PY) testbed/demo.py --secure

## The production-like stack (PostgreSQL, Airflow services, Chromium) against the test bed (takes minutes).
e2e: install testbed-up
	$(PY) -m pytest -q $(PYTEST_ARGS) tests/e2e

## Refresh the manual's pictures (docs/screenshots/*.png): the browser tests that take them, told to write there.
## Every other run of these tests writes its pictures to its own temp dir and leaves the checkout as it was.
screenshots: install testbed-up
	KFERRY_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PY) -m pytest -q $(PYTEST_ARGS) tests/e2e \
		tests/integration/test_backlog_and_progress.py::test_run_page_overview_and_a_running_batch_in_a_browser \
		tests/integration/test_topic_rollback.py::test_one_promoted_topic_rolls_back_while_another_stays_promoted

## Every test but the fault matrix, the long suites and the end-to-end stack.
## Pure units, then integration against the real two-cluster test bed.
test: install
	$(PY) -m pytest -q --durations=20 -m "not long" $(PYTEST_ARGS) --ignore=tests/integration/faults --ignore=tests/e2e

## The long integration suites (marker `long`), minutes each.
## Rollback, the first-migration walk-through, Airflow-native events, the work dir on S3; CI runs them in its second
## lane, after the fault matrix and the end-to-end stack.
## LONG_PATHS narrows it (CI splits the long suites over its two lanes; by default all of them).
LONG_PATHS ?= tests/integration
test-long: install
	$(PY) -m pytest -q --durations=10 -m long $(PYTEST_ARGS) $(LONG_PATHS) --ignore=tests/integration/faults \
		--ignore=tests/integration/test_route_matrix.py

## The route matrix (marker `long`): every mode of the trigger form in every state a migration can be in, through
## dag.test as the form sends it, each expensive state built once (core/cutover/routes.py; docs/operations.md's table).
## CI runs it in the first lane, after `make test`.
test-matrix: install
	$(PY) -m pytest -q --durations=10 -m long $(PYTEST_ARGS) tests/integration/test_route_matrix.py

## The fault matrix: broker kills, job kills, refusals, load, on a private cluster pair.
## Ports 21092/22092, or KFERRY_PRIVATE_SOURCE_PORT / KFERRY_PRIVATE_DESTINATION_PORT; CI moves them to run beside
## `make test`.
test-faults: install
	$(PY) -m pytest -q -s $(PYTEST_ARGS) tests/integration/faults

## The pure unit tests only (no test bed, about a thousand, minutes).
test-unit: install
	$(PY) -m pytest -q tests/unit

## ruff over every Python folder.
lint: install
	$(VENV)/bin/ruff check plugins dags spark_jobs tests testbed bench

## mypy over the package, the DAGs, the Spark launcher and the tests; strict on core/ and state/ (pyproject.toml).
typecheck: install
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --no-warn-unused-configs tests/conftest.py  # beside tests/integration/conftest.py: same module name
	$(VENV)/bin/mypy --no-warn-unused-configs tests/unit/promotion/conftest.py

## Write the two-line DAG file of every dags/migrations/*.yaml that lacks one.
dags: install
	$(PY) -m kafka_ferry.dag_factory dags

## Every problem of every migration spec (or SPECS="a.yaml b.yaml"), no Airflow needed; exit 1 on any.
## TENANTS=platform/tenants.yaml also checks what each spec's tenant may use (docs/security.md).
SPECS ?= dags/migrations/*.yaml
TENANTS ?=
check-spec: install
	$(PY) -m kafka_ferry.core.specs.spec_check check $(if $(TENANTS),--tenants $(TENANTS)) $(SPECS)

## docs/spec-reference.md from the spec model (after a spec key changes; a unit test fails while it is stale).
spec-reference: install
	$(PY) -m kafka_ferry.cli.spec_reference write docs/spec-reference.md

## The table of every mode in every state in docs/operations.md, from core/cutover/routes.py (a unit test fails while stale).
routes-table: install
	$(PY) -m kafka_ferry.core.cutover.routes write docs/operations.md

## The manual (docs/, mkdocs.yml) built strictly: a warning (a broken link, a page outside the nav) fails it.
## Built into a throwaway directory; DOCS_SITE=site keeps the HTML there. Browse: $(VENV)/bin/mkdocs serve
DOCS_SITE ?=
docs: install
	site="$(DOCS_SITE)"; [ -n "$$site" ] || site="$$(mktemp -d)"; \
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d "$$site" || exit 1; \
	[ -n "$(DOCS_SITE)" ] || rm -rf "$$site"

## Re-pin constraints.txt from the current venv (after changing pyproject.toml).
lock:
	( sed -n '1,2p' constraints.txt; $(PY) -m pip freeze --exclude-editable | grep -v '^-e' ) > constraints.txt.new
	mv constraints.txt.new constraints.txt

## Wipe the test bed's data (its clusters must be stopped) and the build and test caches.
clean:
	$(PYTHON) testbed/kafka_testbed.py wipe
	rm -rf .pytest_cache .hypothesis build *.egg-info

## This list: each target and the first line of what it does.
help:
	@awk '/^## /{ if (doc == "") doc = substr($$0, 4); next } \
	     /^[a-z][a-z-]*:/{ if (doc != "") { split($$0, t, ":"); printf "  make %-15s %s\n", t[1], doc }; doc = ""; next } \
	     /^[A-Z_]+ *[?:]?=/{ next } { doc = "" }' $(MAKEFILE_LIST)
