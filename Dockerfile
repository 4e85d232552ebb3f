# odradek broker image.
#   docker build -t odradek .
#   docker run -p 9092:9092 -v odradek-data:/var/lib/odradek odradek
# Configuration: Kafka's keys as KAFKA_* environment variables (KAFKA_LOG_DIRS is log.dirs,
# KAFKA_NUM_PARTITIONS is num.partitions; see docs/config.md), or arguments after the image
# name, which go to `odradek serve` (e.g. `--override num.partitions=3`).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/odradek
COPY pyproject.toml setup.py README.md ./
COPY odradek ./odradek
# The runtime dependencies ship manylinux wheels; gcc is needed only to build the produce-time
# record framing walk (odradek/wire/_framing.c) and is removed again in the same layer.
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \
    && pip install . \
    && apt-get purge -y -qq gcc libc6-dev >/dev/null && apt-get autoremove -y -qq >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 1000 --user-group --home-dir /var/lib/odradek odradek \
    && mkdir -p /var/lib/odradek \
    && chown odradek:odradek /var/lib/odradek

# Listen on every interface inside the container; tell clients to come back on localhost:9092,
# which is right for `docker run -p 9092:9092` and clients on the host. Containers reaching the
# broker by service name set KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://<name>:9092 instead.
ENV KAFKA_LOG_DIRS=/var/lib/odradek \
    KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092

USER odradek
WORKDIR /var/lib/odradek
VOLUME /var/lib/odradek
EXPOSE 9092
# Exec form: the broker is PID 1 and gets `docker stop`'s SIGTERM, which shuts it down cleanly.
ENTRYPOINT ["odradek", "serve"]
