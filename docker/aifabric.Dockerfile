# aifabric's own images, one Dockerfile with a stage per service (docker-compose.yml picks one
# with `target:`); both share the first stages, so the Debian packages and the Python
# dependencies are built once and kept by Docker's layer cache until pyproject.toml changes.
#
#   controller          the P4Runtime controller service (`aifabric controller --fabric FILE`)
#   fabric-softswitch   Mininet and the softswitch target (`docker/fabric-entrypoint.sh`), its
#                       switches and hosts on the native paths built in the `native` stage
#   fabric-bmv2         the same with BMv2's simple_switch_grpc taken from the pinned p4lang image
#                       (BMV2_IMAGE); only this stage needs that image, so the others build without it
#
# Build argument PIP_CERT_PEM (optional): PEM text of CA certificates to trust, besides
# Debian's, while pip fetches from PyPI; for machines behind a TLS-inspecting proxy. Nothing of
# it stays in the image's files (it does show in `docker history`, as every build argument).
ARG BASE_IMAGE=debian:bookworm
# p4lang/behavioral-model:latest of 2022-07-03 (Ubuntu 20.04, BMv2 with PI and gRPC), pinned by digest
ARG BMV2_IMAGE=p4lang/behavioral-model@sha256:ce45720e28a96a50f275c1b511cd84c2558b62f2cf7a7e506765183bc3fb2e32

FROM ${BASE_IMAGE} AS python
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates mininet \
 && rm -rf /var/lib/apt/lists/*
# One venv for the project; --system-site-packages lets it see Debian's Mininet (the fabric runs
# it; the `aifabric` command imports it, also for `aifabric controller`).
RUN python3 -m venv --system-site-packages /opt/aifabric
ENV PATH=/opt/aifabric/bin:$PATH
COPY docker/pip-install.sh /usr/local/bin/aifabric-pip-install
COPY pyproject.toml /src/pyproject.toml
ARG PIP_CERT_PEM=""
# The dependencies alone first (from pyproject.toml), and setuptools to install the project
# without fetching anything: a source change rebuilds only what follows, offline.
RUN python3 -c "import tomllib; print('\n'.join(tomllib.load(open('/src/pyproject.toml', 'rb'))['project']['dependencies']))" \
      > /tmp/requirements.txt \
 && aifabric-pip-install 'setuptools>=61' wheel -r /tmp/requirements.txt && rm /tmp/requirements.txt
# P4Runtime's modules generated for this protobuf (scripts/p4runtime_modules.py says why)
COPY scripts/p4runtime_modules.py /tmp/p4runtime_modules.py
RUN python3 /tmp/p4runtime_modules.py && rm /tmp/p4runtime_modules.py

# The native libraries (softswitch's data path for the committed fabric program, the hosts'
# engine), compiled here: the fabric image copies the build caches, not the compiler
# (a cached library needs none: aifabric/containers/native_libraries.py).
FROM python AS native
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN pip install -q --no-deps --no-build-isolation -e /src    # offline: all it needs is above
RUN python3 -m aifabric.containers.native_libraries

FROM python AS controller
COPY . /src
RUN pip install -q --no-deps --no-build-isolation -e /src    # offline: all it needs is above
# The live page's graph library comes from the build context, where `make setup` installed it
# with npm (the image has no npm): say so instead of serving a page that cannot draw.
RUN test -s /src/controller/web/node_modules/cytoscape/dist/cytoscape.min.js \
 || { echo "controller/web/node_modules/cytoscape is missing: run make setup (npm) before building" >&2; exit 1; }
WORKDIR /run/aifabric
EXPOSE 9100/tcp 8080/tcp 32766/udp
ENTRYPOINT ["aifabric", "controller"]
CMD ["--fabric", "/run/aifabric/fabric.json", "--metrics", "0.0.0.0:9100"]

FROM python AS fabric-softswitch
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends iproute2 iputils-ping procps psmisc ethtool \
 && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN pip install -q --no-deps --no-build-isolation -e /src    # offline: all it needs is above
COPY --from=native /root/.cache/aifabric /root/.cache/aifabric
COPY docker/fabric-entrypoint.sh /usr/local/bin/aifabric-fabric
WORKDIR /run/aifabric
ENTRYPOINT ["aifabric-fabric"]

# BMv2 from the p4lang image: simple_switch_grpc with the shared libraries it loads, except the C
# and C++ runtimes (Debian 12's are newer and backward compatible), run through a wrapper that
# points the loader at them. Its Thrift CLI (Python 3.8 modules) is not carried over: queue rate
# and depth are set at start or over P4Runtime's clients, not with simple_switch_CLI, here.
FROM ${BMV2_IMAGE} AS bmv2
RUN mkdir -p /bundle/bin /bundle/lib \
 && cp "$(command -v simple_switch_grpc)" /bundle/bin/ \
 && ldd /bundle/bin/simple_switch_grpc | awk '$3 ~ /^\// {print $3}' \
      | grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s)\.so' \
      | xargs -r cp -L -t /bundle/lib/

FROM fabric-softswitch AS fabric-bmv2
COPY --from=bmv2 /bundle /opt/bmv2
RUN printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/bmv2/lib exec /opt/bmv2/bin/simple_switch_grpc "$@"\n' \
      > /usr/local/bin/simple_switch_grpc \
 && chmod +x /usr/local/bin/simple_switch_grpc
