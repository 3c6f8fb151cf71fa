# Sourced by scripts/test: the system programs some tests drive for real, from Debian's packages.
# chromium runs the dashboard's browser tests; nginx and caddy stand in front of the service in
# the tests of deploy/ (Traefik comes from a wheel of the test extra); docker-compose (when the
# docker compose plugin is missing) renders and checks docker-compose.yml without an engine;
# nodejs and npm generate, type-check and run the TypeScript client of the generated-clients test
# (Debian 12's Node.js 18 or newer); curl runs the shell uploader POST /api/v1/uploaders writes.
# Installed with apt only when missing (CI runs as root on a clean machine).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  missing+=(docker-compose)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test: please install ${missing[*]} (Debian packages); the tests drive them" >&2
    exit 1
  fi
  echo "scripts/test: installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
