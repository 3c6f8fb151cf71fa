# The service image. One worker unless FILEHOST_WORKERS says otherwise: `auto` (as the compose
# files set) is one per core of the container's CPU set, which a CPU quota alone does not narrow.
FROM python:3.11-slim
WORKDIR /app
# The locked versions first (requirements/run.txt, checked against their hashes), in a layer of
# their own that a change to the sources does not rebuild; then the project without resolving.
COPY requirements/run.txt requirements/run.txt
RUN pip install --no-cache-dir --require-hashes -r requirements/run.txt
COPY pyproject.toml README.md ./
COPY service ./service
# /data holds the uploaded files (FILEHOST_DATA_DIR); owned by the service's user so that a
# named volume mounted there starts with that owner too.
RUN pip install --no-cache-dir --no-deps . && useradd --system --uid 10001 filehost \
    && mkdir -p /data && chown filehost /data
USER filehost
ENV FILEHOST_HOST=0.0.0.0 FILEHOST_PORT=8080 FILEHOST_DATA_DIR=/data
EXPOSE 8080
CMD ["filehost-auth", "serve"]
