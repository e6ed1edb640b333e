# syntax=docker/dockerfile:1
# gpu-admission container image: build wheels in one stage, install only wheels in the next.
#   docker build -t ghcr.io/gpu-admission/gpu-admission:0.1.0 .
# Pin the base by digest in CI (python:3.11-slim@sha256:...) for reproducible builds.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# Dependencies first, from pyproject.toml alone, so this layer survives code changes.
COPY pyproject.toml ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > requirements.txt \
    && pip wheel --wheel-dir /wheels --requirement requirements.txt
COPY README.md ./
COPY webhook ./webhook
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    GPU_ADMISSION_POLICIES=/etc/gpu-admission/policies
# Wheels only (--no-index): nothing is compiled or downloaded here. pip compiles the
# bytecode at install time, since the root filesystem is read-only at run time.
# pip, setuptools and wheel leave afterwards: the image runs the webhook, not installs.
# DL3013 (pin versions): the only candidates are the wheels the builder just made.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels gpu-admission \
    && pip uninstall --yes pip setuptools wheel \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
COPY policies/ /etc/gpu-admission/policies/
# Numeric, so that the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["gpu-admission"]
CMD ["serve"]
LABEL org.opencontainers.image.title="gpu-admission" \
      org.opencontainers.image.description="Policy-as-code validating admission webhook for Kubernetes GPU workloads" \
      org.opencontainers.image.licenses="Apache-2.0"
