#!/usr/bin/env bash
# Installs, upgrades, rolls back or removes the cm-agent from a release tarball:
#
#   sudo bash install-cm-agent.sh --control-plane https://cp.example.com --token-file /root/cm-agent.token
#
# Everything happens inside main(), called on the last line: a download cut short
# defines functions and runs nothing.
set -eu

# Filled in by `npm run release` (scripts/release/release.ts).
CM_AGENT_VERSION="@VERSION@"

usage() {
  cat <<USAGE
Usage: install.sh [options]             install or upgrade cm-agent ${CM_AGENT_VERSION}
       install.sh --rollback            switch back to the version installed before
       install.sh --uninstall [--purge] remove it

Install (or upgrade) checks cm-agent-${CM_AGENT_VERSION}-linux-<x64|arm64>.tar.gz against
SHA256SUMS (both beside this script, or --tarball PATH), refuses another machine's
tarball, unpacks it into /opt/cm-agent/${CM_AGENT_VERSION} with its own Node runtime and
points /opt/cm-agent/current at it. The first install writes /etc/cm-agent/agent.env
(mode 0600) from --control-plane and the token; later ones keep it. Then it runs
\`cm-agent doctor\` and enables and (re)starts cm-agent.service.

Options:
  --control-plane URL   the control plane (first install)
  --token-file PATH     a file (mode 0600) holding the node's agent token; or set
                        AGENT_TOKEN in the environment (never on the command line)
  --tarball PATH        the release tarball (default: beside this script)
  --skip-doctor         install and start without running \`cm-agent doctor\` first
  --dry-run             print every step, change nothing
  --rollback            point current back at the previous version and restart
  --uninstall           stop and remove the service, /opt/cm-agent and the
                        firewall rules; /etc/cm-agent (the token) and
                        /var/lib/cm-agent (the agent's state) stay
  --purge               with --uninstall: remove those too
  -h, --help            this help

CM_ROOT=DIR installs under DIR instead of / (an image being built, or a test): the
files only, no systemd and no firewall.
USAGE
}

say() { printf '%s\n' "$*"; }
ok() { printf '✓ %s\n' "$*"; }
note() { printf '  %s\n' "$*"; }
fail() {
  printf '✗ %s\n' "$1" >&2
  [ $# -lt 2 ] || printf '  fix: %s\n' "$2" >&2
  exit 1
}

# Runs a command, or in a dry run prints it. Every change to the machine goes through it.
step() {
  if [ "$DRY_RUN" = true ]; then
    printf 'would run: %s\n' "$*"
  else
    printf '+ %s\n' "$*"
    "$@"
  fi
}

machine_arch() {
  case "$(uname -m)" in
    x86_64 | amd64) echo x64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) echo "unsupported:$(uname -m)" ;;
  esac
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    openssl dgst -sha256 -r "$1" | cut -d' ' -f1
  fi
}

# Whether systemd runs this machine, and the install is for this machine.
have_systemd() {
  [ -z "$ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1
}

# The link swap: a new link beside current, renamed over it (rename is atomic).
point_current_at() {
  local version="$1"
  step ln -sfn "$version" "$PREFIX/current.new"
  step mv -fT "$PREFIX/current.new" "$PREFIX/current"
}

current_version() {
  if [ -L "$PREFIX/current" ]; then readlink "$PREFIX/current"; fi
}

restart_service() {
  if have_systemd; then
    step systemctl daemon-reload
    step systemctl enable cm-agent
    step systemctl restart cm-agent
  else
    note "systemd is not running here${ROOT:+ (CM_ROOT=$ROOT)}: start the agent with your init system:"
    note "  /opt/cm-agent/current/bin/cm-agent run --config /etc/cm-agent/agent.env"
  fi
}

check_architecture() {
  local arch="$1" tarball="$2"
  case "$arch" in unsupported:*) fail "this machine is ${arch#unsupported:}: cm-agent releases exist for x86_64 (x64) and aarch64 (arm64)" ;; esac
  case "$(basename "$tarball")" in
    *-linux-"$arch".tar.gz) ;;
    *-linux-*.tar.gz)
      local theirs="${tarball##*-linux-}"
      fail "$(basename "$tarball") is for ${theirs%.tar.gz}, this machine is $arch ($(uname -m)); nothing was changed" \
        "download cm-agent-${CM_AGENT_VERSION}-linux-${arch}.tar.gz"
      ;;
  esac
}

verify_checksum() {
  local tarball="$1" sums want got name
  sums="$(dirname "$tarball")/SHA256SUMS"
  name="$(basename "$tarball")"
  [ -r "$sums" ] || fail "no SHA256SUMS beside $tarball, so its download cannot be checked; nothing was changed" \
    "download SHA256SUMS from the same release into $(dirname "$tarball")"
  want="$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1; exit }' "$sums")"
  [ -n "$want" ] || fail "SHA256SUMS does not list $name; nothing was changed" "download the SHA256SUMS of the release $name comes from"
  got="$(sha256_of "$tarball")"
  [ "$got" = "$want" ] || fail "$name does not match SHA256SUMS (sha256 $got, expected $want): the download is damaged or not the release's; nothing was changed" \
    "download it again"
  ok "$name matches SHA256SUMS"
}

write_env_file() {
  local env_file="$ROOT/etc/cm-agent/agent.env"
  if [ -e "$env_file" ]; then
    ok "kept $env_file${CONTROL_PLANE:+ (--control-plane ignored: edit the file to change it)}"
    return
  fi
  if [ "$DRY_RUN" = true ]; then
    say "would write: $env_file (mode 0600): CONTROL_PLANE_URL=$CONTROL_PLANE, AGENT_TOKEN=<hidden>, AGENT_STATE_DIR=/var/lib/cm-agent"
    return
  fi
  mkdir -p "$ROOT/etc/cm-agent"
  chmod 700 "$ROOT/etc/cm-agent"
  # umask first: the token is never readable by others, not even for a moment.
  (
    umask 077
    {
      printf '# cm-agent configuration, read by cm-agent.service (EnvironmentFile=).\n'
      printf '# Mode 0600: it holds this node'"'"'s token. Written by install.sh.\n'
      printf 'CONTROL_PLANE_URL=%s\n' "$CONTROL_PLANE"
      printf 'AGENT_TOKEN=%s\n' "$TOKEN"
      printf 'AGENT_STATE_DIR=/var/lib/cm-agent\n'
    } >"$env_file"
  )
  chmod 600 "$env_file"
  ok "wrote $env_file (mode 0600)"
}

install_release() {
  local arch tarball version_dir previous
  arch="$(machine_arch)"
  tarball="${TARBALL:-$HERE/cm-agent-${CM_AGENT_VERSION}-linux-${arch}.tar.gz}"
  check_architecture "$arch" "$tarball"
  [ -r "$tarball" ] || fail "$tarball was not found; nothing was changed" \
    "download cm-agent-${CM_AGENT_VERSION}-linux-${arch}.tar.gz and SHA256SUMS beside this script, or pass --tarball PATH"
  verify_checksum "$tarball"

  local env_file="$ROOT/etc/cm-agent/agent.env"
  if [ ! -e "$env_file" ]; then
    [ -n "$CONTROL_PLANE" ] || fail "the first install needs the control plane; nothing was changed" "pass --control-plane URL"
    [ -n "$TOKEN" ] || fail "the first install needs this node's agent token; nothing was changed" \
      "set AGENT_TOKEN (sudo --preserve-env=AGENT_TOKEN ...) or pass --token-file PATH"
    case "$CONTROL_PLANE" in http://* | https://*) ;; *) fail "--control-plane must be an http(s) URL, not \"$CONTROL_PLANE\"; nothing was changed" ;; esac
    # Both become lines of the env file: nothing in them may start another line or quote.
    case "$CONTROL_PLANE" in *[[:space:]\"\'\\\`\$]*) fail "--control-plane holds spaces or quotes; nothing was changed" ;; esac
    case "$TOKEN" in *[!A-Za-z0-9_-]*) fail "the agent token holds characters an agent token never has (it is cmn_ and base64url); nothing was changed" \
      "copy the token again, exactly as the control plane showed it" ;; esac
  fi

  # Unpacked and tried aside first: a tarball that does not run here changes nothing.
  STAGING="$(mktemp -d "${TMPDIR:-/tmp}/cm-agent-install.XXXXXX")"
  trap 'rm -rf "$STAGING"' EXIT
  tar -xzf "$tarball" -C "$STAGING" || fail "$(basename "$tarball") could not be unpacked; nothing was changed"
  local unpacked="$STAGING/cm-agent-${CM_AGENT_VERSION}-linux-${arch}"
  [ -f "$unpacked/VERSION" ] || fail "$(basename "$tarball") does not hold cm-agent ${CM_AGENT_VERSION} for $arch; nothing was changed"
  [ "$(cat "$unpacked/ARCH")" = "$arch" ] || fail "$(basename "$tarball") holds a Node runtime for $(cat "$unpacked/ARCH"), this machine is $arch; nothing was changed"
  local ran
  ran="$("$unpacked/bin/cm-agent" version 2>&1)" || fail "the unpacked agent does not run on this machine: $ran; nothing was changed"
  ok "cm-agent $ran runs on this machine (its own Node $("$unpacked/node/bin/node" --version))"

  previous="$(current_version)"
  version_dir="$PREFIX/$CM_AGENT_VERSION"
  step mkdir -p "$PREFIX"
  if [ -e "$version_dir" ]; then step rm -rf "$version_dir"; fi
  step mv "$unpacked" "$version_dir"
  point_current_at "$CM_AGENT_VERSION"
  if [ -n "$previous" ] && [ "$previous" != "$CM_AGENT_VERSION" ]; then
    step ln -sfn "$previous" "$PREFIX/previous"
  fi
  step mkdir -p "$ROOT/etc/systemd/system" "$ROOT/usr/local/bin"
  step cp "$version_dir/cm-agent.service" "$ROOT/etc/systemd/system/cm-agent.service"
  step ln -sfn /opt/cm-agent/current/bin/cm-agent "$ROOT/usr/local/bin/cm-agent"
  write_env_file
  if [ "$DRY_RUN" = false ]; then ok "cm-agent ${CM_AGENT_VERSION} installed in $version_dir${previous:+ (was $previous; --rollback goes back)}"; fi

  if [ "$SKIP_DOCTOR" = true ]; then
    note "doctor skipped (--skip-doctor)"
  elif [ "$DRY_RUN" = true ]; then
    say "would run: $PREFIX/current/bin/cm-agent doctor --config $env_file"
  else
    say "+ cm-agent doctor --config $env_file"
    if ! "$PREFIX/current/bin/cm-agent" doctor --config "$env_file"; then
      fail "doctor found a problem (above): the agent is installed but was not started" \
        "fix it, then run this again (or: systemctl enable --now cm-agent)"
    fi
  fi
  restart_service
}

rollback() {
  local current previous
  current="$(current_version)"
  [ -L "$PREFIX/previous" ] || fail "there is no previous version in $PREFIX to roll back to${current:+ (current is $current)}"
  previous="$(readlink "$PREFIX/previous")"
  [ -d "$PREFIX/$previous" ] || fail "$PREFIX/$previous is gone: nothing to roll back to"
  point_current_at "$previous"
  [ -z "$current" ] || step ln -sfn "$current" "$PREFIX/previous"
  ok "current is $previous again (was $current; --rollback again returns to it)"
  restart_service
}

uninstall() {
  if [ -z "$ROOT" ]; then
    # The agent's own uninstall stops and disables the service and takes its firewall rules off.
    if [ -x "$PREFIX/current/bin/cm-agent" ]; then
      step "$PREFIX/current/bin/cm-agent" uninstall
    elif have_systemd; then
      step systemctl disable --now cm-agent || true
    fi
  else
    note "CM_ROOT=$ROOT: no service to stop and no firewall to clean"
  fi
  local path
  for path in "$ROOT/etc/systemd/system/cm-agent.service" "$ROOT/usr/local/bin/cm-agent" "$PREFIX"; do
    if [ -e "$path" ] || [ -L "$path" ]; then step rm -rf "$path"; fi
  done
  if have_systemd; then step systemctl daemon-reload; fi
  if [ "$PURGE" = true ]; then
    for path in "$ROOT/etc/cm-agent" "$ROOT/var/lib/cm-agent"; do
      if [ -e "$path" ]; then step rm -rf "$path"; fi
    done
    ok "cm-agent removed, with its token and state"
  else
    ok "cm-agent removed; kept $ROOT/etc/cm-agent (this node's token) and $ROOT/var/lib/cm-agent (--purge removes them)"
  fi
  note "Tenants' containers still on this machine are the control plane's to remove: retire the node there first (cm operator retire NODE)."
}

main() {
  HERE="$(cd "$(dirname "$0")" && pwd)"
  ROOT="${CM_ROOT:-}"
  ROOT="${ROOT%/}"
  PREFIX="$ROOT/opt/cm-agent"
  DRY_RUN=false SKIP_DOCTOR=false PURGE=false
  local action=install token_file=""
  CONTROL_PLANE="" TARBALL="" TOKEN="${AGENT_TOKEN:-}" STAGING=""
  while [ $# -gt 0 ]; do
    case "$1" in
      -h | --help) usage; return 0 ;;
      --dry-run) DRY_RUN=true ;;
      --skip-doctor) SKIP_DOCTOR=true ;;
      --rollback) action=rollback ;;
      --uninstall) action=uninstall ;;
      --purge) PURGE=true ;;
      --control-plane | --token-file | --tarball)
        [ $# -ge 2 ] || fail "$1 needs a value"
        case "$1" in
          --control-plane) CONTROL_PLANE="$2" ;;
          --token-file) token_file="$2" ;;
          --tarball) TARBALL="$2" ;;
        esac
        shift
        ;;
      --control-plane=*) CONTROL_PLANE="${1#*=}" ;;
      --token-file=*) token_file="${1#*=}" ;;
      --tarball=*) TARBALL="${1#*=}" ;;
      --token | --token=*) fail "the token is not taken on the command line, where every user of this machine reads it (ps)" \
        "set AGENT_TOKEN in the environment, or pass --token-file PATH" ;;
      *) fail "unknown option $1 (install.sh --help lists them)" ;;
    esac
    shift
  done
  if [ "$PURGE" = true ] && [ "$action" != uninstall ]; then fail "--purge goes with --uninstall"; fi
  if [ -n "$token_file" ]; then
    [ -r "$token_file" ] || fail "cannot read the token file $token_file"
    TOKEN="$(tr -d ' \t\r\n' <"$token_file")"
  fi
  if [ "$DRY_RUN" = false ] && [ -z "$ROOT" ] && [ "$(id -u)" -ne 0 ]; then
    fail "run as root (sudo bash $0 ...): the agent is installed under /opt and as a systemd service" "or look first with --dry-run"
  fi
  [ "$DRY_RUN" = false ] || say "Dry run: nothing on this machine is changed."
  case "$action" in
    install) install_release ;;
    rollback) rollback ;;
    uninstall) uninstall ;;
  esac
}

main "$@"
