#!/bin/sh
# Runs a command (default: npm test) as a newcomer's machine would see this
# repository: no Docker engine, no PostgreSQL, and none of busybox, nginx, qemu, an aarch64 cross compiler,
# systemd-analyze, PostgreSQL's server programs, a registry, htpasswd, ssh or chromium. Root only: it hides them
# inside a private mount namespace (unshare -m), so nothing outside changes.
#   sudo sh scripts/as-newcomer.sh            # npm test
#   sudo sh scripts/as-newcomer.sh npm start
set -eu
[ "$(id -u)" = 0 ] || { echo "as-newcomer: run as root (it uses a private mount namespace)" >&2; exit 2; }
[ $# -gt 0 ] || set -- npm test
exec unshare -m sh -c '
  mount -t tmpfs none /run
  for b in /usr/bin/busybox /bin/busybox /usr/sbin/nginx /usr/bin/qemu-aarch64-static /usr/bin/aarch64-linux-gnu-g++ /usr/bin/systemd-analyze /usr/lib/postgresql/15/bin/initdb /usr/bin/docker-registry /usr/bin/htpasswd /usr/bin/ssh /usr/bin/chromium; do
    [ -e "$b" ] && mount --bind /dev/null "$b"
  done
  exec env -u CI DOCKER_HOST=unix:///run/no-docker.sock TEST_POSTGRES_URL=postgres://nobody:none@127.0.0.1:9/none "$@"
' as-newcomer "$@"
