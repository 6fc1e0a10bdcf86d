"""Check rendered manifests offline: no cluster, the ``k8s`` extra (``pip install 'agentd[k8s]'``).

* Built-in kinds (``StatefulSet``, ``PersistentVolumeClaim``; the metadata and
  pod spec of a ``Sandbox`` too) against the API models of the official
  ``kubernetes`` Python client (>= 37: pydantic models generated from the
  Kubernetes release-1.37 OpenAPI spec).  They refuse an unknown field (as the
  API server's strict field validation, kubectl's default, does), a value of
  the wrong type and a missing required field.  They do not check enums.
* ``Sandbox`` against the ``openAPIV3Schema`` of the agent-sandbox CRD
  vendored in ``schemas/`` (see its README), with ``jsonschema``.  Every
  object schema that lists its properties is made closed
  (``additionalProperties: false``), as the API server prunes or, strictly,
  refuses unknown fields; enums, required fields, types and bounds apply.

:func:`problems` returns one line per violation, naming the object and the path.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

SANDBOX_SCHEMA = Path(__file__).parent / "schemas" / "agent-sandbox-v0.5.6-sandbox-v1beta1.json"


class ValidatorMissing(RuntimeError):
    """The validation libraries are not installed."""


def _models() -> dict[str, Any]:
    try:
        from kubernetes.client import models
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise ValidatorMissing(f"validating needs the k8s extra: pip install 'agentd[k8s]' ({exc})") from None
    if not hasattr(models.V1StatefulSet, "model_validate"):  # pragma: no cover - before 37: no strict models
        raise ValidatorMissing("validating needs kubernetes>=37 (its pydantic API models): pip install 'agentd[k8s]'")
    return {"apps/v1/StatefulSet": models.V1StatefulSet, "v1/PersistentVolumeClaim": models.V1PersistentVolumeClaim,
            "meta": models.V1ObjectMeta, "pod": models.V1PodSpec}


def closed(schema: Any) -> Any:
    """A copy of an OpenAPI v3 schema in which every object with listed properties allows no other key."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


@cache
def sandbox_validator() -> Any:
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover
        raise ValidatorMissing(f"validating needs the k8s extra: pip install 'agentd[k8s]' ({exc})") from None
    data = json.loads(SANDBOX_SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft7Validator(closed(data["openAPIV3Schema"]))


def sandbox_api_version() -> str:
    data = json.loads(SANDBOX_SCHEMA.read_text(encoding="utf-8"))
    return f"{data['group']}/{data['version']}"


def _model_problems(model: Any, obj: Any, where: str) -> list[str]:
    from pydantic import ValidationError

    try:
        model.model_validate(obj)
    except ValidationError as exc:
        return [f"{where}: {'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()]
    return []


def problems(obj: Mapping[str, Any]) -> list[str]:
    """What is wrong with one manifest object (an empty list when nothing is)."""
    kind, api = obj.get("kind"), obj.get("apiVersion")
    name = obj.get("metadata", {}).get("name", "?") if isinstance(obj.get("metadata"), Mapping) else "?"
    where = f"{kind} {name}"
    models = _models()
    if kind == "Sandbox" and api == sandbox_api_version():
        out = [f"{where}: {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
               for e in sorted(sandbox_validator().iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))]
        out += _model_problems(models["meta"], obj.get("metadata"), f"{where} metadata")
        pod = obj.get("spec", {}).get("podTemplate", {}).get("spec") if isinstance(obj.get("spec"), Mapping) else None
        if isinstance(pod, Mapping):
            out += _model_problems(models["pod"], pod, f"{where} spec.podTemplate.spec")
        return out
    model = models.get(f"{api}/{kind}")
    if model is None:
        return [f"{where}: {api} {kind} is not a kind this check knows"]
    return _model_problems(model, obj, where)


def check_all(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    return [line for obj in objects for line in problems(obj)]
