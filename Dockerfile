# The Samsa image: the `samsa` command (broker, controller, the tools and the web console) on
# python:3.11-slim, run as a non-root user. Build: docker build -t samsa . ; run: see docker-compose.yml
# and README.md.

# Stage 0: the web console's front-end libraries (htmx, its SSE extension, uPlot) from the npm registry at
# the versions console/assets/package-lock.json pins, by the script `make console-assets` runs: `npm ci`,
# then their dist files copied to /vendor. Only this stage needs node; the image serves the files itself.
FROM node:20-slim AS console-assets
COPY console/assets /assets
RUN sh /assets/build.sh /tmp/console-npm /vendor

# Stage 1: the project as a wheel, so that the final image holds no source tree or build files. The
# console's vendor files go into the package before the wheel is built (they are its package data).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY broker ./broker
COPY controller ./controller
COPY coordinator ./coordinator
COPY network ./network
COPY zk ./zk
COPY server_common ./server_common
COPY tools ./tools
COPY console ./console
COPY --from=console-assets /vendor ./console/static/vendor
RUN pip wheel --no-cache-dir --disable-pip-version-check --no-deps --wheel-dir /wheels .

# Stage 2: the wheel and its dependencies (all on PyPI as manylinux wheels: no compiler needed).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --disable-pip-version-check /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/samsa --create-home samsa \
    && mkdir -p /var/lib/samsa/data /var/lib/samsa/security /etc/samsa \
    && chmod 700 /var/lib/samsa/security \
    && chown -R samsa:samsa /var/lib/samsa
COPY config/server.properties /etc/samsa/server.properties

USER samsa
WORKDIR /var/lib/samsa
# A named volume mounted here starts with the image's (samsa-owned) empty directory; so does one on
# /var/lib/samsa/security (docker-compose.secure.yml: the CA, certificates and secured settings).
VOLUME ["/var/lib/samsa/data"]
# 9092: a broker's client listener; 9093: a controller's listener; 9404: the metrics endpoint where
# metrics.listener puts it (docker-compose.yml does); 8080: `samsa console`'s default port.
EXPOSE 9092 9093 9404 8080

ENTRYPOINT ["samsa"]
CMD ["broker", "--config", "/etc/samsa/server.properties", "--override", "log.dirs=/var/lib/samsa/data"]
