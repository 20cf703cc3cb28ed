#!/usr/bin/env bash
# Container and manifest test for deploy/: validates the compose file and the Kubernetes manifests
# offline, builds Peel's runtime image with podman from a debootstrapped local Debian base and the
# host-built static binary, serves through it, and stops it with SIGTERM.
#
# Runs as root on Debian 12 with only the Debian mirrors and PyPI reachable; installs what is
# missing. What it keeps between runs lives under PEEL_CI_CACHE (default /var/cache/peel-ci):
# the base rootfs tarball, podman's storage (the base image and the layer cache) and a Python venv.
#
# Environment:
#   PEEL_BINARY         use this peel binary instead of building .build-static/release/peel
#   PEEL_CI_CACHE       cache directory (default /var/cache/peel-ci)
#   PEEL_DEBIAN_MIRROR  mirror for debootstrap (default: the first bookworm one apt is set up with)
#   PEEL_K8S_VERSIONS   Kubernetes versions the manifests are validated against (default: 1.30.0,
#                       the first with the preStop sleep action, and 1.37.0, the newest the pinned
#                       kubernetes-validate ships schemas for)
#
# The last line is "N passed, N failed"; the exit status is non-zero on any failure.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPLOY="$ROOT/deploy"
CACHE=${PEEL_CI_CACHE:-/var/cache/peel-ci}
K8S_VERSIONS=${PEEL_K8S_VERSIONS:-1.30.0 1.37.0}
KUBERNETES_VALIDATE_VERSION=1.37.0
YAMLLINT_VERSION=1.38.0
BASE_IMAGE=localhost/peel-runtime-base:bookworm-v3
# redis-server is for the optional shared offline store's image (deploy/redis/Dockerfile), which
# builds on the same base: one debootstrap serves both images.
BASE_PACKAGES=libevent-core-2.1-7,libcurl4,libjemalloc2,zlib1g,libbrotli1,libhiredis0.14,libssl3,ca-certificates,redis-server
# Bump the version when the base recipe changes: the cached tarball and image are keyed on it.
BASE_RECIPE="v3 bookworm minbase $BASE_PACKAGES"
TAG="localhost/peel:test-$$"
REDIS_TAG="localhost/peel-redis:test-$$"
UP_CTR="peel-test-upstream-$$"
GW_CTR="peel-test-gateway-$$"
REDIS_CTR="peel-test-redis-$$"

PASSED=0
FAILED=0
T0=$SECONDS
WORK=$(mktemp -d /tmp/peel-container-test.XXXXXX)

