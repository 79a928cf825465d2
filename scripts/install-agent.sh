#!/usr/bin/env bash
# Installs the cm-agent on this machine from this checkout, in one command.
usage() {
  cat <<'USAGE'
Usage: scripts/install-agent.sh --control-plane URL [install options]

Installs the cm-agent on this machine as the systemd service cm-agent, in one
command: checks Node.js and Docker, installs the repository's dependencies when
they are missing, builds the agent into apps/agent/dist/cm-agent.mjs (what the
service runs), runs `doctor` (Docker, GPUs, the control plane, the token), then
`install`: writes /etc/systemd/system/cm-agent.service and
/etc/cm-agent/agent.env (mode 0600) and enables the service.

The node's agent token comes from the environment or a file, never the command
line (every user of the machine reads arguments with ps):

  AGENT_TOKEN=cmn_xxxxxxxx sudo --preserve-env=AGENT_TOKEN scripts/install-agent.sh --control-plane https://cp.example.com
  sudo scripts/install-agent.sh --control-plane https://cp.example.com --token-file /root/cm-agent.token

Options (any of `npm run agent -- install`; see apps/agent/README.md):
  --control-plane URL   the control plane
  --token-file PATH     a file (mode 0600) holding the token (or AGENT_TOKEN_FILE)
  --token TOKEN         the token itself: works, with a warning (it shows in ps)
  --config PATH         a KEY=VALUE file with the same settings
  --docker-socket PATH  Docker's socket (default /var/run/docker.sock)
  --dry-run             check, and print the files instead of installing them
  --unit-dir DIR, --env-path PATH   where to write the unit and the env file
  -h, --help            this help

Run again without options to check and reinstall what /etc/cm-agent/agent.env holds.
USAGE
}
set -euo pipefail
# Paths given relative to where the operator stands, read from the checkout's root below.
here="$PWD"
cd "$(dirname "$0")/.."

fail() { printf '✗ %s\n' "$*" >&2; exit 1; }
ok() { printf '✓ %s\n' "$*"; }

dry_run=false
doctor_args=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --token-file | --config | --env-path | --env-file | --unit-dir)
      if [[ "${args[i + 1]:-/}" != /* ]]; then args[i + 1]="$here/${args[i + 1]}"; fi ;;
    --token-file=* | --config=* | --env-path=* | --env-file=* | --unit-dir=*)
      if [[ "${args[i]#*=}" != /* ]]; then args[i]="${args[i]%%=*}=$here/${args[i]#*=}"; fi ;;
  esac
  case "${args[i]}" in
    -h | --help) usage; exit 0 ;;
    --dry-run) dry_run=true ;;
    # The options that say how to reach the control plane and Docker matter to doctor too.
    --control-plane | --token | --token-file | --config | --docker-socket) doctor_args+=("${args[i]}" "${args[i + 1]:-}"); i=$((i + 1)) ;;
    --control-plane=* | --token=* | --token-file=* | --config=* | --docker-socket=*) doctor_args+=("${args[i]}") ;;
  esac
done

if [ "$dry_run" = false ] && [ "$(id -u)" -ne 0 ]; then
  fail "run as root (sudo $0 ...): the agent drives Docker and is installed as a systemd service"
fi

command -v node >/dev/null 2>&1 || fail "Node.js 20.19 or newer is needed (https://nodejs.org/en/download, or your distribution's nodejs package)"
node_version="$(node -p 'process.versions.node')"
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' ||
  fail "Node.js $node_version is too old: 20.19 or newer is needed"
ok "Node.js $node_version"

command -v docker >/dev/null 2>&1 || fail "Docker is needed: https://docs.docker.com/engine/install/ (Debian/Ubuntu: apt-get install docker.io)"
docker info >/dev/null 2>&1 || fail "Docker is installed but does not answer: systemctl enable --now docker"
ok "Docker $(docker version --format '{{.Server.Version}}' 2>/dev/null)"

if [ ! -x node_modules/.bin/tsx ]; then
  printf 'Installing dependencies (npm ci)...\n'
  npm ci --no-audit --no-fund || fail "npm ci failed; see above"
fi

# doctor checks what `install` will write: the settings an earlier install wrote (a private CA
# among them), with the options and the environment given now over them.
case " ${doctor_args[*]-} " in
  *" --config "* | *" --config="*) ;;
  *) if [ -r /etc/cm-agent/agent.env ]; then doctor_args+=(--config /etc/cm-agent/agent.env); fi ;;
esac

# The service runs the built agent (one file, node alone), not the sources through tsx:
# half the memory at rest, and no TypeScript compiled at every start (bench/README.md, P6).
printf 'Building the agent (npm run build)...\n'
node_modules/.bin/tsx scripts/build.ts agent || fail "building the agent failed; see above"
agent=(node apps/agent/dist/cm-agent.mjs)

# doctor exits non-zero when a required check fails; nothing is installed then.
"${agent[@]}" doctor ${doctor_args[@]+"${doctor_args[@]}"} || fail "fix what doctor reports above, then run this again"

exec "${agent[@]}" install ${args[@]+"${args[@]}"}
