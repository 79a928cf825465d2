#!/usr/bin/env bash
# Installs, upgrades, rolls back or removes the cm-agent from a release tarball:
#
#   sudo bash install-cm-agent.sh --control-plane https://cp.example.com --token-file /root/cm-agent.token
#
# Everything happens inside main(), called on the last line: a download cut short
# defines functions and runs nothing.
set -eu

# Filled in by `npm run release` (scripts/release/release.ts).
PRODUCT=cm-agent
VERSION="@VERSION@"

usage() {
  cat <<USAGE
Usage: install.sh [options]             install or upgrade cm-agent ${VERSION}
       install.sh --rollback            switch back to the version installed before
       install.sh --uninstall [--purge] remove it

Install (or upgrade) checks cm-agent-${VERSION}-linux-<x64|arm64>.tar.gz against
SHA256SUMS (both beside this script, or --tarball PATH), refuses another machine's
tarball, unpacks it into /opt/cm-agent/${VERSION} with its own Node runtime and
points /opt/cm-agent/current at it. The first install writes /etc/cm-agent/agent.env
(mode 0600) from --control-plane and the token; later ones keep it, but for a token
or a control plane given that differs from the file's (the machine enrolled again),
which replaces the file's, saying so. Then it runs \`cm-agent doctor\` on that file
alone, as the service reads it, and enables and (re)starts cm-agent.service.

Options:
  --control-plane URL   the control plane (first install, or to change it)
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

# @INSTALL_LIB@ (deploy/release/install-lib.sh: say, ok, note, fail, step, checked_tarball, unpack_aside, place_release, rollback, remove_installed, run_action)

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

# The value KEY has in the env file as the agent reads it (the last line setting it, unquoted).
env_value() {
  local file="$1" key="$2" line value=""
  local pattern="^[[:space:]]*(export[[:space:]]+)?${key}[[:space:]]*=[[:space:]]*(.*[^[:space:]])?[[:space:]]*$"
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ "$line" =~ $pattern ]]; then value="${BASH_REMATCH[2]}"; fi
  done <"$file"
  case "$value" in \'*\' | \"*\") value="${value:1:${#value}-2}" ;; esac
  printf '%s' "$value"
}

# The token the service would use: the env file's AGENT_TOKEN, else what its AGENT_TOKEN_FILE holds.
env_token() {
  local token file
  token="$(env_value "$1" AGENT_TOKEN)"
  file="$(env_value "$1" AGENT_TOKEN_FILE)"
  if [ -z "$token" ] && [ -n "$file" ] && [ -r "$ROOT$file" ]; then token="$(tr -d ' \t\r\n' <"$ROOT$file")"; fi
  printf '%s' "$token"
}

# Rewrites the env file with each KEY=VALUE given in place of the first line setting KEY (or
# at the end), the key's other lines dropped (KEY= drops them all), every other line kept.
# Written aside under umask 077 and renamed over it: the token is never readable by others.
set_env_values() {
  local file="$1" line key done_keys=" " pair
  shift
  local aside="$file.new"
  (
    umask 077
    while IFS= read -r line || [ -n "$line" ]; do
      key=""
      for pair in "$@"; do
        if [[ "$line" =~ ^[[:space:]]*(export[[:space:]]+)?${pair%%=*}[[:space:]]*= ]]; then key="${pair%%=*}"; break; fi
      done
      if [ -z "$key" ]; then printf '%s\n' "$line"; continue; fi
      case "$done_keys" in *" $key "*) continue ;; esac
      done_keys="$done_keys$key "
      if [ -n "${pair#*=}" ]; then printf '%s\n' "$pair"; fi
    done <"$file"
    for pair in "$@"; do
      case "$done_keys" in *" ${pair%%=*} "*) continue ;; esac
      if [ -n "${pair#*=}" ]; then printf '%s\n' "$pair"; fi
    done
  ) >"$aside"
  chmod 600 "$aside"
  mv -f "$aside" "$file"
}

