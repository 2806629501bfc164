# syntax=docker/dockerfile:1.7
#
# joiner's container image: the `joiner` binary on a distroless base.
#
#   docker build -t joiner:dev .
#   docker run --rm joiner:dev --help
#
# The build compiles HiGHS (C++) from source through the highs-sys crate, plus kube and the AWS
# SDK: a cold build takes about half an hour on 2 cores (README.md). The BuildKit cache mounts
# below keep the cargo registry and the target directory between builds.

FROM rust:1.95-bookworm AS builder

# highs-sys runs cmake and a C++ compiler to build HiGHS, and bindgen (libclang) for its bindings.
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake clang libclang-dev g++ \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
# Cargo.toml declares the benches in benches/, and the bundled catalogs and default simulation
# scenario under fixtures/ are compiled into the binary (include_str!), so the whole source tree
# goes in; .dockerignore keeps target/, .git/, .venv/ and the like out.
COPY . .

# The release profile turns incremental compilation and line tables on for local work and tests;
# the image wants neither. Without debug info and symbols the binary is 46 MB instead of 463 MB
# (measured with `strip` on a local release build).
ENV CARGO_INCREMENTAL=0 \
    CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_STRIP=symbols

# The target directory is a cache mount, so the binary is copied out of it in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked --bin joiner \
 && install -D -m 0755 target/release/joiner /out/joiner

# distroless/cc has glibc, libgcc_s and libstdc++ (HiGHS is C++). `ldd` on a release build lists
# exactly: libstdc++.so.6, libgcc_s.so.1, libm.so.6, libc.so.6 and the loader ld-linux-x86-64.so.2.
# TLS is rustls with the system trust store (rustls-native-certs): distroless ships the CA bundle in
# /etc/ssl/certs, which the AWS endpoints need.
FROM gcr.io/distroless/cc-debian12:nonroot

ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="joiner" \
      org.opencontainers.image.description="Kubernetes node autoscaler that plans EC2 capacity by mixed-integer optimization (Karpenter v1 API)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="gcr.io/distroless/cc-debian12:nonroot"

COPY --from=builder /out/joiner /usr/local/bin/joiner

# nonroot (65532) as in the base image's :nonroot tag; the chart runs with a read-only root
# filesystem and this same user.
USER 65532:65532

# glibc gives each thread that allocates (tokio's workers and blocking pool, the decision thread,
# HiGHS) its own heap arena, up to 8 per core, and memory freed in one stays mapped there. Two
# arenas cut the controller's peak resident memory in the load benchmark (benches/load.rs, which
# runs the binary with the same setting) from 470 to 430 MiB with the MILP and from 335 to 298 MiB
# with greedy, without a measurable change in decision time. Blocks of 128 KiB and more (a step's
# snapshot, the solver's arrays) are mapped on their own and unmapped when freed, instead of staying
# in an arena after the step: the MILP peak went from 347 to 331 MiB, greedy's from 280 to 267 MiB.
ENV MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072

# /metrics and /healthz, /readyz (--metrics-port, --health-probe-port).
EXPOSE 8080 8081

ENTRYPOINT ["/usr/local/bin/joiner"]
CMD ["controller"]
