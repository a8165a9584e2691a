# paperbell in a container: the same `pip install .` the tests prove, nothing more.
#   docker build -t paperbell .
#   docker run --rm -v "$PWD:/data" paperbell demo --out /data/paperbell-demo
#   docker run --rm -v "$PWD:/data" -e PAPERBELL_SMTP_PASSWORD paperbell digest -c /data/config.toml
#   docker run -d --restart unless-stopped -v "$PWD:/data" -p 8025:8025 -e PAPERBELL_SMTP_PASSWORD \
#       paperbell run -c /data/config.toml --host 0.0.0.0     (the daemon; stops cleanly on SIGTERM)
FROM python:3.11-slim
COPY . /src
RUN pip install --no-cache-dir "/src[postgres]" && rm -rf /src \
    && useradd --create-home --uid 10001 paperbell
USER paperbell
WORKDIR /data
EXPOSE 8025
ENTRYPOINT ["paperbell"]
CMD ["--help"]
