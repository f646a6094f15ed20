"""aifabric in containers: the Compose project (`compose_project`), Mininet nodes that are
containers (`container_node`), Docker Swarm (`swarm`), and the fabric and controller services
(`fabric_service`, `controller_service`). Built on `aifabric.lab`."""
