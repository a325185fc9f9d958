"""deploy/Containerfile and Containerfile.cuda, read as text, against the binary and tools/install_deps.sh.

- The runtime stage's apt-get list brings every shared library the built binary needs: each library
  `ldd` lists maps (`dpkg -S`) to a listed package or to one of their dependencies (`dpkg-query`).
  Skips that case (with the reason) where ldd or dpkg are missing.
- The builder installs only packages tools/install_deps.sh installs, and both files install the same;
  it configures Release with tests and benchmarks off and builds the `parallm` target.
- The runtime runs as a non-root user, exposes 8000, checks /health (deploy/parallm-healthcheck), starts
  `parallm serve --host 0.0.0.0`.

usage: containerfile_test.py --binary build/parallm [--source REPO]
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_common as dc  # noqa: E402

ARGS = None


def instructions(path):
    """[(stage name, INSTRUCTION, rest)] with line continuations joined and comments dropped."""
    text, stage, out = "", None, []
    with open(path) as f:
        lines = [ln for ln in f.read().splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    for ln in joined.splitlines():
        ln = ln.strip()
        if not ln:
            continue
        word, _, rest = ln.partition(" ")
        word = word.upper()
        if word == "FROM":
            m = re.search(r"\bAS\s+(\S+)", rest, re.I)
            stage = m.group(1) if m else rest
        out.append((stage, word, re.sub(r"\s+", " ", rest)))
    return out


def apt_packages(run):
    """The packages named by `apt-get install` in one RUN (flags and shell words after it left out)."""
    m = re.search(r"apt-get install ([^&;|]*)", run)
    if not m:
        return []
    return [w for w in m.group(1).split() if not w.startswith("-") and re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", w)]


def stage_packages(path, stage):
    return [p for s, w, rest in instructions(path) if s == stage and w == "RUN" for p in apt_packages(rest)]


def install_deps_packages():
    with open(os.path.join(ARGS.source, "tools", "install_deps.sh")) as f:
        body = f.read().split("packages=(", 1)[1].split("\n)", 1)[0]
    return {w for ln in body.splitlines() for w in ln.split("#", 1)[0].split()}


def containerfile(name="Containerfile"):
    return os.path.join(ARGS.source, "deploy", name)


def owning_packages(libs):
    """{library path: the package that owns it (by its path or the path it links to), or None}."""
    paths = sorted(set(libs) | {os.path.realpath(lib) for lib in libs})
    r = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True)  # one call: dpkg is slow to start
    owner = {}
    for ln in r.stdout.splitlines():
        pkgs, _, path = ln.partition(": ")
        owner[path.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    return {lib: owner.get(lib) or owner.get(os.path.realpath(lib)) for lib in libs}


def depends_closure(packages):
    """The packages and, recursively, every package they depend on (all alternatives), as installed here."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Depends},${Pre-Depends}\n"], capture_output=True,
                       text=True, check=True)
    deps = {}
    for ln in r.stdout.splitlines():
        name, _, rest = ln.partition("\t")
        deps[name] = [a.strip().split(" ", 1)[0].split(":", 1)[0] for a in re.split(r"[,|]", rest) if a.strip()]
    seen, todo = set(), list(packages)
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += deps.get(p, [])
    return seen


class RuntimeLibraries(unittest.TestCase):
    def test_runtime_packages_bring_every_library_the_binary_needs(self):
        if not (shutil.which("ldd") and shutil.which("dpkg")):
            self.skipTest("ldd or dpkg not found")
        listed = stage_packages(containerfile(), "runtime")
        self.assertTrue(listed, "no apt-get install in the runtime stage")
        out = subprocess.run(["ldd", ARGS.binary], capture_output=True, text=True, check=True).stdout
        self.assertNotIn("not found", out)
        libs = re.findall(r"=>\s+(/\S+)", out)
        self.assertTrue(libs)
        closure = depends_closure(listed)
        for lib, pkg in owning_packages(libs).items():
            with self.subTest(lib=lib, package=pkg):
                self.assertIsNotNone(pkg, f"no Debian package owns {lib}")
                self.assertIn(pkg, closure, f"{lib} ({pkg}) is neither in the runtime list {listed} nor a dependency")


class Build(unittest.TestCase):
    def test_builder_packages_come_from_install_deps_and_agree(self):
        deps = install_deps_packages()
        cpu = stage_packages(containerfile(), "builder")
        cuda = stage_packages(containerfile("Containerfile.cuda"), "builder")
        self.assertTrue(cpu)
        self.assertLessEqual(set(cpu), deps, "builder packages that tools/install_deps.sh does not install")
        self.assertEqual(sorted(cpu), sorted(cuda))

    def test_builder_builds_the_release_binary_only(self):
        for name in ("Containerfile", "Containerfile.cuda"):
            runs = " ".join(r for s, w, r in instructions(containerfile(name)) if s == "builder" and w == "RUN")
            with self.subTest(file=name):
                for needle in ("-DCMAKE_BUILD_TYPE=Release", "-DPARALLM_TESTS=OFF", "-DPARALLM_BENCH=OFF",
                               "--target parallm"):
                    self.assertIn(needle, runs)
        self.assertIn("-DPARALLM_CUDA=ON", " ".join(r for _, _, r in instructions(containerfile("Containerfile.cuda"))))

    def test_runtime_user_port_health_and_entrypoint(self):
        for name in ("Containerfile", "Containerfile.cuda"):
            ins = [(w, r) for s, w, r in instructions(containerfile(name)) if s == "runtime"]
            with self.subTest(file=name):
                words = dict(ins)  # the last of each
                self.assertNotIn(words["USER"].split(":")[0], ("root", "0"))
                self.assertEqual(words["EXPOSE"], "8000")
                self.assertIn('CMD ["parallm-healthcheck"]', words["HEALTHCHECK"])
                self.assertIn("deploy/parallm-healthcheck /usr/local/bin/parallm-healthcheck",
                              [r for w, r in ins if w == "COPY"])
                self.assertEqual(words["ENTRYPOINT"], '["parallm", "serve", "--host", "0.0.0.0"]')
                self.assertIn("/usr/local/bin/parallm", " ".join(r for w, r in ins if w == "COPY"))
                base = [r for s, w, r in instructions(containerfile(name)) if w == "FROM" and s == "runtime"][0]
                self.assertRegex(base, r"RUNTIME_IMAGE")
        with open(os.path.join(ARGS.source, "deploy", "parallm-healthcheck")) as f:
            self.assertIn("GET /health", f.read())
        with open(containerfile()) as f:
            text = f.read()
        self.assertIn("debian:12-slim", text)
        self.assertIn("debian:12\n", text)


if __name__ == "__main__":
    ARGS = dc.parse_args(binary=True)
    unittest.main(verbosity=2)
