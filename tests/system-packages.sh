#!/bin/sh
# The Debian packages the tests use beyond Python: headless Chromium (the email and the
# pages in a real browser), a Chinese/Japanese/Korean font for it (the translated digests),
# a colour emoji font (the 👍 / 👎 links, as mail clients draw them, in the screenshots),
# SpamAssassin (the demo digests' spam score), dovecot's IMAP server (the bounce
# mailbox, started by its test) and Postfix, for its smtp-sink (a relay that accepts
# everything at once: two relay tests and bench/fanout.py). Installs what is
# missing; without apt-get (not Debian), says so: those tests then skip with the reason.
set -eu
missing=""
[ -x /usr/bin/chromium ] || missing="$missing chromium chromium-driver"
[ -e /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || missing="$missing fonts-noto-cjk"
[ -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || missing="$missing fonts-noto-color-emoji"
command -v spamassassin >/dev/null 2>&1 || missing="$missing spamassassin"
[ -x /usr/sbin/dovecot ] || missing="$missing dovecot-imapd"
[ -x /usr/sbin/smtp-sink ] || missing="$missing postfix"
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tests/system-packages.sh: no apt-get; install$missing yourself, or the browser, spam, IMAP and smtp-sink tests skip" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
echo "installing Debian packages:$missing"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
