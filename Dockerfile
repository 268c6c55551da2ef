# syntax=docker/dockerfile:1
#
# The broker as a container image (README "Deploying"):
#   docker build -t vibemq/broker \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run -d --name broker -p 9092:9092 -p 8080:8080 \
#     -e BROKER_ADVERTISED_ADDR=localhost:9092 -v broker-data:/data vibemq/broker
#
# Checked in CI by hadolint and compat-tests TestDockerfile (no Docker
# engine there).

ARG GO_VERSION=1.26

# --- build: a static binary, version and commit stamped ---
FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=""
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/broker ./cmd/broker \
 && /out/broker version \
 && mkdir /out/empty-data

# --- run: no shell, no package manager, user 65532 ---
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/broker /usr/local/bin/broker
# Every setting can be a BROKER_* variable (config.example.yaml); these make
# the broker listen on every interface and keep its data on the volume.
ENV BROKER_DATA_DIR=/data \
    BROKER_KAFKA_ADDR=0.0.0.0:9092 \
    BROKER_HTTP_ADDR=0.0.0.0:8080 \
    BROKER_LOG_FORMAT=json
# distroless' nonroot user owns /home/nonroot; /data is created for it.
COPY --from=build --chown=65532:65532 /out/empty-data /data
USER 65532:65532
VOLUME ["/data"]
EXPOSE 9092 8080
# GET /readyz on BROKER_HTTP_ADDR (asked on 127.0.0.1): 200 once recovered
# and serving, 503 while starting or shutting down.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/broker", "healthcheck"]
# SIGTERM shuts down cleanly (in-flight requests finish, the store closes).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/broker"]
CMD ["serve"]