log() { printf -- '-- [%3ds] %s\n' "$((SECONDS - T0))" "$*"; }
pass() { PASSED=$((PASSED + 1)); printf 'ok   %s\n' "$1"; }
fail() {
  FAILED=$((FAILED + 1)); printf 'FAIL %s\n' "$1"
  [ $# -lt 2 ] || printf '%s\n' "${@:2}" | sed 's/^/     | /'
}
# check NAME EXPECTED ACTUAL
check() { if [ "$2" == "$3" ]; then pass "$1"; else fail "$1" "expected [$2]" "got      [$3]"; fi; }
# A setup step the later checks cannot do without: record it, show the log tail, stop here.
fatal() {
  fail "$1"
  if [ -n "${2:-}" ] && [ -f "$2" ]; then tail -n 30 "$2" | sed 's/^/     | /'; fi
  exit 1
}
podman_ready() { [ -n "${CONTAINERS_CONF:-}" ] && command -v podman >/dev/null 2>&1; }

cleanup() {
  local rc=$? c
  trap - EXIT INT TERM
  if podman_ready; then
    for c in "$GW_CTR" "$UP_CTR" "$REDIS_CTR"; do
      podman container exists "$c" 2>/dev/null || continue
      if [ "$rc" -ne 0 ] || [ "$FAILED" -ne 0 ]; then
        echo "--- podman logs $c (last lines)"
        timeout 10 podman logs --tail 15 "$c" 2>&1 | sed 's/^/     | /'
      fi
      timeout 30 podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
    done
    timeout 60 podman rmi -f "$TAG" "$REDIS_TAG" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  log "finished"
  echo "$PASSED passed, $FAILED failed"
  if [ "$FAILED" -ne 0 ] && [ "$rc" -eq 0 ]; then rc=1; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# =============================================================================================
# 0. Tools: only what is missing is installed.
# =============================================================================================
if [ "$(id -u)" -ne 0 ]; then
  fatal "running as root (rootful podman and debootstrap need it)"
fi
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
need=()
for p in podman runc conmon debootstrap debian-archive-keyring python3 python3-venv curl \
         apache2-utils ca-certificates libevent-dev libcurl4-openssl-dev libjemalloc-dev zlib1g-dev libbrotli-dev pkg-config binutils; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "apt-get install ${need[*]}"
  { timeout 600 apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends "${need[@]}"
  } >"$WORK/apt.log" 2>&1 || fatal "apt-get install ${need[*]}" "$WORK/apt.log"
fi

mkdir -p "$CACHE/containers" "$CACHE/base"
VENV="$CACHE/venv"
if [ "$(cat "$VENV/.peel-versions" 2>/dev/null)" != "$KUBERNETES_VALIDATE_VERSION $YAMLLINT_VERSION" ] ||
   ! "$VENV/bin/python" -c 'import kubernetes_validate, yamllint, yaml' >/dev/null 2>&1; then
  log "python venv $VENV: kubernetes-validate $KUBERNETES_VALIDATE_VERSION, yamllint $YAMLLINT_VERSION"
  rm -rf "$VENV"
  { timeout 120 python3 -m venv "$VENV" &&
    timeout 900 "$VENV/bin/pip" install -q --disable-pip-version-check \
      "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" "yamllint==$YAMLLINT_VERSION"
  } >"$WORK/venv.log" 2>&1 || fatal "python venv with kubernetes-validate and yamllint" "$WORK/venv.log"
  echo "$KUBERNETES_VALIDATE_VERSION $YAMLLINT_VERSION" >"$VENV/.peel-versions"
fi
PY="$VENV/bin/python"

# =============================================================================================
# 1. Manifests, offline: yamllint, kubernetes-validate --strict, kustomize render, compose file.
# =============================================================================================
yaml_files=("$DEPLOY/compose.yaml" "$DEPLOY/compose.redis.yaml" "$DEPLOY"/k8s/*.yaml "$DEPLOY"/k8s-redis/*.yaml)
if "$VENV/bin/yamllint" -s -c "$DEPLOY/.yamllint" "${yaml_files[@]}" >"$WORK/yamllint.log" 2>&1; then
  pass "yamllint (deploy/.yamllint): compose files, k8s/*.yaml and k8s-redis/*.yaml"
else
  fail "yamllint (deploy/.yamllint)" "$(cat "$WORK/yamllint.log")"
fi

# Every resource file on its own; kustomization.yaml is kustomize's, not an API object.
manifests=()
for f in "$DEPLOY"/k8s/*.yaml; do [ "$(basename "$f")" == "kustomization.yaml" ] || manifests+=("$f"); done
for f in "$DEPLOY"/k8s-redis/*.yaml; do
  [ "$(basename "$f")" == "kustomization.yaml" ] || [ "$(basename "$f")" == "peel-offline-store.yaml" ] || manifests+=("$f")
done
for v in $K8S_VERSIONS; do
  if timeout 300 "$VENV/bin/kubernetes-validate" --strict -k "$v" "${manifests[@]}" >"$WORK/kv.log" 2>&1; then
    pass "kubernetes-validate --strict -k $v: ${#manifests[@]} files in deploy/k8s and deploy/k8s-redis"
  else
    fail "kubernetes-validate --strict -k $v" "$(cat "$WORK/kv.log")"
  fi
done

if command -v kubectl >/dev/null 2>&1; then
  if timeout 120 kubectl kustomize "$DEPLOY/k8s" >"$WORK/rendered.yaml" 2>"$WORK/kustomize.log" &&
     timeout 300 "$VENV/bin/kubernetes-validate" --strict -k "${K8S_VERSIONS##* }" "$WORK/rendered.yaml" >"$WORK/kv-rendered.log" 2>&1; then
    pass "kubectl kustomize deploy/k8s renders, and the result validates strictly"
  else
    fail "kubectl kustomize deploy/k8s" "$(cat "$WORK/kustomize.log" "$WORK/kv-rendered.log" 2>/dev/null)"
  fi
  check "kustomize renders every resource" "ConfigMap ConfigMap Deployment HorizontalPodAutoscaler NetworkPolicy PodDisruptionBudget Service" \
    "$(awk '/^kind:/ { print $2 }' "$WORK/rendered.yaml" | sort | tr '\n' ' ' | sed 's/ $//')"
  # The Redis overlay, rendered from a copy with a secret file of its own (never one in the tree).
  cp -r "$DEPLOY/k8s" "$DEPLOY/k8s-redis" "$WORK/"
  head -c 32 /dev/urandom | base64 >"$WORK/k8s-redis/offline-store.secret"
  if timeout 120 kubectl kustomize "$WORK/k8s-redis" >"$WORK/rendered-redis.yaml" 2>"$WORK/kustomize-redis.log" &&
     timeout 300 "$VENV/bin/kubernetes-validate" --strict -k "${K8S_VERSIONS##* }" "$WORK/rendered-redis.yaml" >"$WORK/kv-redis.log" 2>&1; then
    pass "kubectl kustomize deploy/k8s-redis renders, and the result validates strictly"
  else
    fail "kubectl kustomize deploy/k8s-redis" "$(cat "$WORK/kustomize-redis.log" "$WORK/kv-redis.log" 2>/dev/null)"
  fi
  check "kustomize renders the overlay's resources" \
    "ConfigMap ConfigMap Deployment Deployment HorizontalPodAutoscaler NetworkPolicy NetworkPolicy PodDisruptionBudget Secret Service Service" \
    "$(awk '/^kind:/ { print $2 }' "$WORK/rendered-redis.yaml" | sort | tr '\n' ' ' | sed 's/ $//')"
  check "overlay rules (secret mounted, spool kept, store URL, envFrom keys, Redis locked down and bounded)" "ok" "$("$PY" - "$WORK/rendered-redis.yaml" <<'PYEOF' 2>&1
import re, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
by = {(d["kind"], d["metadata"]["name"].rsplit("-", 1)[0] if d["kind"] == "Secret" else d["metadata"]["name"]): d for d in docs}
problems = []
def need(ok, what):
    if not ok:
        problems.append(what)
env = by[("ConfigMap", "peel")]["data"]
secret = by[("Secret", "peel-offline-store")]
peel = by[("Deployment", "peel")]["spec"]["template"]["spec"]
vol = [v for v in peel.get("volumes", []) if "secret" in v]
need(len(vol) == 1 and vol[0]["secret"]["secretName"] == secret["metadata"]["name"], "Peel mounts the generated Secret")
mount = [m for m in peel["containers"][0].get("volumeMounts", []) if vol and m["name"] == vol[0]["name"]]
need(len(mount) == 1 and mount[0].get("readOnly") is True, "the secret is mounted read-only")
need(bool(mount) and env.get("PEEL_OFFLINE_STORE_SECRET_FILE") == mount[0]["mountPath"] + "/secret", "PEEL_OFFLINE_STORE_SECRET_FILE names the mounted key")
need(list(secret.get("data", {})) == ["secret"], "the Secret holds the key as 'secret'")
need([v["configMap"]["name"] for v in peel.get("volumes", []) if "configMap" in v] == ["peel-routes"] and
     ("ConfigMap", "peel-routes") in by and
     env.get("PEEL_CONFIG", "").rsplit("/", 1)[0] in [m["mountPath"] for m in peel["containers"][0].get("volumeMounts", [])],
     "the base's config file volume (ConfigMap peel-routes) and mount are kept beside the secret's")
spool = [v["name"] for v in peel.get("volumes", []) if v.get("emptyDir", {}).get("sizeLimit")]
need(len(spool) == 1 and env.get("PEEL_SPOOL_DIR") in [m["mountPath"] for m in peel["containers"][0].get("volumeMounts", [])
                                                      if m["name"] == spool[0]],
     "the base's spool emptyDir (sizeLimit) and its mount at PEEL_SPOOL_DIR are kept beside the secret's")
# The overlay's patch adds keys to the ConfigMap envFrom loads: each must be a variable name too.
bad = sorted(k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k))
need(not bad, "the ConfigMap peel (envFrom) has only variable names as keys, not %s" % bad)
svc = by[("Service", "peel-redis")]
need(env.get("PEEL_OFFLINE_STORE") == "redis://peel-redis:%d/0" % svc["spec"]["ports"][0]["port"], "PEEL_OFFLINE_STORE names the Redis Service")
need(env.get("PEEL_OFFLINE_CACHE", "0") not in ("", "0"), "the offline cache is on")
rd = by[("Deployment", "peel-redis")]["spec"]
pod = rd["template"]["spec"]
c = pod["containers"][0]
need(svc["spec"]["selector"] == rd["selector"]["matchLabels"], "the Redis Service selects the Redis pod")
args = c.get("args", [])
need("--maxmemory" in args and "--maxmemory-policy" in args and args[args.index("--maxmemory-policy") + 1] == "allkeys-lru",
     "Redis bounded by maxmemory with allkeys-lru")
mm = args[args.index("--maxmemory") + 1] if "--maxmemory" in args else "0"
limit = c["resources"]["limits"]["memory"]
need(mm.endswith("mb") and limit.endswith("Mi") and int(mm[:-2]) < int(limit[:-2]), "maxmemory below the memory limit")
need(pod["securityContext"].get("runAsNonRoot") is True and c["securityContext"].get("readOnlyRootFilesystem") is True
     and c["securityContext"].get("capabilities", {}).get("drop") == ["ALL"], "Redis runs non-root, read-only, no capabilities")
np = by[("NetworkPolicy", "peel-redis")]["spec"]
need(np["podSelector"]["matchLabels"] == rd["selector"]["matchLabels"], "the NetworkPolicy covers the Redis pod")
need(np["ingress"][0]["from"][0]["podSelector"]["matchLabels"] == by[("Deployment", "peel")]["spec"]["selector"]["matchLabels"],
     "only Peel's pods may reach Redis")
print("ok" if not problems else "missing: " + "; ".join(problems))
PYEOF
)"
else
  log "kubectl not installed: kustomization.yaml is checked by yamllint and the rules below"
fi

# The promises the issue makes about the manifests, read from the files.
check "manifest rules (probes, preStop, grace period, security, HPA, PDB, NetworkPolicy, config file, envFrom keys, spool emptyDir)" "ok" "$("$PY" - "$DEPLOY/k8s" <<'PYEOF' 2>&1
import json, os, re, sys, yaml
d = sys.argv[1]
# One document of each kind, but ConfigMaps by name: peel (settings) and peel-routes (config file).
docs, cms = {}, {}
for name in os.listdir(d):
    if name.endswith(".yaml"):
        for doc in yaml.safe_load_all(open(os.path.join(d, name))):
            if doc["kind"] == "ConfigMap":
                cms[doc["metadata"]["name"]] = doc
            else:
                docs[doc["kind"]] = doc
problems = []
def need(ok, what):
    if not ok:
        problems.append(what)
kust = docs["Kustomization"]
need(sorted(kust["resources"]) == sorted(n for n in os.listdir(d) if n.endswith(".yaml") and n != "kustomization.yaml"),
     "kustomization lists every manifest")
dep = docs["Deployment"]["spec"]
pod = dep["template"]["spec"]
c = pod["containers"][0]
need(sorted(cms) == ["peel", "peel-routes"], "two ConfigMaps, peel (settings) and peel-routes (the config file)")
env = cms.get("peel", {}).get("data", {})
files_cm = cms.get("peel-routes", {}).get("data", {})
need(dep["replicas"] == 2, "2 replicas")
need(c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}, "liveness /healthz on admin")
need(c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}, "readiness /readyz on admin")
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
need(env["PEEL_ADMIN_LISTEN"].endswith(":%d" % ports["admin"]), "admin port matches PEEL_ADMIN_LISTEN")
need(env["PEEL_LISTEN"].endswith(":%d" % ports["http"]), "http port matches PEEL_LISTEN")
rp = c["readinessProbe"]
pause = c["lifecycle"]["preStop"]["sleep"]["seconds"]
need(pause > rp["periodSeconds"] * rp.get("failureThreshold", 3), "preStop pause longer than the readiness window")
drain, shut = float(env["PEEL_DRAIN_DELAY"]), float(env["PEEL_SHUTDOWN_TIMEOUT"])
need(pod["terminationGracePeriodSeconds"] > pause + drain + shut, "grace period above pause + drain + shutdown")
need(pod["securityContext"].get("runAsNonRoot") is True, "runAsNonRoot")
need(pod["securityContext"].get("seccompProfile", {}).get("type") == "RuntimeDefault", "seccomp RuntimeDefault")
sc = c["securityContext"]
need(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
need(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation false")
need(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities drop ALL")
need(all(k in c["resources"].get(s, {}) for s in ("requests", "limits") for k in ("cpu", "memory")) or
     ("memory" in c["resources"]["limits"] and "cpu" in c["resources"]["requests"]), "resources set")
need([e.get("configMapRef", {}).get("name") for e in c.get("envFrom", [])] == ["peel"], "env from the ConfigMap peel alone")
# envFrom makes every key of the ConfigMap peel a variable. Kubernetes admits dots and dashes in
# those names (newer releases nearly any character), so a file kept there (peel.json) would become
# one more variable holding the whole file: its keys must be portable variable names.
bad = sorted(k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k))
need(not bad, "the ConfigMap peel (envFrom) has only variable names as keys, not %s" % bad)
# Issue 27: two backends, the groups and routes in peel.json, the ConfigMap peel-routes' only key,
# mounted read-only where PEEL_CONFIG points; no PEEL_UPSTREAM (a file with routes needs none).
need("PEEL_UPSTREAM" not in env, "no PEEL_UPSTREAM in the ConfigMap peel (the routes say where calls go)")
need(list(files_cm) == ["peel.json"], "the ConfigMap peel-routes holds peel.json alone")
try:
    peel_json = json.loads(files_cm.get("peel.json", ""))
except ValueError as e:
    peel_json = {}
    problems.append("the ConfigMap peel-routes' peel.json is not JSON: %s" % e)
groups, routes = peel_json.get("upstreams", {}), peel_json.get("routes", [])
need(len(groups) == 2 and all(g.get("endpoints") for g in groups.values()), "peel.json: two groups, each with endpoints")
need(len(routes) >= 2 and all(r.get("upstream") in groups for r in routes), "peel.json: routes, each naming a group")
need(sorted({r.get("upstream") for r in routes}) == sorted(groups), "peel.json: every group has a route")
cfg_vols = {v["name"]: v["configMap"] for v in pod.get("volumes", []) if "configMap" in v}
cfg_mounts = [m for m in c.get("volumeMounts", []) if m["name"] in cfg_vols]
need(len(cfg_mounts) == 1 and cfg_vols[cfg_mounts[0]["name"]]["name"] == "peel-routes",
     "one volume, from the ConfigMap peel-routes, is mounted")
need(all(m.get("readOnly") is True and "subPath" not in m for m in cfg_mounts), "the config volume is mounted read-only, whole")
need(all(v.get("defaultMode") == 0o444 for v in cfg_vols.values()), "the config volume's files are mode 0444")
# The file in the mount: the item's path when the volume picks keys, else the key's own name.
files = []
if cfg_mounts:
    items = cfg_vols[cfg_mounts[0]["name"]].get("items")
    names = [i["path"] for i in items if i["key"] == "peel.json"] if items is not None else [k for k in files_cm if k == "peel.json"]
    files = [cfg_mounts[0]["mountPath"].rstrip("/") + "/" + n for n in names]
need(files == [env.get("PEEL_CONFIG")], "PEEL_CONFIG names the mounted peel.json")
# Issue 35: big answers are spooled to PEEL_SPOOL_DIR, which the read-only root cannot be: an
# emptyDir on disk (a tmpfs would count against the memory limit) mounted writable there, whose
# sizeLimit (past it the kubelet evicts the pod) sits above the disk budget Peel refuses at.
def quantity(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|KiB|MiB|GiB)?", str(q))
    return int(m.group(1)) * {None: 1, "Ki": 1024, "Mi": 1 << 20, "Gi": 1 << 30}[m.group(2) and m.group(2)[:2]] if m else None
spool_vols = {v["name"]: v["emptyDir"] for v in pod.get("volumes", []) if "emptyDir" in v}
spool_mounts = [m for m in c.get("volumeMounts", []) if m["name"] in spool_vols and m["mountPath"] == env.get("PEEL_SPOOL_DIR")]
need(len(spool_mounts) == 1 and spool_mounts[0].get("readOnly") is not True, "an emptyDir mounted writable where PEEL_SPOOL_DIR points")
spool = spool_vols[spool_mounts[0]["name"]] if spool_mounts else {}
need(spool.get("medium", "") == "" and spool.get("sizeLimit"), "the spool emptyDir is on disk, with a sizeLimit")
max_spooled = quantity(env.get("PEEL_MAX_SPOOLED", "1073741824"))
need(quantity(spool.get("sizeLimit", "0")) and max_spooled and 0 < max_spooled < quantity(spool.get("sizeLimit", "0")),
     "PEEL_MAX_SPOOLED (%s) below the spool's sizeLimit (%s)" % (env.get("PEEL_MAX_SPOOLED"), spool.get("sizeLimit")))
hpa = docs["HorizontalPodAutoscaler"]
need(hpa["apiVersion"] == "autoscaling/v2" and hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu", "HPA v2 on cpu")
need(hpa["spec"]["scaleTargetRef"]["name"] == docs["Deployment"]["metadata"]["name"], "HPA targets the Deployment")
need(docs["PodDisruptionBudget"]["spec"]["minAvailable"] == 1, "PDB minAvailable 1")
sel = dep["selector"]["matchLabels"]
need(docs["Service"]["spec"]["selector"] == sel, "Service selects the pods")
need(docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == sel, "PDB selects the pods")
# Issue 18: the admin port is admitted only from monitoring pods; the client port from anyone.
np = docs["NetworkPolicy"]["spec"]
need(np["podSelector"]["matchLabels"] == sel and np["policyTypes"] == ["Ingress"], "NetworkPolicy selects the pods, Ingress")
admin_rules = [r for r in np["ingress"] if any(p["port"] in ("admin", ports["admin"]) for p in r.get("ports", []))]
need(len(admin_rules) == 1 and admin_rules[0].get("from") == [{"podSelector": {"matchLabels": {"peel.example/monitoring": "true"}}}],
     "admin port only from pods labelled peel.example/monitoring=true")
need(all("from" in r or all(p["port"] in ("http", ports["http"]) for p in r.get("ports", [])) for r in np["ingress"]),
     "only the client port is open to everyone")
print("ok" if not problems else "missing: " + "; ".join(problems))
PYEOF
)"

# No Compose here, so compose.yaml's promises are read from the file: ports on loopback only, a
# healthcheck and the same lock-down on every service, Peel waiting for both demo upstreams to be
# healthy, and Peel's groups and routes in peel.json, mounted read-only where PEEL_CONFIG points.
check "compose.yaml: loopback ports, healthchecks, lock-down, depends_on service_healthy, peel.json mounted, spool tmpfs" "ok" "$("$PY" - "$DEPLOY/compose.yaml" <<'PYEOF' 2>&1
import json, os, re, sys, yaml
services = yaml.safe_load(open(sys.argv[1]))["services"]
problems = []
for name, svc in services.items():
    if not svc.get("healthcheck", {}).get("test"):
        problems.append(name + ": no healthcheck")
    for port in svc.get("ports", []):
        if not str(port).startswith("127.0.0.1:"):
            problems.append(name + ": port " + str(port) + " is not on 127.0.0.1")
    if svc.get("read_only") is not True or svc.get("cap_drop") != ["ALL"] or \
       "no-new-privileges:true" not in svc.get("security_opt", []):
        problems.append(name + ": not read_only, cap_drop ALL and no-new-privileges")
peel = services["peel"]
# Each demo upstream and the port it listens on, from its command.
listen = {}
for name in ("demo-upstream", "pay-upstream"):
    cmd = services.get(name, {}).get("command") or [None]
    if cmd[0] != "demo-upstream" or "--listen" not in cmd:
        problems.append(name + ": command is not peel demo-upstream --listen")
        continue
    listen[name] = cmd[cmd.index("--listen") + 1].rsplit(":", 1)[1]
    if peel.get("depends_on", {}).get(name, {}).get("condition") != "service_healthy":
        problems.append("peel: depends_on " + name + " is not service_healthy")
env = peel.get("environment", {})
if "PEEL_UPSTREAM" in env:
    problems.append("peel: PEEL_UPSTREAM is set (the routes in peel.json say where calls go)")
mounts = {}
for v in peel.get("volumes", []):
    if isinstance(v, str):
        parts = v.split(":")
        mounts[parts[1]] = (parts[0], len(parts) > 2 and "ro" in parts[2].split(","))
    else:
        mounts[v.get("target")] = (v.get("source"), v.get("read_only") is True)
# Issue 35: the read-only root cannot hold the spool: a tmpfs or a writable volume where
# PEEL_SPOOL_DIR points, a tmpfs sized above the disk budget Peel refuses at.
spool_dir = env.get("PEEL_SPOOL_DIR")
tmpfs = peel.get("tmpfs") or []
tmpfs = {t.split(":", 1)[0]: dict(o.split("=", 1) for o in t.split(":", 1)[1].split(",") if "=" in o) if ":" in t else {}
         for t in ([tmpfs] if isinstance(tmpfs, str) else tmpfs)}
if not spool_dir:
    problems.append("peel: no PEEL_SPOOL_DIR")
elif spool_dir in tmpfs:
    size = re.fullmatch(r"(\d+)([kmg]?)", tmpfs[spool_dir].get("size", ""))
    size = int(size.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[size.group(2)] if size else 0
    if size <= int(env.get("PEEL_MAX_SPOOLED", 1 << 30)):
        problems.append("peel: the spool tmpfs has no size above PEEL_MAX_SPOOLED")
elif spool_dir not in mounts or mounts[spool_dir][1]:
    problems.append("peel: no tmpfs or writable volume where PEEL_SPOOL_DIR points")
source, ro = mounts.get(env.get("PEEL_CONFIG"), (None, False))
if source is None:
    problems.append("peel: nothing mounted where PEEL_CONFIG points")
elif not ro:
    problems.append("peel: the config file is not mounted read-only")
else:
    path = os.path.normpath(os.path.join(os.path.dirname(sys.argv[1]), source))
    try:
        cfg = json.load(open(path))
    except (OSError, ValueError) as e:
        cfg = {}
        problems.append("peel.json: %s" % e)
    groups, routes = cfg.get("upstreams", {}), cfg.get("routes", [])
    if len(groups) != 2:
        problems.append("peel.json: %d groups, not 2" % len(groups))
    if len(routes) < 2 or any(r.get("upstream") not in groups for r in routes):
        problems.append("peel.json: not two or more routes each naming a group")
    # Every group's endpoints are demo upstream services of this file, on the ports they listen on.
    named = sorted("%s:%s" % (n, p) for n, p in listen.items())
    used = sorted(e.split("//", 1)[-1] for g in groups.values() for e in g.get("endpoints", []) if isinstance(e, str))
    if used != named:
        problems.append("peel.json: endpoints %s are not the demo upstreams %s" % (used, named))
print("; ".join(problems) or "ok")
PYEOF
)"
check "compose.redis.yaml: Redis healthy first, the store and its secret for Peel, no published port" "ok" "$("$PY" - "$DEPLOY/compose.redis.yaml" <<'PYEOF' 2>&1
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
services = doc["services"]
problems = []
redis, peel = services["redis"], services["peel"]
if redis.get("ports"):
    problems.append("redis publishes a port")
if not redis.get("healthcheck", {}).get("test"):
    problems.append("redis: no healthcheck")
if peel.get("depends_on", {}).get("redis", {}).get("condition") != "service_healthy":
    problems.append("peel: depends_on redis is not service_healthy")
env = peel.get("environment", {})
if env.get("PEEL_OFFLINE_STORE") != "redis://redis:6379/0":
    problems.append("peel: PEEL_OFFLINE_STORE is not the redis service")
if env.get("PEEL_OFFLINE_STORE_SECRET_FILE") != "/run/secrets/offline_store_secret" or "offline_store_secret" not in peel.get("secrets", []):
    problems.append("peel: the secret is not mounted where PEEL_OFFLINE_STORE_SECRET_FILE says")
if "offline_store_secret" not in doc.get("secrets", {}):
    problems.append("no top-level offline_store_secret")
print("; ".join(problems) or "ok")
PYEOF
)"

# =============================================================================================
# 2. The binary: the Swift runtime linked in, so glibc, libstdc++, libevent and libcurl remain.
# =============================================================================================
if [ -n "${PEEL_BINARY:-}" ]; then
  BIN=$PEEL_BINARY
else
  command -v swift >/dev/null 2>&1 || fatal "swift on PATH (or in /opt/swift/usr/bin)"
  log "swift build -c release --static-swift-stdlib --scratch-path .build-static"
  (cd "$ROOT" && timeout 2400 swift build -c release --static-swift-stdlib --scratch-path .build-static) \
    >"$WORK/swift-build.log" 2>&1 || fatal "swift build -c release --static-swift-stdlib" "$WORK/swift-build.log"
  BIN="$ROOT/.build-static/release/peel"
fi
[ -x "$BIN" ] || fatal "peel binary at $BIN"
check "binary links no Swift runtime library" "" "$(ldd "$BIN" | grep -i -E 'swift|foundation|dispatch' || true)"

# =============================================================================================
# 3. Podman without a Docker engine, systemd or a registry: two config files passed by
#    environment (nothing under /etc changes) and a storage of Peel's own under the cache.
# =============================================================================================
cat >"$CACHE/containers/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
cat >"$CACHE/containers/storage.conf" <<EOF
[storage]
driver = "vfs"
runroot = "/run/peel-ci/containers"
graphroot = "$CACHE/containers/storage"
EOF
export CONTAINERS_CONF="$CACHE/containers/containers.conf"
export CONTAINERS_STORAGE_CONF="$CACHE/containers/storage.conf"

# Containers and images left by an earlier run that was killed before its cleanup ran.
for c in $(podman ps -a --format '{{.Names}}' 2>/dev/null | grep -E '^peel-test-(upstream|gateway|redis)-[0-9]+$'); do
  kill -0 "${c##*-}" 2>/dev/null || timeout 30 podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
done
for i in $(podman images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -E '^localhost/peel(-redis)?:test-[0-9]+$'); do
  kill -0 "${i##*-}" 2>/dev/null || timeout 60 podman rmi -f "$i" >/dev/null 2>&1 || true
done

# The mirror apt is set up with (bookworm, plain http or https), else Debian's redirector.
debian_mirror() {
  if [ -n "${PEEL_DEBIAN_MIRROR:-}" ]; then echo "$PEEL_DEBIAN_MIRROR"; return; fi
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
      function flush() { if (deb && suite && uri != "" && !found) { print uri; found = 1 }; deb = suite = 0; uri = "" }
      /^[ \t]*$/ { flush(); next }
      tolower($1) == "types:"  { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == "bookworm") suite = 1 }
      tolower($1) == "uris:"   { for (i = 2; i <= NF; i++) if (uri == "" && $i ~ /^https?:\/\//) uri = $i }
      END { flush() }')
  if [ -z "$m" ]; then
    m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | sed -E 's/\[[^]]*\]//' |
        awk '$1 == "deb" && $3 == "bookworm" && $2 ~ /^https?:\/\// { print $2; exit }')
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

base_key=$(printf '%s' "$BASE_RECIPE" | sha256sum | cut -c1-16)
base_tar="$CACHE/base/peel-runtime-base-bookworm-$base_key.tar"
base_label() { podman image inspect --format '{{index .Labels "peel.base-key"}}' "$BASE_IMAGE" 2>/dev/null; }
(
  # One run at a time makes the base; a concurrent one waits for it (bounded).
  flock -w 1200 9 || { echo "timed out waiting for $CACHE/base/lock"; exit 1; }
  if [ "$(base_label)" == "$base_key" ]; then echo "status: cached image"; exit 0; fi
  if [ ! -s "$base_tar" ]; then
    mirror=$(debian_mirror)
    rootfs="$CACHE/base/rootfs.tmp"
    rm -rf "$rootfs"
    echo "status: debootstrap from $mirror"
    timeout 1200 debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$rootfs" "$mirror" || exit 1
    # Nothing the image needs: downloaded packages, package lists, documentation.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
           "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
    tar --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar" || exit 1
    rm -rf "$rootfs"
  fi
  [ -n "${mirror:-}" ] || echo "status: imported from the cached $base_tar"
  timeout 600 podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --change "LABEL peel.base-key=$base_key" \
    "$base_tar" "$BASE_IMAGE" >/dev/null || exit 1
) 9>"$CACHE/base/lock" >"$WORK/base.log" 2>&1
[ "$(base_label)" == "$base_key" ] || fatal "runtime base image $BASE_IMAGE" "$WORK/base.log"
pass "runtime base image $BASE_IMAGE ($(sed -n 's/^status: //p' "$WORK/base.log" | tr '\n' ' ' | sed 's/ $//'))"

# =============================================================================================
# 4. The image: deploy/Dockerfile, target runtime-prebuilt, on the local base, no network.
# =============================================================================================
# A build context holding only the (stripped) binary keeps the build from walking the tree.
mkdir -p "$WORK/context/.build-static/release"
cp "$BIN" "$WORK/context/.build-static/release/peel"
strip "$WORK/context/.build-static/release/peel" 2>/dev/null || true
log "podman build -f deploy/Dockerfile --target runtime-prebuilt"
# --layers=false: one commit per stage. With the vfs driver every cached step is a whole copy of
# the root filesystem, which costs more time and disk than the two steps it would save.
timeout 900 podman build --network host --format docker --pull=never --layers=false \
  --build-arg RUNTIME_BASE="$BASE_IMAGE" --target runtime-prebuilt \
  -f "$DEPLOY/Dockerfile" -t "$TAG" "$WORK/context" >"$WORK/build.log" 2>&1 ||
  fatal "podman build deploy/Dockerfile --target runtime-prebuilt" "$WORK/build.log"
pass "podman build deploy/Dockerfile --target runtime-prebuilt ($(podman image inspect --format '{{.Size}}' "$TAG" | awk '{ printf "%d MB", $1 / 1e6 }'))"
inspect() { podman image inspect --format "$1" "$TAG" 2>&1; }
check "image USER is numeric and non-root" "10001:10001" "$(inspect '{{.Config.User}}')"
check "image ENTRYPOINT" "[peel]" "$(inspect '{{.Config.Entrypoint}}')"
check "image HEALTHCHECK" "[CMD peel healthcheck]" "$(inspect '{{.Config.Healthcheck.Test}}')"
check "image STOPSIGNAL" "SIGTERM" "$(inspect '{{.Config.StopSignal}}')"
check "image listens on all interfaces by default" "PEEL_ADMIN_LISTEN=0.0.0.0:9090 PEEL_LISTEN=0.0.0.0:8080" \
  "$(inspect '{{range .Config.Env}}{{println .}}{{end}}' | grep '^PEEL_' | sort | tr '\n' ' ' | sed 's/ $//')"
check "every library peel needs is in the image" "" \
  "$(timeout 60 podman run --rm --network host --entrypoint ldd "$TAG" /usr/local/bin/peel 2>&1 | grep 'not found')"

# The optional Redis image (deploy/redis/Dockerfile) on the same base: redis-server is already in it.
mkdir -p "$WORK/redis-context"
log "podman build -f deploy/redis/Dockerfile"
timeout 600 podman build --network host --format docker --pull=never --layers=false \
  --build-arg RUNTIME_BASE="$BASE_IMAGE" -f "$DEPLOY/redis/Dockerfile" -t "$REDIS_TAG" "$WORK/redis-context" \
  >"$WORK/build-redis.log" 2>&1 || fatal "podman build deploy/redis/Dockerfile" "$WORK/build-redis.log"
pass "podman build deploy/redis/Dockerfile (Debian's redis-server)"
check "Redis image USER is numeric and non-root" "10002:10002" "$(podman image inspect --format '{{.Config.User}}' "$REDIS_TAG" 2>&1)"

# =============================================================================================
# 5. Run it: the demo upstream and the gateway, host network, loopback ports only.
# =============================================================================================
# Ports from scripts/ports.py with one registry for the run: no port is handed out twice.
export PEEL_TEST_PORTS="$WORK/ports"
free_port() { python3 "$ROOT/scripts/ports.py"; }
UP=$(free_port); GW=$(free_port); AD=$(free_port); RP=$(free_port)
# wait_for URL SECONDS: until URL answers 2xx, at most SECONDS
wait_for() {
  local end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ]; do
    curl -fs --max-time 1 -o /dev/null "$1" && return 0
    sleep 0.2
  done
  return 1
}

timeout 60 podman run -d --name "$UP_CTR" --network host --no-healthcheck "$TAG" \
  demo-upstream --listen "127.0.0.1:$UP" >"$WORK/run-upstream.log" 2>&1 ||
  fatal "podman run $TAG demo-upstream" "$WORK/run-upstream.log"
wait_for "http://127.0.0.1:$UP/__demo/health" 20 || fatal "demo upstream container answers on 127.0.0.1:$UP"

# Redis as the overlay runs it (read-only, no capabilities), on loopback and this run's port.
timeout 60 podman run -d --name "$REDIS_CTR" --network host --no-healthcheck \
  --read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges "$REDIS_TAG" \
  --bind 127.0.0.1 --port "$RP" --protected-mode no --save '' --appendonly no --dir /tmp \
  --maxmemory 64mb --maxmemory-policy allkeys-lru >"$WORK/run-redis.log" 2>&1 ||
  fatal "podman run $REDIS_TAG" "$WORK/run-redis.log"
redis_ping=""
for _ in $(seq 1 50); do
  redis_ping=$(timeout 10 podman exec "$REDIS_CTR" redis-cli -p "$RP" ping 2>/dev/null) && [ "$redis_ping" == "PONG" ] && break
  sleep 0.2
done
check "Redis container answers PING as uid 10002" "PONG 10002" "$redis_ping $(timeout 10 podman exec "$REDIS_CTR" id -u 2>&1)"
head -c 32 /dev/urandom | base64 >"$WORK/offline-store.secret"
chmod 644 "$WORK/offline-store.secret"

# The same restrictions as the Kubernetes securityContext: read-only root filesystem, no
# capabilities, no privilege escalation. The offline cache on the Redis container, its key
# secret mounted read-only as the overlay mounts it.
timeout 60 podman run -d --name "$GW_CTR" --network host \
  --read-only --cap-drop ALL --security-opt no-new-privileges \
  -v "$WORK/offline-store.secret:/etc/peel/offline-store/secret:ro" \
  -e PEEL_OFFLINE_CACHE=16MiB -e PEEL_OFFLINE_STORE="redis://127.0.0.1:$RP/0" \
  -e PEEL_OFFLINE_STORE_SECRET_FILE=/etc/peel/offline-store/secret \
  -e PEEL_UPSTREAM="http://127.0.0.1:$UP" \
  -e PEEL_LISTEN="127.0.0.1:$GW" -e PEEL_ADMIN_LISTEN="127.0.0.1:$AD" \
  -e PEEL_PROBE_PATH=/__demo/health -e PEEL_DRAIN_DELAY=2 -e PEEL_SHUTDOWN_TIMEOUT=5 \
  "$TAG" >"$WORK/run-gateway.log" 2>&1 || fatal "podman run $TAG (gateway)" "$WORK/run-gateway.log"
wait_for "http://127.0.0.1:$AD/readyz" 20 || fatal "gateway container: /readyz 200 on 127.0.0.1:$AD"
pass "gateway container up (read-only, no capabilities), /readyz 200"

G="http://127.0.0.1:$GW"
envelope=$(curl -s --max-time 5 "http://127.0.0.1:$UP/api/user")
body=$(curl -s --max-time 5 "$G/api/user")
check "curl through the container: the envelope's data, unwrapped" "same" "$(python3 -c '
import json, sys
envelope, body = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("same" if envelope.get("code") == 0 and body == envelope["data"] else "different: " + sys.argv[2])
' "$envelope" "$body" 2>&1)"
check "curl through the container: code 7 is a 401 problem document" "401 application/problem+json" \
  "$(curl -s --max-time 5 -o /dev/null -w '%{http_code} %{content_type}' "$G/api/token-expired")"
check "gateway container: connected to the Redis container" "connected" \
  "$(curl -s --max-time 5 "http://127.0.0.1:$AD/status" | python3 -c 'import json,sys;print(json.load(sys.stdin)["offline_store"]["state"])' 2>&1)"
curl -s --max-time 5 -o /dev/null -H 'Authorization: Bearer container-test' "$G/api/user"
stored=""
for _ in $(seq 1 25); do
  stored=$(timeout 10 podman exec "$REDIS_CTR" redis-cli -p "$RP" --scan 2>&1)
  [ -n "$stored" ] && break
  sleep 0.2
done
check "a user's answer through the container lands in Redis under an HMAC key" "yes" \
  "$(echo "$stored" | grep -Eq '^peel:oc:1:[0-9a-f]{64}$' && echo yes || echo "no: $stored")"

log "ab -k -c 50 -n 5000 $G/api/user"
timeout 120 ab -q -k -s 10 -c 50 -n 5000 "$G/api/user" >"$WORK/ab.txt" 2>&1
check "ab -k -c 50 -n 5000: complete requests" "5000" "$(awk '/^Complete requests/ { print $3 }' "$WORK/ab.txt")"
check "ab -k -c 50 -n 5000: failed requests" "0" "$(awk '/^Failed requests/ { print $3 }' "$WORK/ab.txt")"
check "ab -k -c 50 -n 5000: non-2xx responses" "" "$(awk '/^Non-2xx responses/ { print $3 }' "$WORK/ab.txt")"
log "ab: $(awk '/^Requests per second/ { print $4 " requests/s" }' "$WORK/ab.txt")"

pid=$(podman inspect --format '{{.State.Pid}}' "$GW_CTR" 2>/dev/null)
if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
  log "gateway memory after ab: $(awk '/^VmHWM|^VmRSS/ { printf "%s %.1f MiB  ", $1, $2 / 1024 }' "/proc/$pid/status")"
  check "gateway process runs as uid 10001 (seen from the host)" "10001" "$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")"
else
  fail "gateway process visible from the host"
fi
check "podman exec id -u" "10001" "$(timeout 30 podman exec "$GW_CTR" id -u 2>&1)"
check "podman top: user" "10001" "$(timeout 30 podman top "$GW_CTR" huser 2>&1 | sed -n 2p | tr -d ' ')"

if timeout 30 podman healthcheck run "$GW_CTR" >"$WORK/health.log" 2>&1; then
  pass "podman healthcheck run: the image's HEALTHCHECK (peel healthcheck) passes"
else
  fail "podman healthcheck run" "$(cat "$WORK/health.log")"
fi
check "peel healthcheck fails when /healthz does not answer 200" "1" \
  "$(timeout 30 podman exec "$GW_CTR" peel healthcheck --admin-listen "127.0.0.1:$UP" >/dev/null 2>&1; echo $?)"

# compose.yaml's health tests for the two demo upstreams, run in the image against this run's port.
for svc in demo-upstream pay-upstream; do
  compose_health=$("$PY" - "$DEPLOY/compose.yaml" "$svc" "$UP" <<'PYEOF'
import sys, yaml
s = yaml.safe_load(open(sys.argv[1]))["services"][sys.argv[2]]
test = s["healthcheck"]["test"]
assert test[:3] == ["CMD", "bash", "-c"], test
port = s["command"][s["command"].index("--listen") + 1].rsplit(":", 1)[1]
assert "/dev/tcp/127.0.0.1/" + port in test[3], (port, test[3])
print(test[3].replace("/dev/tcp/127.0.0.1/" + port, "/dev/tcp/127.0.0.1/" + sys.argv[3]))
PYEOF
  )
  if [ -n "$compose_health" ] && timeout 30 podman exec "$UP_CTR" bash -c "$compose_health" >"$WORK/compose-health.log" 2>&1; then
    pass "compose.yaml's $svc healthcheck works in the image"
  else
    fail "compose.yaml's $svc healthcheck works in the image" "$compose_health" "$(cat "$WORK/compose-health.log")"
  fi
done

# =============================================================================================
# 6. SIGTERM: /readyz turns 503 during the drain delay, then exit 0 well inside `-t 10`.
# =============================================================================================
stop_start=$SECONDS
timeout 30 podman stop -t 10 "$GW_CTR" >"$WORK/stop.log" 2>&1 &
stopper=$!
ready=""
for _ in $(seq 1 50); do
  ready=$(curl -s --max-time 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$AD/readyz")
  [ "$ready" != "503" ] || break
  sleep 0.1
done
wait "$stopper"
stop_seconds=$((SECONDS - stop_start))
check "/readyz is 503 while draining" "503" "$ready"
check "podman stop -t 10 (SIGTERM): container exit code" "0" "$(podman inspect --format '{{.State.ExitCode}}' "$GW_CTR")"
if [ "$stop_seconds" -lt 10 ]; then
  pass "stopped on SIGTERM in ${stop_seconds}s, before the kill timeout"
else
  fail "stopped in ${stop_seconds}s: killed at the 10 s timeout, not by SIGTERM"
fi
timeout 10 podman logs "$GW_CTR" >"$WORK/gateway.out" 2>"$WORK/gateway.err"
check "access log: JSON lines on stdout" "ok" "$(python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("ok" if len(lines) >= 5000 and all("status" in l for l in lines) else "%d lines" % len(lines))
' "$WORK/gateway.out" 2>&1)"
check "stderr events: signal SIGTERM, draining, stopped clean" "signal:SIGTERM draining stopped:clean" "$(python3 -c '
import json, sys
seen = []
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("event") == "signal": seen.append("signal:" + str(e.get("signal")))
    if e.get("event") == "draining": seen.append("draining")
    if e.get("event") == "stopped": seen.append("stopped:" + ("clean" if e.get("clean") else "cut-short"))
print(" ".join(seen))
' "$WORK/gateway.err" 2>&1)"

# The summary line comes from cleanup, once the containers are gone.
