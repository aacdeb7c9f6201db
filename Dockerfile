# One image with /manager (the controller) and /lockctl (the CLI for init containers and
# scripts). Static binaries on distroless, non-root. `make docker-build` passes VERSION, GIT_COMMIT
# and BUILD_DATE (hack/ldflags.sh --build-args), as the build context has no git history.
#
# Multi-arch (`make docker-buildx`, PLATFORMS): the builder stage runs on the build machine's own
# platform and cross-compiles for each TARGETOS/TARGETARCH, which BuildKit sets per platform, so
# no stage runs under emulation; only the final stage is per platform, and it runs nothing.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
# Dependencies first, so that source edits reuse the module layer.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
COPY VERSION ./
COPY hack/ldflags.sh hack/
ARG VERSION
ARG GIT_COMMIT
ARG BUILD_DATE
RUN ldflags="-s -w $(hack/ldflags.sh)" && \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "$ldflags" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "$ldflags" -o /out/lockctl ./cmd/lockctl

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/manager /manager
COPY --from=builder /out/lockctl /lockctl
COPY LICENSE /licenses/LICENSE
USER 65532:65532
ENTRYPOINT ["/manager"]
