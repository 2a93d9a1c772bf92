# kubectl-trainjob: the kubectl plugin and the operator, one static binary.
#   docker build -t ghcr.io/kubectl-trainjob/kubectl-trainjob:dev .
# Without Docker, `make image` writes the same image as an archive (bin/image/kubectl-trainjob.tar).
# The operator Deployment (config/manager) runs it with `args: [operator, ...]`.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a code change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY config/ config/
COPY pkg/ pkg/
COPY plugin/ plugin/
ARG VERSION=v0.0.0-dev
ARG GIT_COMMIT=unknown
ARG TARGETOS=linux
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags "-s -w -X github.com/kubectl-trainjob/kubectl-trainjob/pkg/version.Version=${VERSION} -X github.com/kubectl-trainjob/kubectl-trainjob/pkg/version.GitCommit=${GIT_COMMIT}" \
      -o /out/kubectl-trainjob ./cmd/kubectl-trainjob

# Static binary on distroless: no shell, no package manager, user 65532. `make image` builds the same image
# without Docker (test/images: path, user, entrypoint and labels are compared with these lines by a test).
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=v0.0.0-dev
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="kubectl-trainjob" \
      org.opencontainers.image.source="https://github.com/kubectl-trainjob/kubectl-trainjob" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
COPY --from=build /out/kubectl-trainjob /kubectl-trainjob
USER 65532:65532
ENTRYPOINT ["/kubectl-trainjob"]
