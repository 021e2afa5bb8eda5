#!/bin/sh
# Carry this machine's ways of reaching the package registries into a root made with
# mmdebstrap, so that setup there reaches the same registries through the same proxy:
#
#   scripts/host-settings.sh ROOT
#
# the CA certificates (the bundle now, and as a local certificate that the root's
# ca-certificates, once installed, adds to the bundle it builds), apt's settings for
# reaching a mirror (proxies, a CA file, an archive snapshot's dates), pip's configuration
# file and cargo's. Used by scripts/fresh-host.sh and scripts/image-check.sh.
set -eu
root=${1:?usage: scripts/host-settings.sh ROOT}
[ -d "$root/etc" ] || { echo "host-settings: $root is not a root directory" >&2; exit 2; }

mkdir -p "$root/etc/ssl/certs" "$root/usr/local/share/ca-certificates"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cp /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host-bundle.crt"
apt-config dump | grep -E '^Acquire::([a-z]+::)?(Proxy|CaInfo|Check-Valid-Until|Check-Date)' \
    >"$root/etc/apt/apt.conf.d/00host-settings" || true
for f in /etc/pip.conf /etc/xdg/pip/pip.conf "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf"; do
    if [ -f "$f" ]; then cp "$f" "$root/etc/pip.conf"; break; fi
done
for f in "${CARGO_HOME:-$HOME/.cargo}/config.toml" "${CARGO_HOME:-$HOME/.cargo}/config"; do
    if [ -f "$f" ]; then mkdir -p "$root/root/.cargo" && cp "$f" "$root/root/.cargo/config.toml"; break; fi
done
