"""Kubernetes: ``agentd export k8s`` renders a project's units as manifests (see docs/fleet.md).

:mod:`.manifests` builds the objects (pure), :mod:`.yamltext` writes them as
YAML, :mod:`.validate` checks them offline against the Kubernetes API models
and the agent-sandbox CRD schema vendored in ``schemas/`` (the ``k8s`` extra).
"""
