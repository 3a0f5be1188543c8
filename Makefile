# The two commands a newcomer needs: `make run` and `make test`. Each sets itself up first
# (venv, pip packages, Debian packages, client tools) when something is missing.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
CACHE  := .cache
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages: ZooKeeper (pulls default-jre: Java 17 on Debian 12, which pipeline/'s Spark also runs on),
# kcat (an old-librdkafka client the tests use) and docker-compose (only to validate docker-compose.yml;
# no Docker engine is needed).
DEBS   := zookeeper kcat docker-compose iproute2 iptables strace
FULL   ?=
PYTEST_ARGS ?=

.PHONY: run clean-data test lint stubs bench setup sysdeps clientdeps browserdeps console-assets screenshots clean

# A local cluster until Ctrl-C: ZooKeeper, CONTROLLERS controllers and BROKERS brokers on ports PORT,
# PORT+1, ...; configs, logs and data in .run/, kept across runs. E.g. `make run BROKERS=1 PORT=19092`.
# Broker settings: OVERRIDES='num.partitions=2 log.retention.ms=600000' (every broker),
# BROKER_OVERRIDES='2:broker.rack=b', CONTROLLER_OVERRIDES='...', CONFIG=server.properties (a base file);
# samsa up keeps them for the next run on .run. FRESH=1 wipes .run first (as `make clean-data`). SECURE=1
# secures it (samsa up --secure: SASL_SSL + SCRAM-SHA-512, ACLs, the admin's settings in .run/client.properties).
# The web console runs too, at the console=http://... line it prints: on a free port, or CONSOLE_PORT=8080;
# NO_CONSOLE=1 runs none (docs/console.md).
BROKERS     ?= 3
CONTROLLERS ?= 2
PORT        ?= 9092
ZK_PORT     ?= 2181
HOST        ?= 127.0.0.1
OVERRIDES   ?=
BROKER_OVERRIDES     ?=
CONTROLLER_OVERRIDES ?=
CONFIG      ?=
FRESH       ?=
SECURE      ?=
CONSOLE_PORT ?=
NO_CONSOLE  ?=
run: setup
	$(VENV)/bin/samsa up --data-dir .run --brokers $(BROKERS) --controllers $(CONTROLLERS) \
	  --base-port $(PORT) --zookeeper-port $(ZK_PORT) --host $(HOST) \
	  $(foreach o,$(OVERRIDES),--override $(o)) $(foreach o,$(BROKER_OVERRIDES),--broker-override $(o)) \
	  $(foreach o,$(CONTROLLER_OVERRIDES),--controller-override $(o)) $(if $(CONFIG),--config $(CONFIG)) \
	  $(if $(FRESH),--fresh) $(if $(SECURE),--secure) \
	  $(if $(CONSOLE_PORT),--console-port $(CONSOLE_PORT)) $(if $(NO_CONSOLE),--no-console)

# Deletes `make run`'s data (topics, records, logs, saved overrides) and nothing else (.venv stays).
clean-data:
	@if [ -e .run/cluster.lock ] && ! flock -n .run/cluster.lock true; then \
	  echo "a samsa up is running on .run: stop it (Ctrl-C) first"; exit 1; fi
	rm -rf .run

test: setup clientdeps browserdeps
	$(PY) -m pytest $(if $(FULL),--full) $(PYTEST_ARGS)

# ruff, then mypy over the source packages ([tool.mypy] in pyproject.toml says which and how), against a
# protocol/messages.pyi that must match the schemas.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(PY) -m protocol.stubgen --check
	$(VENV)/bin/mypy

# protocol/messages.pyi (the message classes' types) from protocol/schemas; run after changing a schema.
stubs: $(VENV)/.installed
	$(PY) -m protocol.stubgen

# Samsa next to Tansu with the shared load generator (../shared/bench/run-bench), one broker each; with
# CLUSTER=1 also 3 Samsa brokers at replication factor 3. QUICK=1 for a smoke run, REPS=N, WORKLOADS=a,b;
# SHARED=DIR where run-bench and tansu-ref are when the clone is not next to ../shared.
# Results in bench/results/compare-<date>.{json,md}; bench/README.md says more.
CLUSTER   ?=
QUICK     ?=
REPS      ?=
WORKLOADS ?= produce,consume,latency,conns
SHARED    ?=
bench: setup
	$(PY) bench/compare.py --workloads $(WORKLOADS) $(if $(CLUSTER),--cluster) $(if $(QUICK),--quick) \
	  $(if $(REPS),--reps $(REPS)) $(if $(SHARED),--shared $(SHARED))

setup: $(VENV)/.installed sysdeps console-assets

# The web console's front-end libraries (htmx, uPlot), pinned in console/assets/package-lock.json, fetched
# from the npm registry and copied into the package, which serves them itself.
CONSOLE_VENDOR := console/static/vendor
console-assets: $(CONSOLE_VENDOR)/.installed

$(CONSOLE_VENDOR)/.installed: console/assets/package-lock.json console/assets/build.sh
	sh console/assets/build.sh $(CACHE)/console-npm $(CONSOLE_VENDOR)
	@touch $@

# The README's pictures of the console's pages (docs/images/console-<page>.png): its browser tests, against
# their real cluster, take them where each calls page.readme_shot("<page>").
screenshots: setup browserdeps
	SAMSA_SCREENSHOTS=$(CURDIR)/docs/images $(PY) -m pytest -q tests/console $(PYTEST_ARGS)

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,pipeline]'
	@touch $@

# Installs the Debian packages only when one is missing (apt-get update only if the install fails).
sysdeps:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null \
	  || { $(SUDO) apt-get update -q >/dev/null && \
	       $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; }; \
	fi

# Debian's Chromium for the console's browser tests (Playwright drives it; nothing downloads a browser).
# If it cannot be installed those tests skip, saying why.
browserdeps:
	@dpkg -s chromium >/dev/null 2>&1 || { echo "installing Debian's chromium (the console's browser tests)"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null \
	  || { $(SUDO) apt-get update -q >/dev/null && \
	       $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null; } \
	  || echo "could not install chromium: the console's browser tests will skip"; }

# Client tools for the integration tests: kafkajs (npm) and the Java kafka-clients jar.
clientdeps: $(CACHE)/clients/.installed

$(CACHE)/clients/.installed: tests/support/clients/setup.sh
	sh tests/support/clients/setup.sh $(CACHE)/clients $(PY)
	@touch $@

clean:
	rm -rf $(VENV) $(CACHE) .run .pytest_cache
