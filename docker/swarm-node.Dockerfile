# A Docker engine in a container, to join a Swarm as a worker: a second "machine" on this one, so
# the per-container fabric (`aifabric compose`) can run across two Swarm nodes, its overlay links
# crossing between them (tests/fabric/test_compose_swarm.py). Run privileged (or, on an engine that
# cannot, with every capability it has and /sys/fs/cgroup bound writable), with /var/lib/docker
# a volume (overlay2 cannot sit on the container's own overlay root).
ARG BASE_IMAGE=debian:bookworm
FROM ${BASE_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends docker.io iproute2 iptables ca-certificates \
 && rm -rf /var/lib/apt/lists/*
VOLUME /var/lib/docker
# Its containers' cgroups apart from those of the engine it runs on
ENTRYPOINT ["dockerd", "--cgroup-parent", "/aifabric-swarm-worker"]
