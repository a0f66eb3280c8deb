"""What the dev servers need installed: Debian packages (``apt_install``), a JDK 11..22
(``find_java``, 17 preferred) and Maven-resolved jars (``maven_lib``), with the JVM flags
HBase needs on JDK 11+ (``jdk_module_flags``)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ._common import ServiceFailed, cache_dir, file_lock, run_checked

__all__ = ["apt_install", "find_java", "find_mvn", "java_major", "jdk_module_flags",
           "maven_lib", "pom_property"]


_apt_updated = False
_apt_lock = threading.Lock()


def _privileged_prefix() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo"):
        return ["sudo", "-n"]
    raise ServiceFailed("installing Debian packages needs root (or password-less sudo)")


def apt_install(packages: Sequence[str]) -> None:
    """`apt-get install -y <packages>` (after one `apt-get update` per process)."""
    global _apt_updated
    if not shutil.which("apt-get"):
        raise ServiceFailed(f"apt-get not found; install {' '.join(packages)} by hand")
    prefix = _privileged_prefix()
    log = cache_dir() / "logs" / "apt.log"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with _apt_lock, file_lock("apt"):
        if not _apt_updated:
            run_checked([*prefix, "apt-get", "update"], what="apt-get update", log=log, env=env)
            _apt_updated = True
        run_checked(
            [*prefix, "apt-get", "install", "-y", "--no-install-recommends", *packages],
            what=f"apt-get install {' '.join(packages)}",
            log=log,
            env=env,
        )


_JAVA_VERSION_RE = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_major(java: Path) -> int | None:
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _JAVA_VERSION_RE.search(out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_…"
        major = int(m.group(2))
    return major


_java_cache: Path | None = None

#: JDKs the servers accept. Hadoop's security code breaks on JDK 23+ (Subject/SecurityManager
#: removal); HBase 2.6 and Kafka 3.9 are tested on 11 and 17. 17 is preferred.
JAVA_MIN, JAVA_MAX, JAVA_PREFERRED = 11, 22, 17


def find_java(*, install: bool = True) -> Path:
    """The `java` binary of a JDK 11..22, preferring 17 (never 23+).

    Order: $LETTERLOG_JAVA_HOME, $JAVA_HOME, `java` on PATH, /usr/lib/jvm/*. When none fits and
    `install` is true, `apt-get install openjdk-17-jre-headless` and look again.
    """
    global _java_cache
    if _java_cache is not None:
        return _java_cache
    candidates: list[Path] = []
    for var in ("LETTERLOG_JAVA_HOME", "JAVA_HOME"):
        home = os.environ.get(var)
        if home:
            candidates.append(Path(home) / "bin" / "java")
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(on_path).resolve())
    jvm_root = Path("/usr/lib/jvm")
    if jvm_root.is_dir():
        candidates.extend(sorted(jvm_root.glob("*/bin/java")))
    seen: set[Path] = set()
    good: list[tuple[int, int, Path]] = []
    for idx, cand in enumerate(candidates):
        try:
            real = cand.resolve()
        except OSError:
            continue
        if real in seen or not real.is_file():
            continue
        seen.add(real)
        major = java_major(real)
        if major is None or not (JAVA_MIN <= major <= JAVA_MAX):
            continue
        good.append((0 if major == JAVA_PREFERRED else 1, idx, real))
    if good:
        good.sort()
        _java_cache = good[0][2]
        return _java_cache
    if install:
        apt_install(["openjdk-17-jre-headless"])
        return find_java(install=False)
    raise ServiceFailed(
        f"no JDK {JAVA_MIN}..{JAVA_MAX} found (JDK 17 preferred; 23+ breaks Hadoop); "
        "set LETTERLOG_JAVA_HOME"
    )


def find_mvn(*, install: bool = True) -> str:
    mvn = shutil.which("mvn")
    if mvn:
        return mvn
    if install:
        apt_install(["maven"])
        mvn = shutil.which("mvn")
        if mvn:
            return mvn
    raise ServiceFailed("Maven (`mvn`) not found; apt-get install maven")


def pom_property(pom: Path, name: str) -> str:
    m = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text())
    if not m:
        raise ServiceFailed(f"{pom}: property <{name}> not found")
    return m.group(1).strip()


def maven_lib(pom: Path, *, prefix: str, install: bool = True) -> Path:
    """Resolve the dependencies of a dependencies-only pom into a cached `lib/` dir.

    `<cache>/<prefix>-<sha256(pom)[:12]>/lib`, filled once by
    `mvn dependency:copy-dependencies`; a `.complete` marker makes re-use cheap (no mvn call).
    Maven's own `~/.m2` cache is shared between projects and runs.
    """
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    root = cache_dir() / f"{prefix}-{digest}"
    lib = root / "lib"
    marker = root / ".complete"
    if marker.exists():
        return lib
    if not install:
        raise ServiceFailed(
            f"{prefix} jars not installed yet (run `python -m devtools.devservers install`)"
        )
    with file_lock(f"maven-{prefix}"):
        if marker.exists():
            return lib
        mvn = find_mvn()
        java = find_java()
        if lib.exists():
            shutil.rmtree(lib)
        root.mkdir(parents=True, exist_ok=True)
        log = root / "mvn.log"
        env = dict(os.environ, JAVA_HOME=str(java.parent.parent))
        run_checked(
            [
                mvn,
                "-B",
                "-q",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={lib}",
                "-DincludeScope=runtime",
            ],
            what=f"resolving {prefix} jars with Maven",
            log=log,
            cwd=root,
            env=env,
        )
        if not any(lib.glob("*.jar")):
            raise ServiceFailed(f"Maven resolved no jars into {lib}", log_paths=[log])
        shutil.copyfile(pom, root / "pom.xml")
        marker.write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
    return lib


def jdk_module_flags(java_major_version: int) -> list[str]:
    """The JVM flags HBase's own `bin/hbase` adds on JDK 11+ (`add_jdk11_jvm_flags`).

    They open the JDK internals that HBase's shaded Netty, Hadoop's security code and the
    off-heap allocators reach into; without them JDK 17 fails with InaccessibleObjectException.
    """
    if java_major_version < 11:
        return []
    opens = [
        "java.base/java.io",
        "java.base/java.nio",
        "java.base/sun.nio.ch",
        "java.base/java.lang",
        "java.base/jdk.internal.ref",
        "java.base/java.lang.reflect",
        "java.base/java.util",
        "java.base/java.util.concurrent",
    ]
    exports = [
        "java.base/jdk.internal.misc",
        "java.security.jgss/sun.security.krb5",
        "java.base/sun.net.dns",
        "java.base/sun.net.util",
    ]
    flags = [
        "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
        "--add-modules",
        "jdk.unsupported",
    ]
    for o in opens:
        flags += ["--add-opens", f"{o}=ALL-UNNAMED"]
    for e in exports:
        flags += ["--add-exports", f"{e}=ALL-UNNAMED"]
    return flags
