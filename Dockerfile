# The service image. Workers default to the container's cores (see FILEHOST_WORKERS).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install --no-cache-dir . && useradd --system --uid 10001 filehost
USER filehost
ENV FILEHOST_HOST=0.0.0.0 FILEHOST_PORT=8080
EXPOSE 8080
CMD ["python", "-m", "service", "serve"]
