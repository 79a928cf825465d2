#!/usr/bin/env bash
# Installs, upgrades, rolls back or removes the control plane from a release tarball:
#
#   sudo bash install-cm-control-plane.sh                      # the embedded database
#   sudo bash install-cm-control-plane.sh --database-url-file /root/cm-database-url   # PostgreSQL
#
# Everything happens inside main(), called on the last line: a download cut short
# defines functions and runs nothing.
set -eu

# Filled in by `npm run release` (scripts/release/release.ts).
PRODUCT=cm-control-plane
VERSION="@VERSION@"
ROLLBACK_NOTE="if the newer version migrated the database, this one refuses to start (exit 78, its journal says so): restore the backup taken before the upgrade"

usage() {
  cat <<USAGE
Usage: install.sh [options]             install or upgrade cm-control-plane ${VERSION}
       install.sh --rollback            switch back to the version installed before
       install.sh --uninstall [--purge] remove it

Install (or upgrade) checks cm-control-plane-${VERSION}-linux-<x64|arm64>.tar.gz against
SHA256SUMS (both beside this script, or --tarball PATH), refuses another machine's
tarball, unpacks it into /opt/cm-control-plane/${VERSION} with its own Node runtime and
points /opt/cm-control-plane/current at it. The first install makes the system user
cm-control-plane and writes /etc/cm-control-plane/control-plane.env (mode 0640, group
cm-control-plane) from the release's example; later ones keep it. Then it enables and
(re)starts cm-control-plane.service. bin/cm-admin is linked into /usr/local/bin.

Options:
  --database-url-file PATH  first install: a file holding the PostgreSQL URL
                            (DATABASE_URL; it carries a password, so never on the
                            command line). Without it: the embedded database under
                            /var/lib/cm-control-plane
  --tarball PATH            the release tarball (default: beside this script)
  --dry-run                 print every step, change nothing
  --rollback                point current back at the previous version and restart
  --uninstall               stop and remove the service and /opt/cm-control-plane;
                            /etc/cm-control-plane (the settings) and
                            /var/lib/cm-control-plane (the embedded database) stay
  --purge                   with --uninstall: remove those too
  -h, --help                this help

A release may migrate the database when it starts: back it up before an upgrade.
CM_ROOT=DIR installs under DIR instead of / (an image being built, or a test): the
files only, no system user and no systemd.
USAGE
}

# @INSTALL_LIB@ (deploy/release/install-lib.sh: say, ok, note, fail, step, checked_tarball, unpack_aside, place_release, rollback, remove_installed, run_action)

restart_service() {
  if have_systemd; then
    step systemctl daemon-reload
    step systemctl enable cm-control-plane
    step systemctl restart cm-control-plane
    note "its log: journalctl -u cm-control-plane -f"
  else
    note "systemd is not running here${ROOT:+ (CM_ROOT=$ROOT)}: start it with your init system, as the user cm-control-plane,"
    note "with /etc/cm-control-plane/control-plane.env in its environment: /opt/cm-control-plane/current/bin/cm-control-plane"
  fi
}

# The service's user: the embedded database and the settings' group are its.
ensure_user() {
  if [ -n "$ROOT" ]; then
    note "CM_ROOT=$ROOT: no system user made"
  elif id -u cm-control-plane >/dev/null 2>&1; then
    ok "user cm-control-plane exists"
  else
    step useradd --system --home-dir /var/lib/cm-control-plane --no-create-home --shell /usr/sbin/nologin cm-control-plane
  fi
}

write_env_file() {
  local env_file="$ROOT/etc/cm-control-plane/control-plane.env"
  if [ -e "$env_file" ]; then
    ok "kept $env_file${DATABASE_URL_GIVEN:+ (--database-url-file ignored: edit the file to change it)}"
    return
  fi
  if [ "$DRY_RUN" = true ]; then
    say "would write: $env_file (mode 0640, group cm-control-plane) from the release's control-plane.env${DATABASE_URL_GIVEN:+, with DATABASE_URL=<hidden>}"
    return
  fi
  mkdir -p "$ROOT/etc/cm-control-plane"
  # umask first: a database password is never readable by others, not even for a moment.
  (
    umask 027
    {
      cat "$PREFIX/$VERSION/control-plane.env"
      if [ -n "$DATABASE_URL_GIVEN" ]; then
        printf "\n# Written by install.sh from --database-url-file.\nDATABASE_URL='%s'\n" "$DATABASE_URL_GIVEN"
      fi
    } >"$env_file"
  )
  chmod 640 "$env_file"
  if [ -z "$ROOT" ]; then chgrp cm-control-plane "$env_file"; fi
  ok "wrote $env_file (mode 0640${ROOT:+; CM_ROOT: group unchanged}): edit it for your domain, TLS and Solana settings"
}

