# The manager image: docker build -t trainop:0.1.0 .
# BASE: any Debian bookworm image with python3.11 and pip first on PATH (the node tests
# build this file with one made from Debian's packages: testbed/manager_image.py).
ARG BASE=python:3.11.11-slim-bookworm
# GO: any image with Go 1.26 first on PATH (the node tests use one made from this
# machine's Go: testbed/manager_image.py)
ARG GO=golang:1.26.8-bookworm

# The rank supervisor (supervisor/): one static file, which pods copy from this image
# (--rank-supervisor-image); standard library only, so the build downloads nothing.
FROM ${GO} AS supervisor
WORKDIR /src
COPY supervisor ./
RUN CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
    go build -trimpath -ldflags "-s -w" -o /trainop-supervisor .

FROM ${BASE}

# MALLOC_ARENA_MAX: glibc's arenas, one per thread that parses and plans jobs by default,
# each keep the peak a large job's parse left (bench/results/unstartable.md)
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 MALLOC_ARENA_MAX=2

WORKDIR /src
# The same pinned requirements as everywhere else: they live in pyproject.toml.
COPY pyproject.toml README.md ./
COPY trainop ./trainop
RUN pip install . && rm -rf /src
COPY --from=supervisor /trainop-supervisor /usr/local/bin/trainop-supervisor

RUN useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin trainop
USER 65532:65532
WORKDIR /
EXPOSE 8080 8081 9443
ENTRYPOINT ["trainop", "manager"]
