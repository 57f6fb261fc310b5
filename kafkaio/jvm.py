"""The pinned JVM artifacts geops runs: Apache Kafka's broker and Spark's Kafka connector.

Each bundle is a ``pom.xml`` under ``jvm/<bundle>/`` in the repository whose only job is to name
pinned Maven Central artifacts. Resolving a bundle copies its jars (Maven's
``dependency:copy-dependencies``) into ``<cache>/<bundle>-<hash of the pom>/``, once; the
two README commands and every later ``geops broker start`` or ``geops app`` reuse that folder,
offline. The cache is ``$GEOPS_JVM_CACHE``, else ``$XDG_CACHE_HOME/geops/jvm``, else
``~/.cache/geops/jvm``. Without Maven, a folder holding the same jars can be named with
``GEOPS_<BUNDLE>_LIBS`` (e.g. ``GEOPS_KAFKA_LIBS``).

``python -m kafkaio.jvm`` resolves every bundle (the set-up scripts call it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from config.errors import one_line
from config.exitcodes import EXIT_USAGE
from kafkaio.errors import JvmError

JVM_DIR = Path(__file__).resolve().parents[1] / "jvm"
BUNDLES = ("kafka", "spark-kafka")
_DONE = ".resolved"


def cache_root() -> Path:
    """Where resolved bundles live (see the module's docstring)."""
    if os.environ.get("GEOPS_JVM_CACHE"):
        return Path(os.environ["GEOPS_JVM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "geops" / "jvm"


def pom(bundle: str) -> Path:
    """The build file that pins ``bundle``'s artifacts."""
    if bundle not in BUNDLES:
        raise JvmError(f"unknown JVM bundle '{bundle}' (known: {', '.join(BUNDLES)})")
    return JVM_DIR / bundle / "pom.xml"


def pinned_version(bundle: str, prop: str) -> str:
    """The value of ``<prop>`` in the bundle's pom (e.g. ``kafka.version``)."""
    import xml.etree.ElementTree as ET

    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = ET.parse(pom(bundle)).getroot().find(f"m:properties/m:{prop}", ns)
    if node is None or not node.text:
        raise JvmError(f"{pom(bundle)} has no <{prop}> property")
    return node.text.strip()


def _env_override(bundle: str) -> Path | None:
    value = os.environ.get(f"GEOPS_{bundle.upper().replace('-', '_')}_LIBS")
    return Path(value) if value else None


def bundle_dir(bundle: str) -> Path:
    """The cache folder of ``bundle`` as pinned now (it may not be resolved yet)."""
    digest = hashlib.sha256(pom(bundle).read_bytes()).hexdigest()[:12]
    return cache_root() / f"{bundle}-{digest}"


def jars(bundle: str, resolve_missing: bool = True) -> list[Path]:
    """The jar files of ``bundle``, resolving them first when they are not in the cache."""
    override = _env_override(bundle)
    if override is not None:
        found = sorted(override.glob("*.jar"))
        if not found:
            raise JvmError(f"GEOPS_{bundle.upper().replace('-', '_')}_LIBS={override} holds no "
                           f".jar files")
        return found
    folder = bundle_dir(bundle)
    if not (folder / _DONE).exists():
        if not resolve_missing:
            raise JvmError(f"the {bundle} jars are not resolved yet; run "
                           f"`python -m kafkaio.jvm` (needs Maven and Maven Central once)")
        resolve(bundle)
    return sorted(folder.glob("*.jar"))


def classpath(bundle: str) -> str:
    """A ``java -cp`` value naming every jar of ``bundle``."""
    return os.pathsep.join(str(j) for j in jars(bundle))


def resolve(bundle: str, quiet: bool = False) -> Path:
    """Copy ``bundle``'s pinned jars into the cache unless already there; returns the folder."""
    folder = bundle_dir(bundle)
    if (folder / _DONE).exists():
        return folder
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JvmError(
            f"Maven (mvn) is needed once to fetch the {bundle} jars from Maven Central: install "
            f"it (e.g. apt-get install maven), or put the jars of {pom(bundle)}'s dependencies "
            f"in a folder and name it with GEOPS_{bundle.upper().replace('-', '_')}_LIBS")
    if not quiet:
        print(f"geops: resolving the {bundle} jars from Maven Central into {folder} (once)",
              file=sys.stderr)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{bundle}-", dir=folder.parent))
    cmd = [mvn, "-q", "-B", "-f", str(pom(bundle)), "dependency:copy-dependencies",
           f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise JvmError(f"Maven could not resolve the {bundle} jars ({' '.join(cmd)}):\n{tail}")
    (staging / _DONE).write_text(pom(bundle).read_text())
    try:
        staging.rename(folder)
    except OSError:  # resolved meanwhile by another process
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def main() -> int:
    """Resolve every bundle not yet in the cache (quietly when all are)."""
    try:
        for bundle in BUNDLES:
            if _env_override(bundle) is None:
                resolve(bundle)
    except JvmError as exc:
        print(one_line(exc, "geops"), file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
