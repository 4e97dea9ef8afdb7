# syntax=docker/dockerfile:1
# Tidal: one static binary, `tidal adapter` and `tidal autoscaler`.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/tidal-autoscaler/tidal/internal/version.Version=${VERSION} -X github.com/tidal-autoscaler/tidal/internal/version.GitCommit=${COMMIT}" \
      -o /out/tidal ./cmd/tidal

# scratch: nothing but the static binary and the CA certificates it needs to
# verify Prometheus and the apiserver; no shell, no package manager, not root.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/tidal /usr/local/bin/tidal
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/tidal"]
