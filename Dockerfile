# syntax=docker/dockerfile:1
# promoter's image: one static (musl) binary on an empty base, run as a numeric non-root user,
# needing no writable path (readOnlyRootFilesystem). Multi-arch with buildx: the build stage runs on
# the build machine's platform and cross-compiles for each TARGETARCH with release/build.sh (musl-gcc
# for the build machine's own architecture, cargo-zigbuild for the other), the same script that makes
# the release archives, so the image holds the binary they hold.
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg PROMOTER_GIT_COMMIT="$(git rev-parse --short=12 HEAD)" \
#     -t <registry>/promoter:v0.1.0 --push .
FROM --platform=$BUILDPLATFORM rust:1-bookworm AS build
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools python3-venv \
 && rm -rf /var/lib/apt/lists/*
# zig as the C cross-compiler (ring, the vendored Lua) and linker for the other architecture.
RUN python3 -m venv /opt/zig \
 && /opt/zig/bin/pip install --no-cache-dir cargo-zigbuild==0.24.0 ziglang==0.17.1
ENV PATH=/opt/zig/bin:$PATH
WORKDIR /src
COPY . .
# --version names this commit (the build context has no .git).
ARG PROMOTER_GIT_COMMIT=unknown
ENV PROMOTER_GIT_COMMIT=${PROMOTER_GIT_COMMIT}
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    release/build.sh --binaries-only --out /out "${TARGETARCH}"

FROM scratch
ARG TARGETARCH
# CA certificates for HTTPS to Prometheus endpoints of metric checks (the API server's CA comes
# from the service account).
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/linux-${TARGETARCH}/promoter /promoter
# distroless' nonroot user; no /etc/passwd is needed for a numeric one.
USER 65532:65532
ENTRYPOINT ["/promoter"]
CMD ["step"]
