# syntax=docker/dockerfile:1
# Image of xenorchestra-cloud-controller-manager: a static Go binary on distroless, as non-root.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t IMAGE .
# The build command is the Makefile's `build` recipe, word for word (test/dockerfile checks it).

FROM golang:1.26 AS builder
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG PKG=github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager
ARG BINARY=xenorchestra-cloud-controller-manager
ARG BIN=/out
ARG LDFLAGS="-s -w -X ${PKG}/cmd/app.version=${VERSION}"
RUN CGO_ENABLED=0 go build -trimpath -ldflags "${LDFLAGS}" -o ${BIN}/${BINARY} ./cmd/${BINARY}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=builder /out/xenorchestra-cloud-controller-manager /xenorchestra-cloud-controller-manager
USER 65532:65532
ENTRYPOINT ["/xenorchestra-cloud-controller-manager"]