write_env_file() {
  local env_file="$ROOT/etc/cm-agent/agent.env"
  if [ -e "$env_file" ]; then
    # Enrolling the machine again (a retired node, a new one): the token and the control plane
    # given replace the file's, which the service would use; its other settings stay.
    local changes=() said=() old_url
    old_url="$(env_value "$env_file" CONTROL_PLANE_URL)"
    if [ -n "$TOKEN" ] && [ "$TOKEN" != "$(env_token "$env_file")" ]; then
      changes+=("AGENT_TOKEN=$TOKEN" "AGENT_TOKEN_FILE=")
      said+=("the agent token (the one given replaces the file's)")
    fi
    if [ -n "$CONTROL_PLANE" ] && [ "$CONTROL_PLANE" != "$old_url" ]; then
      changes+=("CONTROL_PLANE_URL=$CONTROL_PLANE")
      said+=("CONTROL_PLANE_URL (${old_url:-unset} -> $CONTROL_PLANE)")
    fi
    if [ ${#changes[@]} -eq 0 ]; then
      ok "kept $env_file"
      return
    fi
    local what
    what="$(printf '%s; ' "${said[@]}")"
    what="${what%; }"
    if [ "$DRY_RUN" = true ]; then
      say "would replace in $env_file: $what (its other settings kept)"
      return
    fi
    set_env_values "$env_file" "${changes[@]}"
    printf '! replaced in %s: %s; its other settings kept\n' "$env_file" "$what" >&2
    ok "updated $env_file (mode 0600)"
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
  local arch tarball
  arch="$(machine_arch)"
  tarball="${TARBALL:-$HERE/cm-agent-${VERSION}-linux-${arch}.tar.gz}"
  checked_tarball "$arch" "$tarball"

  local env_file="$ROOT/etc/cm-agent/agent.env"
  if [ ! -e "$env_file" ]; then
    [ -n "$CONTROL_PLANE" ] || fail "the first install needs the control plane; nothing was changed" "pass --control-plane URL"
    [ -n "$TOKEN" ] || fail "the first install needs this node's agent token; nothing was changed" \
      "set AGENT_TOKEN (sudo --preserve-env=AGENT_TOKEN ...) or pass --token-file PATH"
  fi
  # Both become lines of the env file (the first install's, or in place of its old ones): nothing
  # in them may start another line or quote.
  if [ -n "$CONTROL_PLANE" ]; then
    case "$CONTROL_PLANE" in http://* | https://*) ;; *) fail "--control-plane must be an http(s) URL, not \"$CONTROL_PLANE\"; nothing was changed" ;; esac
    case "$CONTROL_PLANE" in *[[:space:]\"\'\\\`\$]*) fail "--control-plane holds spaces or quotes; nothing was changed" ;; esac
  fi
  case "$TOKEN" in *[!A-Za-z0-9_-]*) fail "the agent token holds characters an agent token never has (it is cmn_ and base64url); nothing was changed" \
    "copy the token again, exactly as the control plane showed it" ;; esac

  # Unpacked and tried aside first: a tarball that does not run here changes nothing.
  unpack_aside "$arch" "$tarball"
  local ran
  ran="$("$UNPACKED/bin/cm-agent" version 2>&1)" || fail "the unpacked agent does not run on this machine: $ran; nothing was changed"
  ok "cm-agent $ran runs on this machine (its own Node $("$UNPACKED/node/bin/node" --version))"

  place_release
  step mkdir -p "$ROOT/etc/systemd/system" "$ROOT/usr/local/bin"
  step cp "$PREFIX/$VERSION/cm-agent.service" "$ROOT/etc/systemd/system/cm-agent.service"
  step ln -sfn /opt/cm-agent/current/bin/cm-agent "$ROOT/usr/local/bin/cm-agent"
  write_env_file
  if [ "$DRY_RUN" = false ]; then ok "cm-agent ${VERSION} installed in $PREFIX/$VERSION${PREVIOUS:+ (was $PREVIOUS; --rollback goes back)}"; fi

  if [ "$SKIP_DOCTOR" = true ]; then
    note "doctor skipped (--skip-doctor)"
  elif [ "$DRY_RUN" = true ]; then
    say "would run: $PREFIX/current/bin/cm-agent doctor --config $env_file"
  else
    # The file alone, as the service reads it (EnvironmentFile=, nothing of this shell's
    # environment): the token checked is the one the service will use, never one only
    # AGENT_TOKEN here has. The agent starts itself again with the file's Node settings.
    say "+ cm-agent doctor --config $env_file"
    if ! env -i PATH="$PATH" "$PREFIX/current/bin/cm-agent" doctor --config "$env_file"; then
      fail "doctor found a problem (above): the agent is installed but was not started" \
        "fix it, then run this again (or: systemctl enable --now cm-agent)"
    fi
  fi
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
  remove_installed cm-agent
  if [ "$DRY_RUN" = true ]; then
    say "Dry run: nothing was removed."
  elif [ "$PURGE" = true ]; then
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
  CONTROL_PLANE="" TARBALL="" TOKEN="${AGENT_TOKEN:-}" STAGING="" UNPACKED="" PREVIOUS=""
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
  if [ -n "$token_file" ]; then
    [ -r "$token_file" ] || fail "cannot read the token file $token_file"
    TOKEN="$(tr -d ' \t\r\n' <"$token_file")"
  fi
  run_action "$action"
}

main "$@"
