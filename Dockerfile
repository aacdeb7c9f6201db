# One image with /manager (the controller) and /lockctl (the CLI for init containers and
# scripts). Static binaries on distroless, non-root.
FROM golang:1.26 AS builder
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
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/lockctl ./cmd/lockctl

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/manager /manager
COPY --from=builder /out/lockctl /lockctl
USER 65532:65532
ENTRYPOINT ["/manager"]
