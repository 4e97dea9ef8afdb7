# syntax=docker/dockerfile:1
# Tidal: one static binary, `tidal adapter` and `tidal autoscaler`.
# `make image` builds an equivalent image without a Docker engine (hack/image);
# `make docker-image` builds this file. See docs/operations.md#the-image.

# The build stage's image. The default is a tag, which moves; a release
# build pins it by digest, e.g.
#   docker build --build-arg BUILD_IMAGE=golang:1.27@sha256:<digest> .
# (`docker buildx imagetools inspect golang:1.27` prints the digest). The
# final stage is scratch, which is no image at all and has nothing to pin.
ARG BUILD_IMAGE=golang:1.27

FROM ${BUILD_IMAGE} AS build
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
