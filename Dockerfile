# paperbell in a container: the same `pip install .` the tests prove, nothing more. With
# PostgreSQL's driver, and the demo's loopback mail server (small; only `demo` starts it).
#   docker build -t paperbell .
#   docker run --rm --user "$(id -u):$(id -g)" -v "$PWD:/data" paperbell demo --out /data/paperbell-demo
#   docker run -d --name paperbell --restart unless-stopped -v paperbell-data:/data \
#       -p 127.0.0.1:8025:8025 --env-file paperbell.env paperbell run --host 0.0.0.0
# (the daemon; stops cleanly on SIGTERM). compose.yaml runs it with PostgreSQL.
#
# /data, a volume, holds the config ($PAPERBELL_CONFIG, /data/config.toml) and the SQLite
# database beside it (the default url, sqlite:///paperbell.sqlite, is taken from the
# config's folder). It runs as uid 10001 or any uid given with `docker run --user`: /data
# belongs to group 0 and is group-writable, and a uid the image does not know runs in group
# 0 (as OpenShift runs images). The HEALTHCHECK asks the daemon's GET /healthz on [web]
# port 8025, the default: keep that port in a container.
FROM python:3.11-slim
COPY . /src
RUN pip install --no-cache-dir "/src[postgres,demo]" && rm -rf /src \
    && useradd --system --uid 10001 --gid 0 --home-dir /data --no-create-home paperbell \
    && install -d -m 2775 -o 10001 -g 0 /data
# The cache (fastembed's model, with PostgreSQL) in the volume too: a uid the image does not
# know has HOME=/, which it may not write.
ENV PAPERBELL_CONFIG=/data/config.toml XDG_CACHE_HOME=/data/.cache
WORKDIR /data
VOLUME ["/data"]
USER 10001
EXPOSE 8025
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8025/healthz', timeout=8)"]
ENTRYPOINT ["paperbell"]
CMD ["--help"]