install_release() {
  local arch tarball
  arch="$(machine_arch)"
  tarball="${TARBALL:-$HERE/cm-control-plane-${VERSION}-linux-${arch}.tar.gz}"
  checked_tarball "$arch" "$tarball"
  if [ -n "$DATABASE_URL_GIVEN" ]; then
    case "$DATABASE_URL_GIVEN" in postgres://* | postgresql://*) ;; *) fail "the database URL must be a postgres:// URL; nothing was changed" ;; esac
    # It becomes a line of the env file in single quotes, which systemd and cm-admin's shell both read
    # literally (a bare & or ; would be a command to the shell): only a quote or a space could break out.
    case "$DATABASE_URL_GIVEN" in *[[:space:]\']*) fail "the database URL holds spaces or single quotes; nothing was changed" "percent-encode them (%20, %27)" ;; esac
  fi

  # Unpacked and tried aside first: a tarball that does not run here changes nothing.
  unpack_aside "$arch" "$tarball"
  local ran
  ran="$("$UNPACKED/node/bin/node" --version 2>&1)" || fail "the release's Node runtime does not run on this machine: $ran; nothing was changed"
  [ -f "$UNPACKED/lib/control-plane.mjs" ] || fail "$(basename "$tarball") holds no lib/control-plane.mjs; nothing was changed"
  ok "cm-control-plane ${VERSION} unpacked; its own Node $ran runs on this machine"

  ensure_user
  place_release
  step mkdir -p "$ROOT/etc/systemd/system" "$ROOT/usr/local/bin"
  step cp "$PREFIX/$VERSION/cm-control-plane.service" "$ROOT/etc/systemd/system/cm-control-plane.service"
  step ln -sfn /opt/cm-control-plane/current/bin/cm-admin "$ROOT/usr/local/bin/cm-admin"
  write_env_file
  if [ "$DRY_RUN" = false ]; then
    ok "cm-control-plane ${VERSION} installed in $PREFIX/$VERSION${PREVIOUS:+ (was $PREVIOUS; --rollback goes back)}"
  fi
  restart_service
}

uninstall() {
  if have_systemd; then step systemctl disable --now cm-control-plane || true; fi
  remove_installed cm-admin
  if [ "$DRY_RUN" = true ]; then
    say "Dry run: nothing was removed."
  elif [ "$PURGE" = true ]; then
    ok "cm-control-plane removed, with its settings and its embedded database (the user cm-control-plane stays: userdel cm-control-plane)"
  else
    ok "cm-control-plane removed; kept $ROOT/etc/cm-control-plane (the settings) and $ROOT/var/lib/cm-control-plane (the embedded database; --purge removes them)"
  fi
}

main() {
  HERE="$(cd "$(dirname "$0")" && pwd)"
  ROOT="${CM_ROOT:-}"
  ROOT="${ROOT%/}"
  PREFIX="$ROOT/opt/cm-control-plane"
  DRY_RUN=false PURGE=false
  local action=install url_file=""
  TARBALL="" DATABASE_URL_GIVEN="" STAGING="" UNPACKED="" PREVIOUS=""
  while [ $# -gt 0 ]; do
    case "$1" in
      -h | --help) usage; return 0 ;;
      --dry-run) DRY_RUN=true ;;
      --rollback) action=rollback ;;
      --uninstall) action=uninstall ;;
      --purge) PURGE=true ;;
      --database-url-file | --tarball)
        [ $# -ge 2 ] || fail "$1 needs a value"
        case "$1" in
          --database-url-file) url_file="$2" ;;
          --tarball) TARBALL="$2" ;;
        esac
        shift
        ;;
      --database-url-file=*) url_file="${1#*=}" ;;
      --tarball=*) TARBALL="${1#*=}" ;;
      --database-url | --database-url=*) fail "the database URL is not taken on the command line, where every user of this machine reads it (ps)" \
        "pass --database-url-file PATH (a file of mode 0600)" ;;
      *) fail "unknown option $1 (install.sh --help lists them)" ;;
    esac
    shift
  done
  if [ -n "$url_file" ]; then
    [ -r "$url_file" ] || fail "cannot read the database URL file $url_file"
    DATABASE_URL_GIVEN="$(tr -d ' \t\r\n' <"$url_file")"
    [ -n "$DATABASE_URL_GIVEN" ] || fail "$url_file is empty"
  fi
  run_action "$action"
}

main "$@"
