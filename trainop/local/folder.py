"""A local run's folder: the job's ConfigMaps as files its pods mount, the other objects it
made (by name), and every path written checked to stay below the folder
(files.open_below)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from trainop.api.templates import containers
from trainop.engine import OwnedObject
from trainop.engine.objects import content_of
from trainop.local import files
from trainop.local.process import NotRunnable

T = TypeVar("T")


class RunFolder:
    """The objects of a local run, kept in `root`."""

    def __init__(self, root: Path):
        self.root = root
        self.objects: dict[tuple[str, str], OwnedObject] = {}

    def store(self, obj: dict[str, Any]) -> None:
        """ConfigMaps become files in the run folder; other objects only exist by name."""
        name = obj["metadata"]["name"]
        data = obj.get("data") if obj["kind"] == "ConfigMap" else None
        for key, text in (data or {}).items():
            self.write(f"volumes/{name}/{key}", text.encode())
        self.objects[(obj["kind"], name)] = OwnedObject(obj["kind"], name,
                                                        content=content_of(obj["kind"], obj))

    def write(self, relative: str, data: bytes) -> None:
        with self.guarded(files.open_below, self.root, relative) as out:
            out.write(data)

    @staticmethod
    def guarded(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """`fn` on the run folder; a path trainop must not write through ends the run."""
        try:
            return fn(*args, **kw)
        except files.UnsafePath as err:
            raise NotRunnable(str(err)) from None

    def mounts(self, pod: dict[str, Any]) -> dict[str, Path]:
        """Mount path -> local folder, for the pod's ConfigMap volumes; the files get the
        modes the volume gives them (mpirun's agent script must be executable)."""
        volumes = {v["name"]: v["configMap"]["name"] for v in pod["spec"].get("volumes") or []
                   if isinstance(v.get("configMap"), dict) and v["configMap"].get("name")}
        for v in pod["spec"].get("volumes") or []:
            source = v.get("configMap")
            if v["name"] in volumes and isinstance(source, dict):
                for item in source.get("items") or []:
                    mode = item.get("mode", source.get("defaultMode"))
                    if isinstance(mode, int):
                        self.guarded(files.set_mode, self.root,
                                      f"volumes/{volumes[v['name']]}/{item.get('path', '')}",
                                      mode)
        mounts = {}
        for container in containers(pod):
            for m in container.get("volumeMounts") or []:
                if m["name"] in volumes:
                    mounts[m["mountPath"]] = self.root / "volumes" / volumes[m["name"]]
        return mounts
